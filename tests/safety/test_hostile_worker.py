"""Hostile workers: nothing a worker sends can fill the disk or memory, end the run with a
traceback, or write escape codes to the terminal."""
from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conformance import suite
from conformance.backends import BackendUnavailable, WorkerSpec
from conformance.dtypes import all_patterns
from conformance.worker import client, hello, protocol
from tests import worker_fakes
from tests.helpers import (
    assert_usage_error,
    fresh_workers,  # noqa: F401  (autouse: each test starts with no worker)
    run_cli,
)

TIMEOUT = 3.0


def _backend(mode: str) -> client.WorkerBackend:
    return client.connect(WorkerSpec(worker_fakes.command(mode), TIMEOUT))


REFUSALS = {"flood-stderr": worker_fakes.FLOOD_LAST_LINE, "huge-frame": "is beyond the",
            "unknown-dtype": "unknown dtype 'float17'", "list-dtypes": "header dtypes is a list",
            "width": "holds uint32 but the header says float16", "bad-hazards": "malformed tile plan or hazards",
            "bad-layout": "malformed tile plan or hazards", "compressed-payload": "payload member is compressed",
            "same-size-wrong-shape": "expected float16 of shape (65536,)"}


@pytest.mark.parametrize("mode", worker_fakes.HOSTILE_RESULTS)
def test_a_hostile_result_is_a_refused_row_not_a_traceback(mode: str, tmp_path: Path, capsys) -> None:
    result = run_cli(["run", "--backend", "golden", "--worker", worker_fakes.command(mode),
                      "--worker-timeout", str(TIMEOUT), "--dtype", "fp16", "--direction", "forward",
                      "--alpha", f"0.2,{worker_fakes.TRIGGER_ALPHA}", "--max-examples", "2", "--json", "r.json"],
                     capsys, cwd=tmp_path)
    assert result.code == 1 and "Traceback" not in result.text, result.text
    rows = json.loads((tmp_path / "r.json").read_text())["rows"]
    bad = [r for r in rows if r["verdict"] == "fail"]
    assert [r["backend"] for r in bad] == ["misbehaving"]
    assert REFUSALS[mode] in bad[0]["findings"][0]["summary"]


def test_a_flooded_stderr_keeps_only_a_bounded_tail(monkeypatch) -> None:
    monkeypatch.setattr(client, "STDERR_TAIL", 4096)
    backend = _backend("flood-stderr")
    refused = backend.forward(all_patterns("float16"), worker_fakes.TRIGGER_ALPHA).rejected
    assert worker_fakes.FLOOD_LAST_LINE in refused
    assert len(backend.worker.stderr.data) <= 4096  # of the 8 MiB it wrote


def test_a_result_frame_may_not_exceed_the_expected_value_plus_headroom(monkeypatch) -> None:
    monkeypatch.setattr(protocol, "FRAME_HEADROOM", 1024)
    backend, x = _backend("compressed-payload"), np.zeros(64, np.float16)
    assert backend.forward(x, 0.2).rejected is None  # an honest answer fits
    refused = backend.forward(x, worker_fakes.TRIGGER_ALPHA).rejected  # 4 MiB stored member: too long
    assert "is beyond the" in refused or "compressed" in refused


def test_frame_limits_fit_the_message() -> None:
    assert protocol.result_frame_limit(1 << 20) == (1 << 20) + max(protocol.FRAME_HEADROOM, 1 << 20)
    with pytest.raises(protocol.ProtocolError, match="is beyond"):
        protocol.check_prefix(protocol.PREFIX.pack(protocol.MAGIC, protocol.SMALL_FRAME + 1),
                              limit=protocol.SMALL_FRAME)


@pytest.mark.parametrize("mode, mentions", [
    ("huge-boundary", "boundary_sizes must map to"),
    ("bool-boundary", "boundary_sizes must map to"),
    ("bad-suite-pairs", "suite_pairs must be"),
    ("unknown-suite-dtype", "suite_pairs must be"),
    ("many-suite-pairs", "suite_pairs must be at most 4096"),
])
def test_a_malformed_or_unbounded_hello_is_one_line(mode: str, mentions: str, capsys) -> None:
    result = run_cli(["run", "--worker", worker_fakes.command(mode), "--dtype", "fp16"], capsys)
    assert_usage_error(result, mentions=mentions)


def test_escape_codes_in_a_hello_never_reach_the_terminal(tmp_path: Path, capsys) -> None:
    backend = _backend("escape-hello")
    assert "\x1b" not in backend.name and "\x07" not in backend.name and "[/x]" in backend.name
    assert all("\x1b" not in v for v in backend.versions.values())
    result = run_cli(["run", "--worker", worker_fakes.command("escape-hello"), "--worker-timeout", str(TIMEOUT),
                      "--dtype", "fp16", "--direction", "forward", "--alpha", "0.2"], capsys, cwd=tmp_path)
    assert "Traceback" not in result.text and "\x1b]" not in result.text and "\x07" not in result.text
    assert "misbehaving[/x]" in result.text  # shown as text, not taken as markup


def test_printable_escapes_control_characters_and_caps_length() -> None:
    assert hello.printable("a\x1b[31mb\n") == "a\\x1b[31mb\\n"
    assert len(hello.printable("x" * 10_000)) == hello.MAX_TEXT


def test_the_hello_timeout_message_names_the_time_waited(monkeypatch) -> None:
    monkeypatch.setattr(client, "START_TIMEOUT", 0.3)  # the hello's wait: at least this, or the call timeout
    silent = shlex.join([sys.executable, "-c", "import time; time.sleep(30)"])
    started = time.monotonic()
    with pytest.raises(BackendUnavailable, match=r"did not answer within 0\.3 s"):
        client.connect(WorkerSpec(silent, 0.1))
    assert 0.3 <= time.monotonic() - started < 5


@pytest.mark.parametrize("name", ["golden", "cann"])
def test_the_hello_limits_accept_every_real_backend(name: str) -> None:
    from conformance.worker import server

    message = protocol.decode(protocol.encode(server.hello(suite.backend_for(name, None, None))))
    assert len(protocol.encode(message)) < protocol.SMALL_FRAME
    assert hello.check_hello(message, command=name)["backend"] == name


def _result_payload() -> bytes:
    from conformance.records import BackendResult, Hazard, TilePlan, TileSpan

    tile_plan = TilePlan(8, (TileSpan(0, 0, 0, 8), TileSpan(1, 0, 8, 4, True)))
    result = BackendResult(np.arange(12, dtype=np.float16), tile_plan=tile_plan, hazards=(Hazard("stale", 3, (1,)),))
    return protocol.encode(protocol.result_message(result))


def test_mutated_result_payloads_are_messages_or_protocol_errors() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    payload = _result_payload()

    @settings(max_examples=300, deadline=None, database=None)
    @given(st.lists(st.tuples(st.integers(0, len(payload) - 1), st.integers(0, 255)), min_size=1, max_size=8))
    def check(edits: list[tuple[int, int]]) -> None:
        mutated = bytearray(payload)
        for at, byte in edits:
            mutated[at] = byte
        try:
            protocol.result_from(protocol.decode(bytes(mutated)))
        except protocol.ProtocolError:
            pass

    check()


@pytest.mark.parametrize("header", [
    {"type": "result", "hazards": "abc"}, {"type": "result", "hazards": [["kind", 1, [0]]]},
    {"type": "result", "layout": {"tile_elements": 8, "spans": [{"core": "0"}]}},
    {"type": "result", "layout": {"tile_elements": -1, "spans": []}},
    {"type": "result", "layout": {"tile_elements": 8, "spans": [{"core": 0, "tile": 0, "start": 0, "length": 1,
                                                                  "is_tail": "yes"}]}},
    {"type": "result", "rejected": 5},
])
def test_malformed_result_headers_are_protocol_errors(header: dict) -> None:
    with pytest.raises(protocol.ProtocolError):
        protocol.result_from(protocol.Message(header))

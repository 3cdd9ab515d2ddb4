"""The worker protocol, the client backend, and a run surviving workers that misbehave."""
from __future__ import annotations

import importlib.util
import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conformance import suite
from conformance.backends import WorkerSpec
from conformance.cases import strategies
from conformance.dtypes import DTYPES, all_patterns, from_bits
from conformance.errors import BackendUnavailable, ProtocolError
from conformance.records import BackendResult, Hazard, TilePlan, TileSpan
from conformance.render import export
from conformance.worker import client, protocol
from tests import worker_fakes
from tests.helpers import (
    assert_same_bits,
    assert_usage_error,
    children_on_the_numpy_path,
    fresh_workers,  # noqa: F401  (autouse: each test starts with no worker)
    run_cli,
)

TIMEOUT = 1.0  # seconds per call: short, so the hang cases stay quick, and long enough for an honest call
#   (a fake's answer on golden's numpy path takes milliseconds: 0.04 s measured at a load of 18 on 2 cores)
HANG_TIMEOUT = 0.3  # seconds for a worker whose first call hangs: no honest call has to fit in it


def _conformance(*args: str) -> str:
    return shlex.join([sys.executable, "-m", "conformance", "worker", *args])


# ----------------------------------------------------------------------------- protocol

@pytest.mark.parametrize("dtype", list(DTYPES))
def test_frames_carry_every_float_format_bit_for_bit(dtype: str) -> None:
    x = from_bits(np.array([0, 1, 0x7C01, 0xFFFF, 0x8000, 0x3C00], np.uint64), dtype)
    message = protocol.Message({"type": "call", "alpha": 1 / 3, "out_dtype": None}, {"x": x.reshape(2, 3)})
    back = protocol.decode(protocol.encode(message))
    assert back.header["alpha"] == 1 / 3 and back.header["out_dtype"] is None
    assert back.arrays["x"].dtype.name == dtype
    assert_same_bits(back.arrays["x"], x.reshape(2, 3), what=dtype)


def test_result_messages_keep_layout_and_hazards() -> None:
    tile_plan = TilePlan(16, (TileSpan(0, 0, 0, 16), TileSpan(1, 0, 16, 5, True)), align_elements=16)
    result = BackendResult(np.arange(21, dtype=np.float16), tile_plan=tile_plan,
                           hazards=(Hazard("out-of-bounds-write", np.int64(21), (1,)),))
    back = protocol.result_from(protocol.decode(protocol.encode(protocol.result_message(result))))
    assert back.tile_plan == tile_plan and back.hazards == result.hazards and back.rejected is None
    assert_same_bits(back.value, result.value)


def test_payloads_never_unpickle() -> None:
    import io

    buf = io.BytesIO()
    np.savez(buf, header=np.frombuffer(b'{"type": "call"}', np.uint8), x=np.array([object()], dtype=object))
    with pytest.raises(ProtocolError, match="unreadable payload"):
        protocol.decode(buf.getvalue())


@pytest.mark.parametrize("prefix, message", [
    (b"garbage!" + bytes(4), "bad frame start"),
    (protocol.MAGIC + (1 << 62).to_bytes(8, "big"), "is beyond"),
])
def test_frame_prefixes_are_checked(prefix: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        protocol.check_prefix(prefix)


# ----------------------------------------------------------------------------- round trip

def _rows(selection: suite.Selection) -> list[dict]:
    result = suite.run_suite(selection, suite.Options(max_examples=5, results_dir=None))
    return [export.row_dict(r) for r in result.rows]


def test_a_worker_serving_golden_gives_the_in_process_rows_bit_for_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    children_on_the_numpy_path(monkeypatch)  # the worker's golden is the reference path; this process's, compiled
    spec = WorkerSpec(_conformance("--backend", "golden"), 60)
    common = dict(backends=("golden",), dtypes=("bfloat16", "float32", "float16->float32"), alphas=(0.3,))
    remote = _rows(suite.Selection(**common, workers=(("golden", spec),)))
    local = _rows(suite.Selection(**common))
    assert len(remote) == 6 and json.dumps(remote, sort_keys=True) == json.dumps(local, sort_keys=True)
    assert client.connect(spec).versions["numpy"] == np.__version__
    pair = ("float16", "float16", "backward")  # golden's sizes are the default ones: the client computes them
    assert not client.connect(spec).hello["boundary_sizes"]
    assert client.connect(spec).boundary_sizes(*pair) == suite.backend_for("golden", None, None).boundary_sizes(*pair)


def test_a_cann_worker_sends_its_layout_and_hazards(monkeypatch: pytest.MonkeyPatch) -> None:
    children_on_the_numpy_path(monkeypatch)  # the worker's emulator on its instruction path; this process's, compiled
    spec = WorkerSpec(_conformance("--backend", "cann", "--variant", "tail-overrun"), 60)
    remote = client.connect(spec)
    local = suite.backend_for("cann", None, "tail-overrun")
    assert (remote.name, remote.profile, remote.variant) == ("cann", local.profile, "tail-overrun")
    x = all_patterns("float16")[:3001]
    got, want = remote.forward(x, 0.2), local.forward(x, 0.2)
    assert got.hazards and got.hazards == want.hazards and got.tile_plan == want.tile_plan
    assert_same_bits(got.value, want.value)
    pair = ("float16", "float16", "forward")
    assert remote.boundary_sizes(*pair) == local.boundary_sizes(*pair)


# ----------------------------------------------------------------------------- misbehaving workers

def _misbehaving(mode: str, *, timeout: float = TIMEOUT) -> client.WorkerBackend:
    return client.connect(WorkerSpec(worker_fakes.command(mode), timeout))


EXPECTED = {"crash": "died (exit code 3): fake: crashing now", "oom": "killed by signal 9 (out of memory?)",
            "hang": f"did not answer within {TIMEOUT:g} s", "garbage": "sent garbage",
            "wrong-shape": "returned float16 of shape (65535,); expected float16 of shape (65536,)",
            "wrong-dtype": "returned float32 of shape (65536,); expected float16 of shape (65536,)"}


@pytest.mark.parametrize("mode", worker_fakes.MODES)
def test_a_run_survives_a_misbehaving_worker(mode: str, tmp_path: Path, capsys) -> None:
    result = run_cli(["run", "--backend", "golden", "--worker", worker_fakes.command(mode),
                      "--worker-timeout", str(TIMEOUT), "--dtype", "fp16", "--direction", "forward",
                      "--alpha", f"0.2,{worker_fakes.TRIGGER_ALPHA}", "--max-examples", "2", "--json", "r.json"],
                     capsys, cwd=tmp_path)
    assert result.code == 1, result.text
    rows = json.loads((tmp_path / "r.json").read_text())["rows"]
    bad = [r for r in rows if r["verdict"] == "fail"]
    assert len(bad) == 1 and bad[0]["backend"] == "misbehaving", [r["backend"] for r in bad]
    assert [f["category"] for f in bad[0]["findings"]] == ["rejected-input"]
    assert EXPECTED[mode] in bad[0]["findings"][0]["summary"]
    intact = [r for r in rows if r is not bad[0]]
    assert len(intact) == 3 and all(r["verdict"] == "pass" and r["mismatches"] == 0 for r in intact)


def test_a_dead_worker_is_restarted_once_then_refuses_at_once() -> None:
    backend, x = _misbehaving("crash"), all_patterns("float16")
    trigger = worker_fakes.TRIGGER_ALPHA
    assert "died" in backend.forward(x, trigger).rejected
    assert backend.forward(x, 0.2).rejected is None  # restarted
    assert "died" in backend.forward(x, trigger).rejected
    started = time.monotonic()
    again = backend.forward(x, 0.2)
    assert "not restarted again" in again.rejected and time.monotonic() - started < 0.5
    assert backend.restarts == 1


def test_a_hang_costs_one_timeout() -> None:
    backend, x = _misbehaving("hang", timeout=HANG_TIMEOUT), all_patterns("float16")
    started = time.monotonic()
    assert f"did not answer within {HANG_TIMEOUT:g} s" in backend.forward(x, worker_fakes.TRIGGER_ALPHA).rejected
    assert HANG_TIMEOUT <= time.monotonic() - started < HANG_TIMEOUT + 2


def test_a_worker_that_stops_reading_costs_one_timeout_too() -> None:
    backend, x = _misbehaving("deaf", timeout=HANG_TIMEOUT), np.zeros(1 << 22, np.float32)  # 16 MiB: more
    started = time.monotonic()  # than a pipe holds
    assert f"did not answer within {HANG_TIMEOUT:g} s" in backend.forward(x, 0.2).rejected
    assert HANG_TIMEOUT <= time.monotonic() - started < HANG_TIMEOUT + 2


def test_a_worker_killed_between_calls_is_restarted() -> None:
    backend, x = _misbehaving("noisy"), all_patterns("float16")
    backend.worker.kill()
    assert backend.forward(x, 0.2).rejected is None and backend.restarts == 1


def test_closing_one_spec_ends_its_worker_and_keeps_the_others() -> None:
    quiet, noisy = (WorkerSpec(worker_fakes.command(mode), TIMEOUT) for mode in ("wrong-shape", "noisy"))
    first, other = client.connect(quiet), client.connect(noisy)
    assert client.connect(quiet) is first
    client.close(quiet)
    assert not first.worker.alive() and other.worker.alive()
    again = client.connect(quiet)
    assert again is not first and again.worker.alive() and client.connect(noisy) is other


def test_stdout_noise_in_the_worker_does_not_reach_the_frames() -> None:
    backend, x = _misbehaving("noisy"), all_patterns("float16")
    for _ in range(2):
        result = backend.forward(x, 0.2)
        assert result.rejected is None
        assert_same_bits(result.value, suite.backend_for("golden", None, None).forward(x, 0.2).value)


# ----------------------------------------------------------------------------- started ahead

def test_a_launched_worker_is_the_one_whose_hello_connect_reads() -> None:
    spec = WorkerSpec(worker_fakes.command("noisy"), TIMEOUT)
    client.launch(spec)
    started = client._LAUNCHED[spec].proc
    client.launch(spec)  # launched once
    assert client._LAUNCHED[spec].proc is started
    backend = client.connect(spec)
    assert backend.worker.proc is started and spec not in client._LAUNCHED
    client.launch(spec)  # connected already: nothing more starts
    assert spec not in client._LAUNCHED and client.connect(spec) is backend


@pytest.mark.parametrize("ended_by", ["close", "close_all"])
def test_a_launched_worker_never_connected_is_ended_with_the_others(ended_by: str) -> None:
    spec = WorkerSpec(worker_fakes.command("noisy"), TIMEOUT)
    client.launch(spec)
    started = client._LAUNCHED[spec]
    client.close(spec) if ended_by == "close" else client.close_all()
    assert not started.alive() and not client._LAUNCHED


def test_a_worker_interrupted_before_its_hello_is_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C (or SIGTERM) while the hello is awaited: the worker, in a session of its own that the
    terminal's Ctrl-C does not reach, is killed before the interruption goes on."""
    spec = WorkerSpec(worker_fakes.command("noisy"), TIMEOUT)
    client.launch(spec)
    started = client._LAUNCHED[spec]

    def interrupted(self: client.WorkerProcess, **_: object) -> protocol.Message:
        raise KeyboardInterrupt
    monkeypatch.setattr(client.WorkerProcess, "receive", interrupted)
    with pytest.raises(KeyboardInterrupt):
        client.connect(spec)
    assert not started.alive() and not client._LAUNCHED and not client._OPEN


def test_a_launched_worker_that_does_not_start_says_why_at_the_connect() -> None:
    spec = WorkerSpec("/nonexistent/worker", 1)
    client.launch(spec)
    with pytest.raises(BackendUnavailable, match="does not start"):
        client.connect(spec)


def _served_and_here() -> tuple[WorkerSpec, suite.Selection]:
    spec = WorkerSpec(_conformance("--backend", "golden"), 60)
    return spec, suite.Selection(backends=("golden", "cann"), dtypes=("float16",), alphas=(0.2,),
                                 directions=("forward",), workers=(("golden", spec),))


def test_the_rows_planned_here_are_given_while_the_workers_start() -> None:
    spec, selection = _served_and_here()
    seen = []
    rows, _ = suite.plan(selection, meanwhile=lambda here: seen.append(([r.backend for r in here],
                                                                         spec in client._LAUNCHED)))
    assert seen == [(["cann"], True)]  # cann's row, while golden's worker had not said hello yet
    assert [r.backend for r in rows] == ["golden", "cann"] and rows == suite.plan(selection)[0]


def test_the_batches_of_the_rows_planned_here_are_built_while_the_workers_start(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A seed no other test uses, so that only the run's own building can have drawn them."""
    _, selection = _served_and_here()
    options = suite.Options(seed=917_406, max_examples=5, results_dir=None)
    rows, _ = suite.planned(selection, options)
    monkeypatch.setattr(strategies, "collect", lambda *a, **k: pytest.fail("drawn again"))
    suite.Inputs(seed=options.seed, max_examples=5, alphas=selection.alphas).batches(rows[1])  # cann's: drawn ahead
    with pytest.raises(pytest.fail.Exception, match="drawn again"):  # another seed: nothing drew it ahead
        suite.Inputs(seed=options.seed + 1, max_examples=5, alphas=selection.alphas).batches(rows[1])


# ----------------------------------------------------------------------------- start-up failures

@pytest.mark.parametrize("command, mentions", [
    (_conformance("--backend", "torch_npu"), "torch_npu is not installed"),
    (_conformance("--backend", "nope"), "unknown backend 'nope'"),
    ("/nonexistent/conformance worker --backend torch", "does not start"),
    (worker_fakes.command("old-protocol"), "speaks protocol 0"),
    (worker_fakes.command("bare-hello"), "sent a hello without supports, suite_pairs"),
    (shlex.join([sys.executable, "-c", "print('hello there')"]), "sent garbage"),
])
def test_a_worker_that_cannot_start_is_a_usage_error(command: str, mentions: str, capsys) -> None:
    if "torch_npu" in command and importlib.util.find_spec("torch_npu") is not None:
        pytest.skip("torch_npu is installed here")
    result = run_cli(["run", "--worker", command, "--dtype", "fp16"], capsys)
    assert_usage_error(result, mentions=mentions)


@pytest.mark.parametrize("argv, mentions", [
    (["--worker", ""], "--worker needs a command"),
    (["--worker", "true", "--worker-timeout", "0"], "--worker-timeout '0': pass a number of seconds > 0"),
    (["--worker", "true", "--worker-timeout", "soon"], "--worker-timeout 'soon'"),
])
def test_worker_flags_are_checked(argv: list[str], mentions: str, capsys) -> None:
    assert_usage_error(run_cli(["run", *argv], capsys), mentions=mentions)


def test_unavailable_backends_raise_one_line() -> None:
    with pytest.raises(BackendUnavailable, match="does not start"):
        client.connect(WorkerSpec("/nonexistent/worker", 1))

"""The command line as a user first meets it: --version, help text, dtype spellings, the worker on a terminal."""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

from conformance import adapters
from conformance.cli import build_parser
from conformance.commands.args import parse_dtype
from conformance.dtypes import all_patterns
from conformance.errors import UsageError
from conformance.reference import golden as ref
from tests.helpers import assert_usage_error, run_cli

NARROW = ["--alpha", "0.2", "--direction", "forward", "--max-examples", "5", "-q"]
#: reStructuredText and Markdown markup that argparse prints as it is.
MARKUP = re.compile(r"``|`[^`]+`|:(?:class|func|mod|data|attr):|\*\*")


Parsers = Iterator[tuple[str, argparse.ArgumentParser]]


def _parsers(parser: argparse.ArgumentParser, name: str = "conformance") -> Parsers:
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child_name, child in action.choices.items():
                yield from _parsers(child, f"{name} {child_name}")


def test_version_prints_the_installed_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"conformance {metadata.version('conformance')}"


@pytest.mark.parametrize("name", [name for name, _ in _parsers(build_parser())])
def test_help_text_is_plain_text(name: str) -> None:
    parser = dict(_parsers(build_parser()))[name]
    text = parser.format_help()
    assert not MARKUP.findall(text), f"{name} --help shows markup: {MARKUP.findall(text)}"


# ----------------------------------------------------------------------------- dtype spellings

@pytest.mark.parametrize(("text", "parsed"), [
    ("fp16", "float16"), ("bfloat16", "bfloat16"), ("fp32:fp16", "float32->float16"),
    ("float32->bfloat16", "float32->bfloat16"), (" fp32 : fp16 ", "float32->float16"),
    ("fp16:fp16", "float16->float16"),
])
def test_a_dtype_or_pair_is_read_in_every_spelling(text: str, parsed: str) -> None:
    assert parse_dtype(text) == parsed


def test_the_kernel_adapter_takes_the_same_spellings() -> None:
    assert adapters.parse_pairs(["fp32:fp16", "float32->float16", "fp16"]) == \
        (("float32", "float16"), ("float16", "float16"))


@pytest.mark.parametrize(("text", "mentions"), [
    ("fp32-", "write the pair as fp32:fp16"),  # what the shell leaves of an unquoted fp32->fp16
    ("fp8", "or a pair such as fp32:fp16"),
    ("fp32:fp16:fp16", "a pair has two dtypes, such as fp32:fp16"),
])
def test_a_bad_dtype_names_the_shell_safe_spelling(text: str, mentions: str) -> None:
    with pytest.raises(UsageError, match=re.escape(mentions)):
        parse_dtype(text)


def test_run_takes_a_shell_safe_pair(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(["run", "--backend", "golden", "--dtype", "fp32:fp16", *NARROW], capsys, cwd=tmp_path)
    assert result.code == 0, result.text
    assert_usage_error(run_cli(["run", "--backend", "golden", "--dtype", "fp32-", *NARROW], capsys, cwd=tmp_path),
                       mentions="fp32:fp16")


def test_the_help_of_run_and_sweep_shows_the_shell_safe_pair() -> None:
    parsers = dict(_parsers(build_parser()))
    for name in ("conformance run", "conformance sweep"):
        text = " ".join(parsers[name].format_help().split())
        assert "fp32:fp16" in text, name


@pytest.fixture(scope="module")
def bits_dumps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("bits")
    bf, h = all_patterns("bfloat16"), all_patterns("float16")
    np.save(d / "xb.npy", bf.view(np.uint16))
    np.save(d / "yb.npy", ref.forward(bf, 0.2).view(np.uint16))
    np.save(d / "xh.npy", h.view(np.uint16))
    np.save(d / "yh.npy", ref.forward(h, 0.2).view(np.uint16))
    return d


@pytest.mark.parametrize(("dtype", "prefix", "shown"), [
    ("bf16", "b", "bf16→bf16"), ("bfloat16", "b", "bf16→bf16"), ("fp16", "h", "fp16→fp16"),
    ("half", "h", "fp16→fp16"),
])
def test_compare_takes_the_dtype_aliases_run_takes(bits_dumps: Path, dtype: str, prefix: str, shown: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(["compare", "--x", f"x{prefix}.npy", "--y", f"y{prefix}.npy", "--alpha", "0.2",
                      "--dtype", dtype], capsys, cwd=bits_dumps)
    assert result.code == 0, result.text
    assert shown in result.out


@pytest.mark.parametrize(("dtype", "mentions"), [("fp32", "bf16 or fp16 only"), ("fp8", "is unknown")])
def test_compare_refuses_a_dtype_that_is_not_16_bits(bits_dumps: Path, dtype: str, mentions: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(["compare", "--x", "xb.npy", "--y", "yb.npy", "--alpha", "0.2", "--dtype", dtype],
                     capsys, cwd=bits_dumps)
    assert_usage_error(result, mentions=mentions)


# ----------------------------------------------------------------------------- worker

def test_the_worker_refuses_a_terminal_on_stdout() -> None:
    pty = pytest.importorskip("pty")
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "conformance", "worker", "--backend", "golden"],
                              stdin=subprocess.DEVNULL, stdout=follower, stderr=subprocess.PIPE, timeout=120)
        os.set_blocking(leader, False)
        try:
            on_terminal = os.read(leader, 4096)
        except BlockingIOError:
            on_terminal = b""
    finally:
        os.close(follower)
        os.close(leader)
    lines = proc.stderr.decode().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "binary protocol frames" in lines[0], proc.stderr
    assert b"LRW" not in on_terminal  # no frame reached the screen


def test_the_worker_serves_a_pipe() -> None:
    proc = subprocess.run([sys.executable, "-m", "conformance", "worker", "--backend", "golden"],
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    assert proc.stdout.startswith(b"LRW"), proc.stderr  # the hello frame


def test_output_piped_into_head_stops_quietly() -> None:
    """A closed pipe is the reader leaving, not a failure: the rest of the output is dropped and
    the exit code is the command's own."""
    proc = subprocess.Popen([sys.executable, "-m", "conformance", "tiling", "--numel", "100", "--dtype", "fp16"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first line, as `| head -0` leaves
    code, err = proc.wait(timeout=120), proc.stderr.read().decode()
    assert code == 0 and err == "", err

"""Hostile input files: bombs, lying zips, deep JSON, FIFOs, links and truncation are each one
line and exit 2, never a traceback, a hang, gigabytes of memory or a SIGBUS."""
from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pytest

from conformance.errors import UsageError
from conformance.ingest import arrays, bounded
from tests.helpers import assert_usage_error, run_cli
from tests.safety.zips import patch_members, write_zip


def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def _compare(tmp_path: Path, x: Path, capsys, *extra: str):
    y = tmp_path / "y.npy"
    np.save(y, np.zeros(4096, np.float32))
    return run_cli(["compare", "--x", str(x), "--y", str(y), "--alpha", "0.2", *extra], capsys)


# ----------------------------------------------------------------------------- npz

def test_a_deflate_bomb_npz_member_is_refused_by_its_declared_size(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(bounded, "MAX_INFLATED", 1 << 16)
    bomb = write_zip(tmp_path / "x.npz", {"x.npy": _npy(np.zeros(1 << 16, np.float32))}, compress=True)
    assert bomb.stat().st_size < 4096  # 256 KiB of zeros in a few hundred bytes
    assert_usage_error(_compare(tmp_path, bomb, capsys), mentions="bytes uncompressed, beyond the 65536")


@pytest.mark.parametrize("patch, mentions", [
    ({"method": 99}, "compression method 99"),
    ({"encrypted": True}, "is encrypted"),
])
def test_npz_members_with_unknown_methods_or_encryption_are_one_line(tmp_path: Path, capsys, patch,
                                                                     mentions) -> None:
    npz = patch_members(write_zip(tmp_path / "x.npz", {"x.npy": _npy(np.zeros(4096, np.float32))}), **patch)
    assert_usage_error(_compare(tmp_path, npz, capsys), mentions=mentions)


# ----------------------------------------------------------------------------- truncation

def test_a_dump_that_shrinks_while_it_is_read_is_an_error_not_a_sigbus(tmp_path: Path) -> None:
    path = tmp_path / "x.npy"
    np.save(path, np.arange(1 << 16, dtype=np.float32))
    dump = arrays.load(str(path), flag="--x", bits_dtype=None)
    assert dump.chunk(0, 8).tolist() == list(range(8))
    os.truncate(path, 4096)
    with pytest.raises(UsageError, match="shrank while it was read"):
        dump.chunk(1 << 15, 1 << 16)


def test_compare_of_an_input_truncated_mid_run_exits_2(tmp_path: Path, capsys, monkeypatch) -> None:
    x = tmp_path / "x.npy"
    np.save(x, np.zeros(4096, np.float32))
    real = arrays.Dump.mapped

    def truncate_then_read(dump: arrays.Dump, start: int, stop: int) -> np.ndarray:
        os.truncate(x, 256)  # another process shortens the input while compare reads it
        return real(dump, start, stop)

    monkeypatch.setattr(arrays.Dump, "mapped", truncate_then_read)
    result = _compare(tmp_path, x, capsys)
    assert_usage_error(result, mentions="shrank while it was read")
    assert str(x) in result.err


# ----------------------------------------------------------------------------- report directory

def test_a_report_directory_that_is_a_file_is_named_not_a_full_disk(tmp_path: Path) -> None:
    from conformance.render import files

    (tmp_path / "out").write_text("a file where the directory was")
    with pytest.raises(UsageError) as caught:
        files.write_atomic(tmp_path / "out" / "r.json", b"{}", flag="--json")
    assert "is not a directory" in str(caught.value) and "free some space" not in str(caught.value)


# ----------------------------------------------------------------------------- JSON

@pytest.mark.parametrize("text, mentions", [
    ("[" * 300 + "]" * 300, "nested deeper than"),
    ('{"a": 1, "a": 2}', "appears twice"),
    ('{"a": NaN}', "NaN is not a JSON number"),
    ('{"a": 1e400}', "does not fit a float"),
])
def test_json_is_parsed_within_bounds(text: str, mentions: str) -> None:
    with pytest.raises(UsageError, match=mentions):
        bounded.parse_json(text, where="f.json", fix="fix it")


def test_json_nesting_beyond_the_recursion_limit_is_one_line() -> None:
    with pytest.raises(UsageError, match="nested deeper than"):
        bounded.parse_json("[" * 100_000 + "]" * 100_000, where="f.json", fix="fix it")

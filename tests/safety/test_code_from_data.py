"""Data never runs code: a config's policy keys are names, and a reproducer's fields choose only
built-in or registered backends (an import path or a worker must be named on the command line)."""
from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from conformance import suite
from conformance.backends import WorkerSpec
from conformance.cases import corpus
from tests.helpers import assert_usage_error, run_cli

ONE_ROW = ["--backend", "golden", "--dtype", "fp16", "--alpha", "0.2", "--direction", "forward",
           "--max-examples", "5", "-q"]
PLANTED = "from pathlib import Path\nPath({marker!r}).write_text('ran')\n{tail}"


def _plant(directory: Path, name: str, *, tail: str = "") -> Path:
    """A Python file that leaves a marker file behind when it is imported; the marker's path."""
    marker = directory / f"{name}.ran"
    (directory / f"{name}.py").write_text(PLANTED.format(marker=str(marker), tail=tail))
    return marker


@pytest.mark.parametrize("key", ["evil.py:f[x]", "evil_module:f[x]", "evil.py:f"])
def test_a_policy_key_naming_an_import_path_is_never_imported(tmp_path: Path, capsys, monkeypatch,
                                                             key: str) -> None:
    marker = _plant(tmp_path, key.split(".")[0].split(":")[0])
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "pyproject.toml").write_text(f'[tool.conformance.policy]\n"{key}" = ["rounding"]\n')
    result = run_cli(["run", *ONE_ROW], capsys, cwd=tmp_path)
    assert result.code == 0, result.text
    assert not marker.exists(), "the config file ran code"
    assert "evil_module" not in sys.modules


def _reproducer(tmp_path: Path, backend: str, *, worker: str | None = None, alpha: float = 0.2) -> Path:
    case = corpus.Case(np.array([-1.0], np.float16), alpha, "forward")
    rep = corpus.Reproducer(case, backend, category="alpha-mismatch", label="forged", worker=worker)
    return corpus.save(rep, tmp_path / "forged.npz")


def test_a_reproducer_naming_a_file_does_not_run_it(tmp_path: Path, capsys) -> None:
    marker = _plant(tmp_path, "planted")
    path = _reproducer(tmp_path, f"{tmp_path / 'planted.py'}:backend")
    result = run_cli(["replay", str(path)], capsys, cwd=tmp_path)
    assert_usage_error(result, mentions="--backend")
    assert not marker.exists(), "replay ran the file the reproducer names"


def test_a_reproducer_naming_sys_exit_is_exit_2(tmp_path: Path, capsys) -> None:
    path = _reproducer(tmp_path, "sys:exit")
    assert_usage_error(run_cli(["replay", str(path)], capsys), mentions="replay FILE --backend sys:exit")
    named = run_cli(["replay", str(path), "--backend", "sys:exit"], capsys)
    assert_usage_error(named, mentions="sys.exit(")


def test_an_import_path_named_on_the_command_line_runs(tmp_path: Path, capsys) -> None:
    path = _reproducer(tmp_path, "examples.my_kernel:max_backend", alpha=1.5)  # max(x, a*x) is wrong for a > 1
    result = run_cli(["replay", str(path), "--backend", "examples.my_kernel:max_backend", "-q"], capsys)
    assert result.code == 1 and "still fails" in result.out, result.text


def test_a_worker_rows_reproducer_needs_the_worker_again(tmp_path: Path, capsys) -> None:
    path = _reproducer(tmp_path, "golden", worker="ssh npu-host conformance worker --backend golden")
    assert_usage_error(run_cli(["replay", str(path)], capsys), mentions="--worker CMD")


def test_a_worker_row_records_its_worker_in_the_reproducer(tmp_path: Path) -> None:
    spec = suite.RowSpec("golden", None, None, "float16", "float16", "forward", 0.2, worker=WorkerSpec("w --x"))
    batch = suite.InputBatch("t", np.array([-1.0], np.float16))
    finding = suite.Finding("alpha-mismatch", 1, True, "s", {}, ())
    saved = suite.save_reproducer(spec, batch, finding, results_dir=tmp_path)
    assert corpus.load(saved).worker == "w --x"


def test_a_reproducer_without_a_worker_field_still_loads(tmp_path: Path) -> None:
    """Files written without the optional field keep their digest."""
    path = _reproducer(tmp_path, "golden")
    with np.load(path) as data:
        assert "worker" not in data.files
    assert corpus.load(path).worker is None


def test_a_reproducer_bomb_is_refused_by_its_claimed_size(tmp_path: Path, capsys) -> None:
    """A few hundred KB that would inflate to more than MAX_ELEMENTS elements."""
    path = tmp_path / "bomb.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("x_bits.npy", "w", force_zip64=True) as member:
            np.lib.format.write_array(member, np.zeros(corpus.MAX_ELEMENTS + 1, np.uint16))
    assert path.stat().st_size < 1 << 20
    result = run_cli(["replay", str(path)], capsys)
    assert_usage_error(result, mentions=f"at most {corpus.MAX_ELEMENTS:,} elements")

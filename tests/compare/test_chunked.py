"""`conformance compare` judged in small chunks reaches the same report as in one chunk:
metrics (cosine up to summation order), findings with their counts, details and offenders'
global indices, and verdicts."""
from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

from conformance.commands import compare
from conformance.config import load_config
from conformance.dtypes import all_patterns
from conformance.ingest import dumps
from conformance.judge.chunked import evaluate_chunks
from conformance.judge.evaluate import evaluate
from conformance.records import BackendResult, Row
from conformance.reference import golden as ref
from conformance.reference.semantics import Semantics
from tests.helpers import run_cli

X16 = all_patterns("float16")
TINY = 997  # a prime: chunk edges fall anywhere, never on a tile or block boundary


@dataclass(frozen=True)
class Dumped:
    """Arrays to save and the compare options that judge them."""

    name: str
    make: Callable[[], dict[str, np.ndarray]]
    options: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.name


def _default_alpha() -> dict[str, np.ndarray]:
    return {"x": X16, "y": ref.forward(X16, 0.01)}


def _tail_dropped() -> dict[str, np.ndarray]:
    import conformance.npu_impl as npu

    return {"x": X16, "y": npu.leaky_relu(X16, 0.2, variant="tail-dropped").y}


def _special_values() -> dict[str, np.ndarray]:
    """fp32 with NaN, ±inf, subnormals and zeros, and several kinds of wrong outputs."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal(20_000).astype(np.float32) * np.float32(1e3)
    x[::97] = np.nan
    x[5::211], x[7::223] = np.inf, -np.inf
    x[11::101] = np.float32(-1e-40)
    x[13::103] = -0.0
    y = ref.forward(x, 0.2)
    y[3::500] = np.nextafter(np.nextafter(np.nextafter(y[3::500], np.float32(0)), 0), 0)
    y[::970] = 0.0  # some NaN results become numbers
    y[17::1300] = np.nan  # spurious NaN
    y[19::1700] = np.inf  # overflow
    dy = rng.standard_normal(x.size).astype(np.float32)
    dx = ref.backward(dy, x, 0.2, semantics=Semantics(grad_rule="ge"))
    return {"x": x, "y": y, "dy": dy, "dx": dx}


def _two_dimensional() -> dict[str, np.ndarray]:
    x = X16.reshape(256, 256)
    return {"x": x, "y": ref.forward(x, 0.2, semantics=Semantics(slope_dtype="float16"))}


CASES = [
    Dumped("clean", lambda: {"x": X16, "y": ref.forward(X16, 0.2)}),
    Dumped("default-alpha-defect", _default_alpha),
    Dumped("tail-defect-with-profile", _tail_dropped, ("--profile", "ascend910b1")),
    Dumped("nan-inf-forward-and-backward", _special_values),
    Dumped("two-dimensional", _two_dimensional),
]


def _report(case: Dumped, d: Path, capsys: pytest.CaptureFixture[str], *, chunk: int,
            monkeypatch: pytest.MonkeyPatch, rows: list | None = None) -> dict:
    """The JSON report of one compare run; ``rows`` collects the judged rows themselves."""
    monkeypatch.setattr(dumps, "CHUNK_ELEMENTS", chunk)
    judged = rows if rows is not None else []
    monkeypatch.setattr(compare, "evaluate_chunks",
                        lambda *a, **k: judged.append(evaluate_chunks(*a, **k)) or judged[-1])
    files = [f"--{name}" for name in ("x", "y", "dy", "dx") if (d / f"{name}.npy").exists()]
    argv = ["compare", *(a for f in files for a in (f, f"{f[2:]}.npy")), "--alpha", "0.2",
            *case.options, "--json", f"r{chunk}.json"]
    result = run_cli(argv, capsys, cwd=d)
    assert result.code in (0, 1), result.text
    return json.loads((d / f"r{chunk}.json").read_text())


def _split_cosine(doc: dict) -> list[float | None]:
    """Remove each row's cosine (a float sum, equal up to summation order) and return them."""
    found = [row.pop("cosine_similarity") for row in doc["rows"]]
    return [None if c is None else float.fromhex(c["hex"]) for c in found]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_tiny_chunks_give_the_single_chunk_report(case: Dumped, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    for name, array in case.make().items():
        np.save(tmp_path / f"{name}.npy", array)
    rows_whole: list[Row] = []
    rows_tiny: list[Row] = []
    whole = _report(case, tmp_path, capsys, chunk=1 << 30, monkeypatch=monkeypatch, rows=rows_whole)
    tiny = _report(case, tmp_path, capsys, chunk=TINY, monkeypatch=monkeypatch, rows=rows_tiny)
    cos_whole, cos_tiny = _split_cosine(whole), _split_cosine(tiny)
    assert tiny == whole
    for a, b in zip(cos_tiny, cos_whole):
        assert (a is None and b is None) or math.isclose(a, b, rel_tol=1e-12)
    assert [_exact_part(r) for r in rows_tiny] == [_exact_part(r) for r in rows_whole]


def _exact_part(row: Row) -> tuple:
    """Everything but the cosine sums: extremes with where they are, offenders' indices."""
    m = row.metrics
    kept = {k: v for k, v in vars(m).items() if not k.startswith("cos_")}
    return kept, [(f.category, f.count, [e.index for e in f.examples]) for f in row.findings], row.verdict


def test_the_cases_exercise_findings_and_both_verdicts(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A meta-test: the equality above is not vacuous."""
    seen: set[str] = set()
    verdicts: set[str] = set()
    for case in CASES:
        d = tmp_path / case.name
        d.mkdir()
        for name, array in case.make().items():
            np.save(d / f"{name}.npy", array)
        doc = _report(case, d, capsys, chunk=TINY, monkeypatch=monkeypatch)
        seen |= {f["category"] for row in doc["rows"] for f in row["findings"]}
        verdicts |= {row["verdict"] for row in doc["rows"]}
    assert {"alpha-mismatch", "tail-block", "alpha-precision", "lost-nan", "unexplained",
            "grad-at-zero"} <= seen
    assert {"pass", "fail"} <= verdicts


def test_offenders_carry_global_flat_indices(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.linspace(-4, 4, 10_000, dtype=np.float32)
    y = ref.forward(x, 0.2)
    wrong = [4321, 8765]
    y[wrong] = np.nextafter(np.nextafter(np.nextafter(y[wrong], np.float32(0)), 0), 0)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    rows: list[Row] = []
    doc = _report(CASES[0], tmp_path, capsys, chunk=TINY, monkeypatch=monkeypatch, rows=rows)
    (finding,) = doc["rows"][0]["findings"]
    assert [e["index"] for e in finding["examples"]] == wrong
    assert rows[0].metrics.max_ulp_at == ("y.npy", wrong[0])


@pytest.mark.parametrize("case", CASES, ids=str)
def test_chunked_rows_equal_the_whole_batch_evaluator(case: Dumped, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``evaluate`` (one batch in memory, as the suite uses it) and compare's chunks agree."""
    arrays = case.make()
    for name, array in arrays.items():
        np.save(tmp_path / f"{name}.npy", array)
    rows: list[Row] = []
    _report(case, tmp_path, capsys, chunk=TINY, monkeypatch=monkeypatch, rows=rows)
    x = arrays["x"]
    jobs = [("forward", arrays["y"], None, "y.npy")] + (
        [("backward", arrays["dx"], arrays["dy"], "dx.npy")] if "dx" in arrays else [])
    for row, (direction, out, dy, label) in zip(rows, jobs, strict=True):
        plan_fn = dumps.kernel_plan_fn(case.options[1], None, dtypes=(x.dtype.name, out.dtype.name),
                                      direction=direction) if case.options else None
        whole = evaluate(x, 0.2, BackendResult(out), direction=direction, dy=dy, backend="dump",
                         config=load_config(None), label=label, plan_fn=plan_fn)
        assert _exact_part(row) == _exact_part(whole)


def test_the_plot_data_is_kept_only_for_an_html_report(tmp_path: Path, capsys, monkeypatch) -> None:
    """Without ``--html`` nothing draws the plots, so compare does not measure them; the row is
    otherwise the same, and with ``--html`` the page has them."""
    case = next(c for c in CASES if c.name == "default-alpha-defect")
    for name, array in case.make().items():
        np.save(tmp_path / f"{name}.npy", array)
    plain: list[Row] = []
    _report(case, tmp_path, capsys, chunk=1 << 20, monkeypatch=monkeypatch, rows=plain)
    drawn: list[Row] = []
    monkeypatch.setattr(compare, "evaluate_chunks", lambda *a, **k: drawn.append(evaluate_chunks(*a, **k)) or drawn[-1])
    result = run_cli(["compare", "--x", "x.npy", "--y", "y.npy", "--alpha", "0.2", "--html", "r.html"], capsys,
                     cwd=tmp_path)
    assert result.code == 1, result.text
    assert plain[0].plots is None and drawn[0].plots is not None and drawn[0].plots.ulp
    assert replace(plain[0], plots=None) == replace(drawn[0], plots=None)


def test_a_large_compare_on_a_pipe_prints_progress_lines(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(dumps, "PROGRESS_ELEMENTS", 1000)  # this dump counts as large
    x = all_patterns("float16")
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", ref.forward(x, 0.01))  # a default-slope defect at --alpha 0.2
    result = run_cli(["compare", "--x", str(tmp_path / "x.npy"), "--y", str(tmp_path / "y.npy"),
                      "--alpha", "0.2"], capsys)
    assert result.code == 1 and "alpha-mismatch" in result.out, result.text
    assert "progress: finished; 65,536/65,536 elements" in result.err, result.err

"""`conformance agree`: every cell against a direct pairwise bit comparison of the backends'
outputs, the same inputs for every backend, and the --from/--to verdicts."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from conformance.adapters import from_numpy
from conformance.backends import call
from conformance.commands.agree import agree_options, configure
from conformance.judge.agreement import Agreement, Cell, cells, migration
from conformance.reference import golden
from conformance.render.export import SCHEMA, row_dict, validate
from conformance.suite import Inputs, Options, RowSpec, Selection, plan, pooled_sizes, run_suite
from tests.helpers import CONFIG, assert_usage_error, bits_differ, keep_small_batches, run_cli

ALPHAS = (0.1, 0.3)
MAX_EXAMPLES = 10


def _slope_in_fp16(x: np.ndarray, alpha: float) -> np.ndarray:
    """The slope rounded to fp16 first, then applied in fp16."""
    with np.errstate(invalid="ignore"):
        return np.where(x > 0, x, x * np.float16(alpha)).astype(x.dtype)


def _flush(x: np.ndarray, alpha: float) -> np.ndarray:
    """Exact, but subnormal inputs read as zero."""
    tiny = np.abs(x.astype(np.float64)) < np.finfo(x.dtype).tiny
    return golden.forward(np.where(tiny, np.zeros_like(x), x), alpha)


def direct_count(selection: Selection, first: str, second: str, spec: RowSpec) -> tuple[int, int]:
    """Differing elements and elements compared, by calling both backends on every batch whose
    label and input bits are the same for both rows (``spec`` names the row's key)."""
    planned = plan(selection)[0]
    inputs = Inputs(seed=0, max_examples=MAX_EXAMPLES, alphas=selection.alphas, pooled=pooled_sizes(planned))
    key = (spec.dtype, spec.out_dtype, spec.direction, spec.alpha)
    specs = {(s.backend, s.dtype, s.out_dtype, s.direction, s.alpha): s for s in planned}
    theirs = {b.label: b for b in inputs.batches(specs[(first, *key)])}
    diff = total = 0
    for batch in inputs.batches(specs[(second, *key)]):
        twin = theirs.get(batch.label)
        if twin is None or not np.array_equal(twin.x.view(np.uint8), batch.x.view(np.uint8)):
            continue
        a, b = (np.asarray(call(selection.backend(name), spec.direction, batch.x.copy(), spec.alpha,
                                dy=None if batch.dy is None else batch.dy.copy()).value).reshape(-1)
                for name in (first, second))
        diff += int(bits_differ(a, b).sum())
        total += batch.x.size
    return diff, total


def _matrix(selection: Selection) -> list[Agreement]:
    result = run_suite(selection, Options(config=CONFIG, max_examples=MAX_EXAMPLES, results_dir=None))
    assert not result.interrupted and result.rows
    return result.agreement


def _fakes() -> Selection:
    exact = from_numpy(golden.forward, dtypes=["float16"], name="exact")
    slope = from_numpy(_slope_in_fp16, dtypes=["float16"], name="slope")
    flush = from_numpy(_flush, dtypes=["float16"], name="flush")
    names = ("golden", "exact", "slope", "flush")
    return Selection(backends=names, references=names, dtypes=("float16",), alphas=ALPHAS,
                     directions=("forward",),
                     objects=(("exact", exact), ("slope", slope), ("flush", flush)))


def _check_cells(selection: Selection, found: list[Agreement]) -> list[Cell]:
    """Every pair is compared once per alpha, and each cell sums a direct comparison."""
    table = cells(found)
    names = selection.backends
    assert {frozenset((c.first, c.second)) for c in table} == \
        {frozenset((a, b)) for i, a in enumerate(names) for b in names[i + 1:]}
    for c in table:
        diff = total = 0
        for alpha in selection.alphas:
            spec = RowSpec(c.first, None, None, c.dtype, c.out_dtype, c.direction, alpha)  # type: ignore[arg-type]
            d, t = direct_count(selection, c.first, c.second, spec)
            diff, total = diff + d, total + t
        assert (c.differing, c.elements) == (diff, total), c
        assert c.identical == (diff == 0)
        assert c.rows == len(selection.alphas)
    return table


def test_every_cell_is_a_direct_bit_comparison(monkeypatch: pytest.MonkeyPatch) -> None:
    keep_small_batches(monkeypatch)  # the cells against the direct counts, on the same batches
    selection = _fakes()
    table = {frozenset((c.first, c.second)): c for c in _check_cells(selection, _matrix(selection))}
    assert table[frozenset(("golden", "exact"))].identical
    assert table[frozenset(("golden", "slope"))].cause == "alpha-precision"
    assert table[frozenset(("golden", "flush"))].cause == "subnormal-flush"
    assert table[frozenset(("slope", "flush"))].cause == "alpha-precision"  # the larger gap


def test_real_backends_cells_forward_and_backward(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    keep_small_batches(monkeypatch)  # the cells against the direct counts, on the same batches
    selection = Selection(backends=("golden", "torch", "cann"), references=("golden", "torch", "cann"),
                          dtypes=("float16",), alphas=(0.3,), directions=("forward", "backward"))
    table = _check_cells(selection, _matrix(selection))
    torch_cann = [c for c in table if {c.first, c.second} == {"torch", "cann"}]
    assert len(torch_cann) == 2 and all(c.elements > 0 for c in torch_cann)


def test_every_backend_gets_the_same_batches_its_own_boundaries_apart() -> None:
    inputs = Inputs(seed=0, max_examples=3, alphas=(0.2,))
    torch = inputs.batches(RowSpec("torch", None, None, "float16", "float16", "forward", 0.2))
    cann = inputs.batches(RowSpec("cann", None, None, "float16", "float16", "forward", 0.2))
    shared = [b for b in cann if not b.own]
    assert [b.label for b in shared] == [b.label for b in torch] and not any(b.own for b in torch)
    for a, b in zip(shared, torch):
        assert np.array_equal(a.x.view(np.uint16), b.x.view(np.uint16))
    own = [b for b in cann if b.own]
    assert own and all(b.label.startswith("cann shape (") for b in own)
    assert max(b.x.size for b in own) > 100_000 > max(b.x.size for b in shared)
    again = Inputs(seed=0, max_examples=3, alphas=(0.2,)).batches(RowSpec("cann", None, None, "float16", "float16",
                                                                             "forward", 0.2))
    assert all(np.array_equal(a.x.view(np.uint16), b.x.view(np.uint16)) for a, b in zip(cann, again))


def test_own_boundary_batches_are_named_in_the_row_notes() -> None:
    selection = Selection(backends=("cann", "golden"), dtypes=("float16",), alphas=(0.3,), directions=("forward",))
    rows = {r.backend: r for r in run_suite(selection, Options(config=CONFIG, max_examples=3,
                                                                results_dir=None)).rows}
    [note] = [n for n in rows["cann"].notes if "boundary batches of cann alone" in n]
    assert "run on no other backend" in note
    assert not rows["golden"].notes


def _agreement(differing: int, *, causes: tuple[str, ...] = ()) -> Agreement:
    return Agreement("cann", None, None, "float16", "float16", "forward", 0.1, reference="torch",
                     identical=differing == 0, differing=differing, elements=100, why="", causes=causes)


def test_migration_outcomes() -> None:
    same = [_agreement(0), _agreement(0)]
    assert migration(same, source="torch", target="cann").outcome == "identical"
    mixed = [_agreement(0), _agreement(3, causes=("rounding",)), _agreement(2, causes=("alpha-precision",))]
    differs = migration(mixed, source="torch", target="cann", accepted=frozenset({"rounding"}))
    assert (differs.outcome, differs.outside, differs.differing, differs.rows_differing) == \
        ("differs", ("alpha-precision",), 5, 2)
    within = migration(mixed, source="torch", target="cann",
                       accepted=frozenset({"rounding", "alpha-precision"}))
    assert within.outcome == "within" and "within alpha-precision, rounding" in within.line


def _agree_cli(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    res = run_cli(["agree", "--dtype", "fp16", "--direction", "forward", "--alpha", "0.1",
                   "--max-examples", "5", "-q", *extra], capsys)
    return res.code, res.text


def test_cli_from_to_verdicts(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    keep_small_batches(monkeypatch)  # the verdicts' wording and exit codes; the tile boundaries: below
    code, text = _agree_cli(capsys, "--from", "torch", "--to", "cann", "--profile", "ascend950")
    assert (code, text.count("\n")) == (0, 1) and "torch → cann: identical" in text, text
    code, text = _agree_cli(capsys, "--from", "torch", "--to", "cann")  # 910B's TBE kernel: the slope in fp16
    assert code == 1 and "torch → cann: differs: alpha-precision" in text, text
    code, text = _agree_cli(capsys, "--from", "golden", "--to", "cann", "--profile", "ascend950")
    assert code == 1 and "golden → cann: differs: rounding" in text, text
    code, text = _agree_cli(capsys, "--from", "golden", "--to", "cann", "--profile", "ascend950", "--allow", "rounding")
    assert code == 0 and "golden → cann: differs within rounding" in text, text


def test_cli_matrix_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    keep_small_batches(monkeypatch)  # the table and the JSON's agreement section
    report = tmp_path / "agree.json"
    res = run_cli(["agree", "--backend", "golden,cann", "--profile", "ascend950", "--dtype", "fp16",
                   "--direction", "forward", "--alpha", "0.1,0.2", "--max-examples", "5", "--json", str(report)],
                  capsys)
    assert res.code == 0, res.text
    assert "fp16 fwd" in res.out and "rounding" in res.out
    doc = json.loads(report.read_text())
    assert validate(doc, SCHEMA) == []
    assert {(e["reference"], e["backend"]) for e in doc["agreement"]} == {("golden", "cann")}
    assert all(e["causes"] == [] for e in doc["agreement"] if e["identical"])


@pytest.mark.parametrize(("argv", "mentions"), [
    (["--from", "torch"], "--from and --to"),
    (["--from", "torch", "--to", "torch"], "name two backends"),
    (["--from", "torch", "--to", "cann", "--backend", "jax"], "drop --backend"),
    (["--allow", "rounding"], "--from A --to B"),
    (["--from", "torch", "--to", "cann", "--allow", "nope"], "--allow"),
    (["--from", "nope", "--to", "cann"], "--from"),
])
def test_cli_usage_errors(argv: list[str], mentions: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert_usage_error(run_cli(["agree", *argv], capsys), mentions=mentions)



def test_a_comparison_gives_every_backend_the_pooled_boundaries() -> None:
    selection = Selection(backends=("torch", "cann"), references=("torch", "cann"), dtypes=("float16",),
                          alphas=(0.2,), directions=("forward",))
    specs = {s.backend: s for s in plan(selection)[0]}
    pooled = pooled_sizes(list(specs.values()))
    inputs = Inputs(seed=0, max_examples=3, alphas=(0.2,), pooled=pooled)
    torch, cann = inputs.batches(specs["torch"]), inputs.batches(specs["cann"])
    assert [b.label for b in torch] == [b.label for b in cann] and not any(b.own for b in torch + cann)
    assert any(b.label.startswith("cann shape (") and b.x.size > 100_000 for b in torch)


def test_a_tile_boundary_defect_shows_in_the_migration(capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    keep_small_batches(monkeypatch, elements=100_000)  # cann's one-tile boundaries k*tile+-1 stay
    code, text = _agree_cli(capsys, "--from", "golden", "--to", "cann", "--variant", "tail-overrun",
                            "--allow", "rounding")
    assert code == 1 and "golden → cann: differs:" in text, text


def test_the_rows_keep_what_a_report_draws_only_when_one_draws_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """``agree`` without ``--html`` measures no plots; the rows, their JSON and the agreement are
    the same either way."""
    keep_small_batches(monkeypatch)
    runs = {plots: run_suite(_fakes(), Options(config=CONFIG, max_examples=MAX_EXAMPLES, results_dir=None,
                                                 plots=plots)) for plots in (True, False)}
    assert any(r.plots is not None for r in runs[True].rows)
    assert all(r.plots is None for r in runs[False].rows)
    assert [row_dict(r) for r in runs[True].rows] == [row_dict(r) for r in runs[False].rows]
    assert runs[True].agreement == runs[False].agreement
    parser = argparse.ArgumentParser()
    configure(parser)
    assert [agree_options(parser.parse_args(argv)).plots for argv in ([], ["--html", "a.html"])] == [False, True]

"""PReLU on the command line: ``compare --op prelu`` judges a user's dump (forward, dx, dweight) against
the golden and names what differs; ``run --op`` and ``agree --op`` select the rows of an operator; every
wrong input is exit 2 with one line."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from conformance import prelu_suite
from conformance.cli import build_parser
from conformance.commands.selection import run_selection_from
from conformance.reference import prelu
from conformance.suite import plan
from tests.helpers import assert_usage_error, run_cli

SHAPE = (2, 3, 5, 7)
MEANT = 0.2


def dumped(tmp_path: Path, **arrays: np.ndarray) -> dict[str, str]:
    """Each array saved as ``NAME.npy`` in ``tmp_path``; their paths by name."""
    paths = {}
    for name, a in arrays.items():
        paths[name] = str(tmp_path / f"{name}.npy")
        np.save(paths[name], a)
    return paths


def inputs(dtype: type = np.float16, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=SHAPE).astype(dtype), rng.normal(size=SHAPE).astype(dtype)


def by_hand(x: np.ndarray, slopes: np.ndarray, *, axis: int = 1) -> np.ndarray:
    """``x if x > 0 else slope * x`` per channel, computed in float64 and rounded once (what a correct
    kernel gives for 16-bit inputs, written apart from the golden)."""
    s = np.asarray(slopes, dtype=np.float64).reshape([-1 if i == axis else 1 for i in range(x.ndim)])
    wide = x.astype(np.float64)
    return np.where(wide > 0, wide, wide * s).astype(x.dtype)


def compare(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str):
    return run_cli(["compare", "--op", "prelu", *args], capsys, cwd=tmp_path)


# ----------------------------------------------------------------------------- compare --op prelu

def test_a_correct_forward_dump_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    x, _ = inputs()
    weight = np.full(3, MEANT, dtype=np.float16)
    p = dumped(tmp_path, x=x, w=weight, y=by_hand(x, weight))
    result = compare(tmp_path, capsys, "--x", p["x"], "--weight", p["w"], "--y", p["y"], "--json", "r.json")
    assert result.code == 0, result.text
    row, = json.loads((tmp_path / "r.json").read_text())["rows"]
    assert (row["op"], row["direction"], row["mismatches"], row["verdict"]) == ("prelu", "forward", 0, "pass")
    assert "PReLU conformance" in result.out and "LeakyReLU" not in result.out  # the table names its operator


def test_torchs_initial_slope_on_one_channel_is_named_with_its_channel(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]):
    x, _ = inputs()
    meant = np.full(3, MEANT, dtype=np.float16)
    used = np.array([meant[0], 0.25, meant[2]])  # channel 1 kept nn.PReLU's initial value
    p = dumped(tmp_path, x=x, w=meant, y=by_hand(x, used))
    result = compare(tmp_path, capsys, "--x", p["x"], "--weight", p["w"], "--y", p["y"], "--json", "r.json")
    assert result.code == 1, result.text
    finding, = json.loads((tmp_path / "r.json").read_text())["rows"][0]["findings"]
    assert finding["category"] == "alpha-mismatch"
    assert "channel 1 used 0.25" in finding["summary"] and "torch's PReLU initial value" in finding["summary"]
    assert finding["count"] == int(np.count_nonzero(x[:, 1] <= 0))


def test_a_channels_last_dump_passes_with_its_axis_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    x, _ = inputs()
    x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))  # (N, H, W, C): C = 3 on the last axis
    weight = np.array([0.1, MEANT, 0.3], dtype=np.float16)
    p = dumped(tmp_path, x=x, w=weight, y=by_hand(x, weight, axis=3))
    assert compare(tmp_path, capsys, "--x", p["x"], "--weight", p["w"], "--y", p["y"], "--channel-axis", "-1").code == 0
    without = compare(tmp_path, capsys, "--x", p["x"], "--weight", p["w"], "--y", p["y"])
    assert_usage_error(without, mentions="--channel-axis 3")


def sequential_fp16(x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """dweight per channel as a plain loop would sum it: each share rounded to float16, then added
    left to right in memory order in float16."""
    sums = np.zeros(x.shape[1], dtype=np.float16)
    for c in range(x.shape[1]):
        for xi, di in zip(x[:, c].reshape(-1), dy[:, c].reshape(-1)):
            if not xi > 0:
                sums[c] = np.float16(sums[c] + np.float16(xi * di))
    return sums


def test_a_dweight_summed_in_another_order_is_named_reduction_order(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]):
    x, dy = inputs(seed=3)
    weight = np.full(3, MEANT, dtype=np.float16)
    summed = sequential_fp16(x, dy)
    exact = prelu.dweight(dy, x, weight)
    assert (summed.view(np.uint16) != exact.view(np.uint16)).any(), "the order must show on these inputs"
    dx = np.where(x.astype(np.float64) > 0, dy, dy.astype(np.float64) * np.float64(weight[0])).astype(np.float16)
    p = dumped(tmp_path, x=x, dy=dy, w=weight, dx=dx, dw=summed)
    result = compare(tmp_path, capsys, "--x", p["x"], "--weight", p["w"], "--dy", p["dy"], "--dx", p["dx"],
                     "--dweight", p["dw"], "--json", "r.json")
    assert result.code == 0, result.text  # the order of a sum is the implementation's: allowed, named
    row, = json.loads((tmp_path / "r.json").read_text())["rows"]
    assert row["direction"] == "backward" and any(part.endswith("dweight") for part in row["parts"])
    assert {f["category"] for f in row["findings"]} == {"reduction-order"}
    assert "sequential" in row["findings"][0]["summary"]


def test_rrelu_is_judged_at_its_eval_slope(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    x, _ = inputs()
    p = dumped(tmp_path, x=x, right=by_hand(x, np.array([11 / 48])), prelus=by_hand(x, np.array([0.25])))
    assert run_cli(["compare", "--op", "rrelu", "--x", p["x"], "--y", p["right"]], capsys, cwd=tmp_path).code == 0
    wrong = run_cli(["compare", "--op", "rrelu", "--x", p["x"], "--y", p["prelus"], "--json", "r.json"], capsys,
                    cwd=tmp_path)
    assert wrong.code == 1
    finding, = json.loads((tmp_path / "r.json").read_text())["rows"][0]["findings"]
    assert finding["category"] == "alpha-mismatch" and "0.25" in finding["summary"]


@pytest.mark.parametrize(("args", "mentions"), [
    (["--y", "y.npy"], "needs --weight"),
    (["--weight", "w4.npy", "--y", "y.npy"], "fits no PReLU weight rule"),
    (["--weight", "w.npy", "--y", "y.npy", "--dweight", "w.npy"], "--dweight needs --dy"),
    (["--weight", "w.npy", "--y", "x32.npy"], "--y is float32"),
    (["--weight", "w.npy", "--dy", "dy.npy", "--dx", "dy.npy", "--dweight", "w4.npy"], "the weight's shape [3]"),
    (["--weight", "w.npy", "--y", "y.npy", "--alpha", "0.2"], "--alpha is not taken with --op prelu"),
    (["--weight", "w.npy", "--y", "y.npy", "--channel-axis", "4"], "--channel-axis must be"),
    (["--weight", "w.npy", "--y", "y.npy", "--dtype", "bf16"], "reads raw uint16 bits"),
])
def test_wrong_inputs_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                   mentions: str):
    x, dy = inputs()
    dumped(tmp_path, x=x, dy=dy, y=x, x32=x.astype(np.float32), w=np.full(3, MEANT, np.float16),
           w4=np.full(4, MEANT, np.float16))
    assert_usage_error(compare(tmp_path, capsys, "--x", "x.npy", *args), mentions=mentions)


@pytest.mark.parametrize(("argv", "mentions"), [
    (["compare", "--op", "gelu", "--x", "x.npy"], "choose from leaky_relu, prelu, rrelu"),
    (["compare", "--x", "x.npy", "--alpha", "0.2", "--y", "x.npy", "--weight", "x.npy"], "add --op prelu"),
    (["compare", "--op", "rrelu", "--x", "x.npy", "--y", "x.npy", "--weight", "x.npy"], "--op rrelu has no weight"),
    (["run", "--op", "gelu"], "choose from leaky_relu, prelu, rrelu"),
    (["agree", "--op", "prelu,gelu"], "choose from leaky_relu, prelu, rrelu"),
    (["run", "--op", "prelu", "--alpha", "0.2"], "its rows run at alpha 0.25"),
    (["run", "--op", "rrelu", "--alpha", "0.25"], "its rows run at alpha 11/48"),
    (["run", "--op", "prelu", "--backend", "golden"], "--op prelu: none of golden computes it"),
])
def test_usage_errors_name_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                   mentions: str):
    np.save(tmp_path / "x.npy", inputs()[0])
    assert_usage_error(run_cli(argv, capsys, cwd=tmp_path), mentions=mentions)


# ----------------------------------------------------------------------------- run --op, agree --op

def selection_of(*argv: str):
    args = build_parser(only="run").parse_args(["run", *argv])
    return run_selection_from(argparse.Namespace(**vars(args)))[0]


@pytest.mark.parametrize(("argv", "ops"), [
    (("--op", "prelu"), {"prelu"}),
    (("--op", "leaky_relu"), {"leaky_relu"}),
    (("--op", "leaky_relu,prelu", "--alpha", "0.25"), {"leaky_relu", "prelu"}),
])
def test_op_selects_the_rows_of_its_operators(argv: tuple[str, ...], ops: set[str]):
    assert planned_ops(selection_of("--backend", "cann", "--dtype", "fp32", *argv)) == ops


def planned_ops(selection) -> set[str]:
    return {s.op for s in plan(selection)[0]} | {s.op for s in prelu_suite.for_selection(selection)}


def test_without_op_every_operator_runs():
    every = selection_of("--backend", "cann", "--op", "leaky_relu", "--op", "prelu,rrelu")
    assert planned_ops(selection_of("--backend", "cann")) == planned_ops(every) == {"leaky_relu", "prelu"}


def test_run_op_prelu_runs_prelu_rows_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    result = run_cli(["run", "--op", "prelu", "--backend", "cann", "--dtype", "fp16", "--json", "r.json"], capsys,
                     cwd=tmp_path)
    assert result.code == 0, result.text
    rows = json.loads((tmp_path / "r.json").read_text())["rows"]
    assert {(r.get("op"), r["direction"]) for r in rows} == {("prelu", "forward"), ("prelu", "backward")}


def test_agree_op_prelu_compares_backends_on_the_prelu_batches(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    pytest.importorskip("torch")
    result = run_cli(["agree", "--op", "prelu", "--backend", "cann,torch", "--dtype", "fp32", "--direction",
                      "forward", "--json", "r.json"], capsys, cwd=tmp_path)
    assert result.code == 0, result.text
    assert "prelu rows:" in result.out
    agreement, = json.loads((tmp_path / "r.json").read_text())["agreement"]
    # aclnnPrelu's max(0,x) + w*min(0,x) gives +0 where torch's select keeps -0*w: only those differ
    assert (agreement["op"], agreement["causes"]) == ("prelu", ["formulation"])
    assert 0 < agreement["differing"] < agreement["elements"]


def test_agree_compares_dweight_by_its_own_elements(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    pytest.importorskip("torch")
    result = run_cli(["agree", "--op", "prelu", "--backend", "cann,torch", "--dtype", "fp16", "--direction",
                      "backward", "--json", "r.json", "-q"], capsys, cwd=tmp_path)
    assert result.code == 0, result.text
    agreement, = json.loads((tmp_path / "r.json").read_text())["agreement"]
    parts = prelu_suite.batches("float16", "backward", op="prelu")
    assert agreement["elements"] == sum(b.x.size + b.weight.size for b in parts)  # dx, then dweight
    assert agreement["causes"][0] == "reduction-order"  # the two sum dweight in different orders

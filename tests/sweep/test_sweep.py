"""`conformance sweep`: chunk plan, store, resume, Dask == one process, exact totals."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from conformance.backends import call, get_backend
from conformance.config import default_config
from conformance.dtypes import from_bits, info, to_bits
from conformance.judge.evaluate import evaluate
from conformance.reference import golden as ref
from conformance.render import export
from conformance.sweep import run as sweeping
from conformance.sweep.spec import X_CLASSES, SweepSpec, chunk_plan, finite_slopes, segments, x_class
from conformance.sweep.store import Store, row_from_text, row_text
from tests.exact_oracle import exact_leaky_relu
from tests.helpers import NUMPY_PATH, assert_usage_error, children_on_the_numpy_path, run_cli

CONFIG = default_config()
NEAR_HALF = 0xBF000000  # fp32 -0.5: every pattern above it is negative, so torch's fp32 slope shows
SMALL = f"{NEAR_HALF:#x}:{NEAR_HALF + (1 << 18):#x}"


def _sweep(tmp_path: Path, capsys, *extra: str, store: str = "s.sqlite", name: str = "r.json"):
    result = run_cli(["sweep", "--store", str(tmp_path / store), "--json", str(tmp_path / name), "-q",
                      *extra], capsys)
    doc = json.loads((tmp_path / name).read_text()) if (tmp_path / name).exists() else None
    return result, doc


def _rows(doc: dict) -> list[dict]:
    return doc["rows"]


# ----------------------------------------------------------------------------- plan and spec

def test_chunk_plan_is_aligned_to_the_chunk_size():
    assert chunk_plan(4096, start=5, stop=600, chunk=256) == [(5, 256), (256, 512), (512, 600)]
    assert chunk_plan(512, start=0, stop=512, chunk=256) == [(0, 256), (256, 512)]
    with pytest.raises(ValueError, match="range must satisfy"):
        chunk_plan(512, start=256, stop=513, chunk=256)


def test_spec_key_is_stable_and_tells_sweeps_apart():
    spec = SweepSpec("torch", "float32", "float32", "forward", 0.2, tolerance=(1.3e-06, 1e-05, 1, False))
    assert spec.key == "v1|torch|||float32|float32|forward|alpha=0x1.999999999999ap-3|x=|tol=1.3e-06,1e-05,1,False"
    others = [SweepSpec("torch", "float32", "float32", "forward", 0.3),
              SweepSpec("torch", "float32", "float32", "backward", 0.2, x_class="-1"),
              SweepSpec("torch", "float16", "float16", "forward", None)]
    assert len({spec.key, *(o.key for o in others)}) == 4


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_x_classes_are_the_values_they_name(dtype):
    values = {c.id: float(x_class(c.id).value(dtype)[0]) for c in X_CLASSES}
    assert values["-1"] == -1.0 and values["1"] == 1.0 and values["+inf"] == np.inf and values["-inf"] == -np.inf
    assert np.isnan(values["nan"]) and str(values["-0"]) == "-0.0" and str(values["+0"]) == "0.0"
    tiny = info(dtype).smallest_subnormal
    assert values["-subnormal"] == -tiny and values["+subnormal"] == tiny


def test_slope_segments_pair_every_x_with_every_slope():
    spec = SweepSpec("torch", "float16", "float16", "forward", None)
    segs = list(segments(spec, (3 << 16) - 2, (4 << 16) + 3))
    slopes = finite_slopes("float16")
    assert [s.start for s in segs] == [(3 << 16) - 2, 3 << 16, 4 << 16]
    assert [s.alpha for s in segs] == [float(slopes[2]), float(slopes[3]), float(slopes[4])]
    assert to_bits(segs[0].x).tolist() == [0xFFFE, 0xFFFF] and segs[1].x.size == 1 << 16
    assert spec.size == len(slopes) << 16 and len(slopes) == (1 << 16) - 2 * 1024

@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_patterns_at_both_ends_of_the_space_are_their_own_bits(dtype):
    spec = SweepSpec("torch", dtype, dtype, "forward", 0.2)
    top = spec.size
    for lo, hi in ((0, 5), (top - 5, top)):
        (seg,) = segments(spec, lo, hi)
        assert seg.x.dtype == info(dtype).dtype and seg.start == lo
        assert to_bits(seg.x).tolist() == list(range(lo, hi))


def test_a_chunk_runs_blas_on_one_thread_and_reports_its_cpu_seconds(monkeypatch):
    from threadpoolctl import threadpool_info

    seen = []
    inner = sweeping._run_chunk
    monkeypatch.setattr(sweeping, "_run_chunk", lambda task: (seen.append(threadpool_info()), inner(task))[1])
    spec = SweepSpec("torch", "float32", "float32", "forward", 0.2, tolerance=())
    for _ in range(2):  # the second chunk reuses the thread pools found by the first
        done = sweeping.run_chunk(sweeping.ChunkTask((spec,), NEAR_HALF, NEAR_HALF + (1 << 12), CONFIG))
        assert done.cpu > 0
    blas = [[p["num_threads"] for p in found if p["user_api"] == "blas"] for found in seen]
    assert all(n and set(n) == {1} for n in blas), blas  # a library loaded by the first chunk too



# ----------------------------------------------------------------------------- usage errors

@pytest.mark.parametrize("argv, mentions", [
    (["--range", "5"], "START:STOP"),
    (["--range", "0x10:0x10"], "empty"),
    (["--range", "0:٣"], "--range STOP"),
    (["--range", "0:0x100000001"], "range must satisfy"),
    (["--chunk", "0"], "--chunk must be between 256"),
    (["--workers", "two"], "--workers"),
    (["--sweep-alpha"], "--sweep-alpha needs --dtype fp16 or bf16"),
    (["--dtype", "fp16", "--sweep-alpha", "--alpha", "0.2"], "drop --alpha"),
    (["--x-class", "nan"], "backward only"),
    (["--direction", "backward", "--x-class", "two"], "--x-class"),
    (["--alpha", "0.2.1"], "--alpha"),
    (["--backend", "nope"], "--backend"),
    (["--dtype", "fp64"], "2^64 patterns"),
])
def test_bad_arguments_exit_2_with_one_line(tmp_path, capsys, argv, mentions):
    assert_usage_error(_sweep(tmp_path, capsys, *argv)[0], mentions=mentions)


# ----------------------------------------------------------------------------- exact totals

def test_fp32_forward_counts_equal_a_direct_evaluate(tmp_path, capsys):
    result, doc = _sweep(tmp_path, capsys, "--backend", "torch,cann", "--range", SMALL, "--chunk", "0x10000",
                         "--workers", "1")
    assert result.code == 0, result.text
    x = from_bits(np.arange(NEAR_HALF, NEAR_HALF + (1 << 18), dtype=np.uint64), "float32")
    for row, name in zip(_rows(doc), ("torch", "cann")):
        direct = evaluate(x, 0.2, call(get_backend(name), "forward", x, 0.2), direction="forward",
                          backend=name, config=CONFIG)
        assert row["elements"] == x.size and row["mismatches"] == direct.metrics.mismatches > 0
        assert [(f["category"], f["count"]) for f in row["findings"]] == \
            [(f.category, f.count) for f in direct.findings]
        assert row["findings"][0]["examples"][0]["index"] == NEAR_HALF + direct.findings[0].examples[0].index


def test_store_round_trips_a_row_exactly(tmp_path):
    x = from_bits(np.array([0xBF000001, 0x7FC00000, 0x80000001, 0xFF800000], dtype=np.uint64), "float32")
    row = evaluate(x, 0.2, call(get_backend("torch"), "forward", x, 0.2), direction="forward",
                   backend="torch", config=CONFIG, label="p")
    back = row_from_text(row_text(row))
    assert export.row_dict(back) == export.row_dict(row) and back.metrics == row.metrics
    spec = SweepSpec("torch", "float32", "float32", "forward", 0.2)
    with Store(tmp_path / "s.sqlite") as store:
        store.put([(spec.key, 0, 4, "fp", row_text(row))], seconds=0.1)
        stored = store.verified(spec, [(0, 4)], fingerprint="fp")
        assert list(stored.rows) == [(0, 4)] and not stored.rejected
        assert export.row_dict(stored.rows[(0, 4)]) == export.row_dict(row)


def test_backward_sweeps_dy_against_each_x_class(tmp_path, capsys):
    result, doc = _sweep(tmp_path, capsys, "--backend", "golden,torch", "--dtype", "fp16", "--direction",
                         "backward", "--x-class=-1,nan,+0", "--workers", "1")
    assert result.code == 0, result.text
    rows = _rows(doc)
    assert [r["backend"] for r in rows] == ["golden"] * 3 + ["torch"] * 3
    assert [r["notes"][-1] for r in rows[:3]] == ["dy swept against x=-1", "dy swept against x=nan",
                                                  "dy swept against x=+0"]
    dy = from_bits(np.arange(1 << 16), "float16")
    for row, name in zip(rows[3:], ("-1", "nan", "+0")):
        x = np.repeat(x_class(name).value("float16"), dy.size)
        torch_dx = call(get_backend("torch"), "backward", x, 0.2, dy=dy).value
        golden = ref.backward(dy, x, 0.2)
        differ = (to_bits(torch_dx) != to_bits(golden)) & ~(np.isnan(torch_dx) & np.isnan(golden))
        assert row["elements"] == 1 << 16 and row["mismatches"] == int(differ.sum())


def test_slope_sweep_pairs_x_and_slope_as_an_exact_oracle_does(tmp_path, capsys):
    """torch multiplies in fp32, where the product of two fp16 values is exact, so it is
    correctly rounded for every fp16 slope; a host that swaps the slope for 0.01 is not."""
    slopes = finite_slopes("float16")
    first = int(np.flatnonzero(to_bits(slopes) == 0x2E66)[0])  # fp16(0.1), then the next slope up
    lo, hi = first << 16, (first + 2) << 16
    result, doc = _sweep(tmp_path, capsys, "--backend", "torch,cann", "--variant", "torch-default-slope",
                         "--dtype", "fp16", "--sweep-alpha", "--range", f"{lo}:{hi}", "--chunk", "0x8000",
                         "--workers", "1")
    assert result.code == 1, result.text  # cann's wrong slope fails
    torch_row, cann_row = _rows(doc)
    x = from_bits(np.arange(1 << 16), "float16")
    expected = {"torch": 0, "cann": 0}
    for k in (first, first + 1):
        alpha = float(slopes[k])
        exact = exact_leaky_relu(x, alpha, out_dtype="float16")
        with np.errstate(invalid="ignore"):  # -inf * 0 is NaN, as in torch
            model = np.where(x > 0, x, (x.astype(np.float32) * np.float32(alpha)).astype(np.float16))
        wrong = exact_leaky_relu(x, 0.01, out_dtype="float16")
        for name, got in (("torch", model), ("cann", wrong)):
            expected[name] += int(((to_bits(got) != to_bits(exact)) & ~(np.isnan(got) & np.isnan(exact))).sum())
    assert torch_row["mismatches"] == expected["torch"] and torch_row["elements"] == hi - lo
    assert cann_row["mismatches"] == expected["cann"] > 0
    assert cann_row["findings"][0]["category"] == "alpha-mismatch"


# ----------------------------------------------------------------------------- resume, store, Dask

def test_interrupted_sweep_resumes_to_the_uninterrupted_totals(tmp_path, capsys):
    args = ("--backend", "torch,cann", "--range", SMALL, "--chunk", "0x8000", "--workers", "1")
    _, whole = _sweep(tmp_path, capsys, *args, store="whole.sqlite", name="whole.json")
    specs = [SweepSpec("torch", "float32", "float32", "forward", 0.2, tolerance=(1.3e-06, 1e-05, 1, False))]
    with Store(tmp_path / "half.sqlite") as store:  # a run killed after half of torch's chunks
        plan = sweeping.make_plan(specs, store, start=NEAR_HALF, stop=NEAR_HALF + (1 << 18), chunk=1 << 15,
                                  config=CONFIG)
        sweeping.run_plan(replace(plan, tasks=plan.tasks[:4]), store, sweeping.serial)
        assert store.count(specs[0].key) == 4
    result, resumed = _sweep(tmp_path, capsys, *args, store="half.sqlite", name="resumed.json")
    assert result.code == 0, result.text
    assert resumed["rows"] == whole["rows"]


def test_ctrl_c_keeps_finished_chunks_and_writes_a_partial_report(tmp_path, capsys, monkeypatch):
    real, calls = sweeping.run_chunk, []

    def interrupted_after_two(task):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(task)
        return real(task)

    monkeypatch.setattr(sweeping, "run_chunk", interrupted_after_two)
    result, doc = _sweep(tmp_path, capsys, "--backend", "torch", "--range", SMALL, "--chunk", "0x8000",
                         "--workers", "1")
    assert result.code == 130 and doc["partial"] is True and doc["verdict"] == "fail"
    assert doc["rows"][0]["elements"] == 2 << 15
    monkeypatch.setattr(sweeping, "run_chunk", real)
    result, doc = _sweep(tmp_path, capsys, "--backend", "torch", "--range", SMALL, "--chunk", "0x8000",
                         "--workers", "1")
    assert result.code == 0 and doc["rows"][0]["elements"] == 1 << 18


def test_a_finished_sweep_reports_from_the_store_without_computing(tmp_path, capsys, monkeypatch):
    args = ("--backend", "golden,torch", "--range", SMALL, "--chunk", "0x10000", "--workers", "1")
    _, first = _sweep(tmp_path, capsys, *args, name="first.json")

    def must_not_run(*a, **k):
        raise AssertionError("a finished sweep computed again")

    monkeypatch.setattr(sweeping, "run_chunk", must_not_run)
    monkeypatch.setattr(sweeping, "guarded_call", must_not_run)
    result, again = _sweep(tmp_path, capsys, *args, name="again.json")
    assert result.code == 0, result.text
    assert again["rows"] == first["rows"]
    fresh, _ = _sweep(tmp_path, capsys, *args, "--fresh", name="fresh.json")  # --fresh recomputes
    assert fresh.code == 3 and "computed again" in fresh.err  # the patched chunk runner's error


def test_dask_cluster_gives_the_single_process_result(tmp_path, capsys, monkeypatch):
    children_on_the_numpy_path(monkeypatch)  # the cluster's workers on the reference paths; this process, compiled
    args = ("--backend", "golden,cann", "--range", SMALL, "--chunk", "0x10000")
    _, serial = _sweep(tmp_path, capsys, *args, "--workers", "1", store="one.sqlite", name="one.json")
    result, dask = _sweep(tmp_path, capsys, *args, "--workers", "2", store="two.sqlite", name="two.json")
    assert result.code == 0, result.text
    assert dask["rows"] == serial["rows"] and serial["rows"][1]["mismatches"] > 0


def test_a_sweep_killed_with_sigkill_resumes_to_the_same_totals(tmp_path, capsys):
    """A real process, kill -9 once some chunks are stored: the rerun computes only the rest."""
    args = ("--backend", "torch", "--direction", "backward", "--x-class=-0", "--range",
            f"{NEAR_HALF:#x}:{NEAR_HALF + (1 << 20):#x}", "--chunk", "0x20000", "--workers", "1")
    store = tmp_path / "killed.sqlite"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), **NUMPY_PATH}
    child = subprocess.Popen([sys.executable, "-m", "conformance", "sweep", "--store", str(store), "-q", *args],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        stored = _wait_for_chunks(store, child)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert 0 < stored < 8, "the child finished before it was killed"
    _, resumed = _sweep(tmp_path, capsys, *args, store="killed.sqlite", name="resumed.json")
    _, whole = _sweep(tmp_path, capsys, *args, store="whole.sqlite", name="whole.json")
    assert resumed["rows"] == whole["rows"] and whole["rows"][0]["elements"] == 1 << 20


def _wait_for_chunks(store: Path, child: subprocess.Popen, *, timeout: float = 120) -> int:
    """Chunks stored once the child has stored at least one (0 if it exits first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and child.poll() is None:
        if store.exists():
            with contextlib.closing(sqlite3.connect(store)) as db:
                try:
                    count = db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
                except sqlite3.OperationalError:  # the table is not there yet
                    count = 0
            if count:
                return count
        time.sleep(0.02)
    return 0

"""A sweep derives a backend's row from another's when their outputs have the same bits:
the derived row must be, byte for byte in the store's encoding, the row ``evaluate`` gives."""
from __future__ import annotations

from typing import Optional

import numpy as np
import pytest

from conformance.backends import call, get_backend
from conformance.dtypes import from_bits
from conformance.npu_impl import VARIANTS
from conformance.records import BackendResult, TileLayout
from conformance.report.evaluate import Row, evaluate
from conformance.report.gate import GateConfig
from conformance.sweep import twins
from conformance.sweep.spec import x_class
from conformance.sweep.store import row_text

CONFIG = GateConfig()
NEAR_HALF = 0xBF000000  # fp32 -0.5 and below: the slope shows on every pattern


def _inputs(case: str) -> tuple[str, np.ndarray, Optional[np.ndarray]]:
    """(direction, x, dy) of a sweep-like segment."""
    if case == "fp32 negatives":  # more mismatches than triage selects on unsampled
        return "forward", from_bits(np.arange(NEAR_HALF, NEAR_HALF + (1 << 19), dtype=np.uint64), "float32"), None
    if case == "fp32 specials":
        return "forward", from_bits(np.arange(0x7F7FF800, 0x7F800800, dtype=np.uint64), "float32"), None
    if case == "fp16 x":
        return "forward", from_bits(np.arange(1 << 16, dtype=np.uint64), "float16"), None
    dy = from_bits(np.arange(1 << 16, dtype=np.uint64), "float16")  # every fp16 dy against x = -1
    return "backward", np.repeat(x_class("-1").value("float16"), dy.size), dy


def _row(result: BackendResult, direction: str, x: np.ndarray, dy: Optional[np.ndarray], *, backend: str,
         profile: Optional[str] = None, variant: Optional[str] = None) -> Row:
    return evaluate(x, 0.2, result, direction=direction, dy=dy, backend=backend, profile=profile, variant=variant,
                    config=CONFIG, label="every pattern", shape=(x.size,))


def _twin(result: BackendResult, layout: Optional[TileLayout]) -> BackendResult:
    return BackendResult(value=np.array(result.value, copy=True), layout=layout, notes=result.notes)


SEEN = {"derived": 0, "refused": 0}


@pytest.mark.parametrize("case", ["fp32 negatives", "fp32 specials", "fp16 x", "fp16 dy at x=-1"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_derived_row_is_the_row_evaluate_gives(case, variant):
    direction, x, dy = _inputs(case)
    cann = get_backend("cann", profile="ascend910b1", variant=variant)
    if not cann.supports(str(x.dtype), str(x.dtype), direction):
        pytest.skip(f"cann {variant} does not run {x.dtype} {direction}")
    judged = call(cann, direction, x.copy(), 0.2, dy=None if dy is None else dy.copy())
    row = _row(judged, direction, x, dy, backend="cann", profile="ascend910b1", variant=variant)
    for layout in (None, judged.layout):  # a backend without a plan, and one with the same plan
        other = _twin(judged, layout)
        if not twins.derivable(row, judged, other):
            SEEN["refused"] += 1
            continue
        SEEN["derived"] += 1
        got = twins.derived(row, other, backend="torch", profile=None, variant=None, config=CONFIG)
        assert row_text(got) == row_text(_row(other, direction, x, dy, backend="torch"))


def test_rows_were_both_derived_and_refused():
    """The cases above derive some rows and refuse others (tail and block defects leave work
    for the layout-reading passes), so both branches were checked against ``evaluate``."""
    if SEEN["derived"] + SEEN["refused"] == 0:
        pytest.skip("run with the cases above")
    assert SEEN["derived"] > 0 and SEEN["refused"] > 0, SEEN


def test_outputs_differing_in_one_nan_payload_are_not_twins():
    a = BackendResult(value=from_bits(np.array([0x7FC00000, 0x3F800000], dtype=np.uint64), "float32"))
    b = BackendResult(value=from_bits(np.array([0x7FC00001, 0x3F800000], dtype=np.uint64), "float32"))
    assert twins.same_bits(a, a) and not twins.same_bits(a, b)
    assert not twins.same_bits(a, BackendResult(value=None, rejected="no"))


def test_a_chunk_judges_torch_and_cann_once_when_their_bits_agree(monkeypatch):
    from conformance.sweep import run as sweeping
    from conformance.sweep.spec import SweepSpec

    judged = []
    inner = sweeping.evaluate
    monkeypatch.setattr(sweeping, "evaluate", lambda *a, **k: (judged.append(k["backend"]), inner(*a, **k))[1])
    specs = (SweepSpec("torch", "float32", "float32", "forward", 0.2),
             SweepSpec("cann", "float32", "float32", "forward", 0.2, "ascend910b1", "reference"))
    done = sweeping.run_chunk(sweeping.ChunkTask(specs, NEAR_HALF, NEAR_HALF + (1 << 14), CONFIG))
    assert judged == ["cann"]  # the one with a tile layout; torch's row derived from it
    assert [key.split("|")[1] for key, _, _ in done.rows] == ["torch", "cann"]  # rows in the specs' order

"""A sweep derives a backend's row from another's when their outputs have the same bits:
the derived row must be, byte for byte in the store's encoding, the row ``evaluate`` gives."""
from __future__ import annotations

from typing import Optional

import numpy as np
import pytest

from conformance.backends import call, get_backend
from conformance.config import default_config
from conformance.dtypes import from_bits
from conformance.judge.evaluate import evaluate
from conformance.npu_impl import VARIANTS
from conformance.records import BackendResult, Row, TilePlan
from conformance.sweep import twins
from conformance.sweep.spec import x_class
from conformance.sweep.store import row_text
from tests.helpers import rotation, sampled

CONFIG = default_config()
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


def _twin(result: BackendResult, tile_plan: Optional[TilePlan]) -> BackendResult:
    return BackendResult(value=np.array(result.value, copy=True), tile_plan=tile_plan, notes=result.notes)


LARGE = ("fp32 negatives", "fp16 x", "fp16 dy at x=-1")  # 2**19 or 2**16 elements each


def _runs(case: str, variant: str) -> bool:
    """Whether the cann variant runs the segment's dtype and direction."""
    direction, x, _ = _inputs(case)
    return get_backend("cann", profile="ascend910b1", variant=variant).supports(str(x.dtype), str(x.dtype), direction)


#: The default run's share: every variant on the specials and on one of the three large segments
#: it runs, in turn (each large segment, the backward one among them, judged with a third of the
#: variants); ``make test-exhaustive`` the others.
_LARGE_IN_TURN = rotation(list(VARIANTS), list(LARGE), fits=_runs)


def _kept(variant: str, case: str) -> bool:
    return case not in LARGE or _LARGE_IN_TURN(case, variant)


def test_the_default_run_derives_every_variant_on_a_large_segment_it_runs() -> None:
    kept = [(v, c) for v in VARIANTS for c in LARGE if _kept(v, c)]
    assert [v for v, _ in kept] == list(VARIANTS) and {c for _, c in kept} == set(LARGE)
    assert all(_runs(c, v) for v, c in kept)


@pytest.mark.parametrize(("variant", "case"), sampled([(v, c) for v in VARIANTS for c in (*LARGE, "fp32 specials")],
                                                      default=_kept))
def test_a_derived_row_is_the_row_evaluate_gives(variant, case):
    direction, x, dy = _inputs(case)
    cann = get_backend("cann", profile="ascend910b1", variant=variant)
    if not cann.supports(str(x.dtype), str(x.dtype), direction):
        pytest.skip(f"cann {variant} does not run {x.dtype} {direction}")
    judged = call(cann, direction, x.copy(), 0.2, dy=None if dy is None else dy.copy())
    row = _row(judged, direction, x, dy, backend="cann", profile="ascend910b1", variant=variant)
    for tile_plan in (None, judged.tile_plan):  # a backend without a plan, and one with the same plan
        other = _twin(judged, tile_plan)
        if not twins.derivable(row, judged, other):
            continue
        got = twins.derived(row, other, backend="torch", profile=None, variant=None, config=CONFIG)
        assert row_text(got) == row_text(_row(other, direction, x, dy, backend="torch"))


def _derivable(variant: str) -> bool:
    direction, x, dy = _inputs("fp16 x")
    judged = call(get_backend("cann", profile="ascend910b1", variant=variant), direction, x.copy(), 0.2)
    row = _row(judged, direction, x, dy, backend="cann", profile="ascend910b1", variant=variant)
    return twins.derivable(row, judged, _twin(judged, None))


def test_a_correct_kernels_row_is_derived_and_a_dropped_tails_is_not():
    """Both branches of the test above occur: a correct kernel's findings are whole-batch
    claims, a dropped tail leaves work for the tile-plan-reading passes."""
    assert _derivable("reference") and not _derivable("tail-dropped")

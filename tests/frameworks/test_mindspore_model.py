"""MindSpore's float32 golden model at the points where DAZ/FTZ decide the bits.

The backend runs every call with FZ/DAZ set, as MindSpore's own thread pool does
(``flushing``), and the model computes each op of ``maximum(T(a)*x, x)`` and of its
MaximumGrad graph under DAZ/FTZ.  The expected bits below were measured on mindspore
2.10.0 (CPU, x86-64) through the backend; the tests that need MindSpore itself skip
without its environment (``make conformance-all``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import pytest

from conformance.backends import default_worker, load
from conformance.config import load_config
from conformance.dtypes import all_patterns, from_bits, info
from conformance.frameworks.mindspore_backend import flushing
from conformance.reference import golden as ref
from conformance.render.messages import failure_message
from conformance.suite import SUITE_ALPHAS
from tests.frameworks.test_models_own_envs import mindspore_backward, mindspore_forward
from tests.helpers import assert_same_bits, counts, judge, slopes_in_turn


@dataclass(frozen=True)
class Point:
    """One measured element: x (and dy) as float32 bits, MindSpore's output bits."""

    why: str
    alpha: float
    x: int
    actual: int
    dy: Optional[int] = None


POINTS = [
    Point("max reads a positive subnormal x as zero", 0.2, 0x004362DF, 0x00000000),
    Point("min reads a negative subnormal x as zero", 1.5, 0x804FF7C1, 0x80000000),
    Point("subnormal x ties its product under DAZ: a*(dy/2) + dy/2", 1.5, 0x804FF7C1, 0x3D858B3F, 0x3D55AB98),
    Point("positive subnormal x ties at a below 1", 0.2, 0x004362DF, 0xE482F681, 0xE4DA4582),
    Point("alpha 1 ties everywhere: a negative subnormal dy halves to -0", 1.0, 0x6A42DECD, 0x80000000, 0x8073F511),
    Point("x < 0: a*dy with dy read as -0, plus +0, is +0", 0.2, 0x8B89E43C, 0x00000000, 0x8047DCFF),
    Point("NaN x: a*dy + dy with a subnormal dy read as zero", 1.5, 0x7FE09A2F, 0x80000000, 0x802796D2),
    Point("NaN x: a*dy + dy rounded twice", 1.5, 0x7F8CFC76, 0xB1F64624, 0xB14504E9),
    Point("Div(dy, 2) is tiny before it rounds to the smallest normal: flushed", 1.0, 0x32010000, 0x80000000,
          0x80FFFFFF),
]


def _f32(bits: int) -> np.ndarray:
    return from_bits(np.array([bits], dtype=np.uint32), "float32")


def _model(point: Point) -> np.ndarray:
    x = _f32(point.x)
    if point.dy is None:
        return mindspore_forward(x, point.alpha)
    return mindspore_backward(_f32(point.dy), x, point.alpha)


def _exact(point: Point) -> np.ndarray:
    x = _f32(point.x)
    if point.dy is None:
        return ref.forward(x, point.alpha)
    return ref.backward(_f32(point.dy), x, point.alpha)


@pytest.mark.parametrize("point", POINTS, ids=[p.why for p in POINTS])
def test_the_model_gives_mindspores_measured_bits(point: Point) -> None:
    assert_same_bits(_model(point), _f32(point.actual), what=point.why)


@pytest.mark.parametrize("point", POINTS, ids=[p.why for p in POINTS])
def test_each_measured_point_differs_from_the_exact_reference(point: Point) -> None:
    assert _exact(point).view(np.uint32)[0] != point.actual


def test_flushing_sets_fz_daz_for_the_block_only() -> None:
    tiny = np.float32(info("float32").smallest_normal)
    with flushing():
        inside = tiny * np.float32(0.5)  # subnormal: FTZ makes it zero
    outside = tiny * np.float32(0.5)
    assert inside == 0 and outside != 0


def _specials() -> np.ndarray:
    tiny, sub = info("float32").smallest_normal, float(np.finfo(np.float32).smallest_subnormal)
    below_two_tiny = float(from_bits(np.array([0x00FFFFFF]), "float32")[0])  # halves to a tiny result
    values = [0.0, np.inf, np.nan, sub, tiny / 2, tiny * 0.75, tiny, tiny * 1.25, below_two_tiny, tiny * 3, 1e-3,
              1.0, 3.0, float(np.finfo(np.float32).max)]
    return np.array(values + [-v for v in values], dtype=np.float32)


def _grid() -> tuple[np.ndarray, np.ndarray]:
    x, dy = np.meshgrid(_specials(), _specials())
    return x.ravel(), dy.ravel()


def _inputs(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    if dtype == "float16":
        x = all_patterns("float16")
        return x, np.random.default_rng(7).permutation(x)
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2 ** 32, 100_000, dtype=np.uint64).astype(np.uint32)
    dy_bits = rng.integers(0, 2 ** 32, bits.size, dtype=np.uint64).astype(np.uint32)
    gx, gdy = _grid()
    return (np.concatenate([bits.view(np.float32), gx]), np.concatenate([dy_bits.view(np.float32), gdy]))


POLICY = load_config()  # the project's pyproject.toml: mindspore's allowed categories


#: Slope 0 and a slope above 1 (``minimum`` in place of ``maximum``) on every direction and
#: dtype; the slopes below 1 name the same rules, so the default run keeps one of them each,
#: in turn, and ``make test-exhaustive`` the others.
TRIAGED = slopes_in_turn([(d, t) for d in ("forward", "backward") for t in ("float16", "float32")],
                         (0.0, 0.01, 0.2, 0.3, 1.5), always=(0.0, 1.5))


@pytest.mark.parametrize(("direction", "dtype", "alpha"), TRIAGED)
def test_mindspores_model_output_triages_with_nothing_unexplained(direction: str, dtype: str,
                                                                  alpha: float) -> None:
    x, dy = _inputs(dtype)
    actual = mindspore_forward(x, alpha) if direction == "forward" else mindspore_backward(dy, x, alpha)
    row = judge(x, actual, alpha, direction=direction, dy=dy if direction == "backward" else None,
                backend="mindspore", config=POLICY)
    assert "unexplained" not in counts(row), failure_message(row)
    assert row.verdict != "fail", failure_message(row)


@pytest.fixture(scope="module")
def fresh_worker():
    """A MindSpore worker of this module's own: its first call is in the test."""
    if load("mindspore").environment.missing() is not None:
        pytest.skip("mindspore environment not set up (make conformance-all)")
    from conformance.worker.client import WorkerBackend

    backend = WorkerBackend(default_worker("mindspore"))
    yield backend
    backend.close()


def test_mindspore_flushes_from_its_first_call_and_matches_the_model_on_special_pairs(fresh_worker) -> None:
    x, dy = _grid()
    first = fresh_worker.backward(dy, x, 1.5).value  # before anything else in this process
    for alpha in SUITE_ALPHAS:
        for _ in range(2):  # a repeated call gives the same bits (no state that changes with use)
            assert_same_bits(fresh_worker.forward(x, alpha).value, mindspore_forward(x, alpha),
                             what=f"forward a={alpha}")
            assert_same_bits(fresh_worker.backward(dy, x, alpha).value, mindspore_backward(dy, x, alpha),
                             what=f"backward a={alpha}")
    assert_same_bits(first, mindspore_backward(dy, x, 1.5), what="the first call")

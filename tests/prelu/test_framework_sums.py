"""dweight's float16 sums as TensorFlow (Eigen) and JAX (XLA:CPU) add them: the orders of
``conformance.reference.eigen_reduction`` and ``reductions``, checked on sums whose value the order
decides (worked out by hand from the sources' algorithms), then bit for bit against the frameworks."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.backends import get_backend
from conformance.reference import prelu
from conformance.reference.eigen_reduction import PACKET, merged
from conformance.reference.reductions import CATALOGUE, Reduction, reduce_dweight
from conformance.triage.prelu import triage_dweight

EIGEN = Reduction("input", "eigen", "input")
XLA = Reduction("input", "sequential", None)  # JAX float16, fused: exact shares, each partial sum rounded to float16
XLA_OP_BY_OP = Reduction("input", "sequential", "input")  # JAX float16 widened op by op: each share rounded first
F16 = np.float16


def _negative_ones(shares: list[float], shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(x, dy) whose shares x*dy are ``shares`` (x = -1, dy = -share; a share of +0: x = 1)."""
    s = np.array(shares, dtype=np.float64).reshape(shape)
    x = np.where(s == 0, 1.0, -1.0).astype(F16)
    return x, (-s).astype(F16)


def test_tensorflow_merges_adjacent_axes_of_one_kind_and_drops_axes_of_length_one() -> None:
    assert merged((2, 4, 6, 6), (True, False, True, True)) == ((2, 4, 36), (True, False, True))
    assert merged((1, 4, 1, 9), (True, False, True, True)) == ((4, 9), (False, True))


def test_eigens_innermost_reducer_sums_lanes_then_adds_the_tail() -> None:
    # one row of 9: lane 0 holds 2048, lanes 1-7 a 1 each, the tail a 1.  The lanes in float32 make 2055,
    # rounded to 2056 (a tie, to even); 2056 + 1 is a tie again: 2056.  Left to right in float16 every 1 is
    # lost against 2048.
    x, dy = _negative_ones([2048] + [1] * 8, (1, 9))
    weight = np.array([0.25], dtype=F16)
    assert PACKET == 8
    assert float(reduce_dweight(dy, x, weight, EIGEN)[0]) == 2056.0
    assert float(reduce_dweight(dy, x, weight, Reduction("input", "sequential", "input"))[0]) == 2048.0


def test_eigens_generic_reducer_runs_the_batch_axis_innermost() -> None:
    # x (N=2, C=2, L=3), a weight per channel: channel 0 is visited (n0,l0), (n1,l0), (n0,l1), ... so 2048
    # comes second and the 1s after it are lost (2048); in memory order the three 1s come first (2051 -> 2052).
    shares = [[1, 1, 1], [1, 1, 1], [2048, 0, 0], [1, 1, 1]]  # rows: (n0, c0), (n0, c1), (n1, c0), (n1, c1)
    x, dy = _negative_ones(shares, (2, 2, 3))
    weight = np.array([0.25, 0.5], dtype=F16)
    assert reduce_dweight(dy, x, weight, EIGEN).tolist() == [2048.0, 6.0]
    assert reduce_dweight(dy, x, weight, Reduction("input", "sequential", "input")).tolist() == [2052.0, 6.0]


def test_an_exact_share_added_to_a_float16_sum_is_rounded_only_with_it() -> None:
    # shares 2 and 1048 * 1001 * 2**-30 = 2**-10 + 472 * 2**-30: rounded to float16 first (its ULP there is
    # 1024 * 2**-30), the second is 2**-10 and 2 + 2**-10 is a tie (to even: 2); added exactly it is just
    # above the tie: 2 + 2**-9
    x = np.array([-1.0, -1048 * 2.0 ** -15], dtype=F16)
    dy = np.array([-2.0, -1001 * 2.0 ** -15], dtype=F16)
    weight = np.array([0.25], dtype=F16)
    assert float(reduce_dweight(dy, x, weight, XLA)[0]) == 2 + 2.0 ** -9
    assert float(reduce_dweight(dy, x, weight, Reduction("input", "sequential", "input"))[0]) == 2.0


def test_both_ways_are_tried_by_triage() -> None:
    assert EIGEN in CATALOGUE and XLA in CATALOGUE and XLA_OP_BY_OP in CATALOGUE


def test_a_dweight_summed_in_eigens_order_is_reduction_order_named_with_it() -> None:
    rng = np.random.default_rng(3)
    x, dy = rng.normal(size=(2, 4, 6, 6)).astype(F16), rng.normal(size=(2, 4, 6, 6)).astype(F16)
    weight = np.array([0.25, 0.0, -0.5, 0.2], dtype=F16)
    actual = reduce_dweight(dy, x, weight, EIGEN)
    claims = triage_dweight(dy, x, weight, prelu.dweight(dy, x, weight), actual)
    assert [c.category for c in claims] == ["reduction-order"] and "Eigen's order" in claims[0].summary


# ----------------------------------------------------------------------------- the frameworks themselves

SHAPES = [(2, 4, 6, 6), (3, 4, 1, 5), (1, 4, 1, 100), (1, 4, 10, 30), (8, 3, 16, 16), (7, 2, 5, 3, 9)]


def _inputs(shape: tuple[int, ...], seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x, dy = rng.normal(size=shape).astype(F16), rng.normal(size=shape).astype(F16)
    return x, dy, np.linspace(-0.5, 0.5, shape[1]).astype(F16)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_tensorflow_sums_a_float16_dweight_in_eigens_order(shape: tuple[int, ...]) -> None:
    pytest.importorskip("tensorflow")
    x, dy, weight = _inputs(shape, 5)
    got = get_backend("tensorflow").prelu("backward", x, weight, dy=dy).dweight
    assert reduce_dweight(dy, x, weight, EIGEN).view(np.uint16).tolist() == got.view(np.uint16).tolist()


#: reduced axes of at most 32 each, summed in memory order on both hosts measured (docs/reference/prelu.md)
JAX_SEQUENTIAL = [(2, 4, 6, 6), (3, 4, 1, 5), (1, 4, 10, 30), (7, 2, 5, 3, 9)]


def _xla_fuses_float16() -> bool:
    """Whether XLA:CPU fuses JAX's float16 backward into float32 on this host
    (``models.HOST_DEPENDENT``): a product that underflows float16 keeps its sign through the
    fused multiply-add (-0), and becomes +0 when the branches are added op by op."""
    dx = get_backend("jax").backward(np.array([-(2.0 ** -24)], F16), np.array([-1.0], F16), 0.25).value
    return bool(np.signbit(dx[0]))


@pytest.mark.parametrize("shape", JAX_SEQUENTIAL, ids=str)
def test_jax_sums_a_float16_dweight_of_short_axes_sequentially_as_the_host_computes_its_shares(
        shape: tuple[int, ...]) -> None:
    """Where the host fuses the float16 backward, the shares are exact; where it widens op by op,
    each share is rounded to float16 before it is added.  The other way fails on these shapes."""
    pytest.importorskip("jax")
    x, dy, weight = _inputs(shape, 6)
    got = get_backend("jax").prelu("backward", x, weight, dy=dy).dweight
    way, other = (XLA, XLA_OP_BY_OP) if _xla_fuses_float16() else (XLA_OP_BY_OP, XLA)
    assert reduce_dweight(dy, x, weight, way).view(np.uint16).tolist() == got.view(np.uint16).tolist()
    assert reduce_dweight(dy, x, weight, other).view(np.uint16).tolist() != got.view(np.uint16).tolist()


@pytest.mark.parametrize("name", ["tensorflow", "jax"])
def test_the_float16_backward_rows_are_planned(name: str) -> None:
    pytest.importorskip(name)
    assert get_backend(name).prelu_supports("float16", "backward")


# ----------------------------------------------------------------------------- torch's float32 cascade sum

CASCADE = Reduction("float32", "cascade", "input")


def test_torchs_cascade_adds_the_tail_before_the_lanes() -> None:
    # nine float32 shares: one vector of eight 1s, then a tail of 2**24.  The scalar sum takes the tail first
    # (2**24) and every lane after it is lost (2**24 + 1 rounds to even); left to right the eight 1s come first.
    x = np.array([-1.0] * 9, dtype=np.float32)
    dy = np.array([-1.0] * 8 + [-(2.0 ** 24)], dtype=np.float32)
    weight = np.array([0.25], dtype=np.float32)
    assert float(reduce_dweight(dy, x, weight, CASCADE)[0]) == 2.0 ** 24
    assert float(reduce_dweight(dy, x, weight, Reduction("float32", "sequential", "input"))[0]) == 2.0 ** 24 + 8


def test_torchs_cascade_sums_each_lane_down_its_vectors() -> None:
    # sixteen shares, two vectors: lane 0 holds 2**24 and -2**24 (0), the other lanes 1 + 1: 14 in all.  Left to
    # right the seven 1s after 2**24 are lost: 7.
    shares = [2.0 ** 24] + [1.0] * 7 + [-(2.0 ** 24)] + [1.0] * 7
    x = np.array([-1.0] * 16, dtype=np.float32)
    dy = -np.array(shares, dtype=np.float32)
    weight = np.array([0.25], dtype=np.float32)
    assert float(reduce_dweight(dy, x, weight, CASCADE)[0]) == 14.0
    assert float(reduce_dweight(dy, x, weight, Reduction("float32", "sequential", "input"))[0]) == 7.0


TORCH_SHAPES = [(2, 3, 5), (4, 3, 16, 16), (8, 3, 64, 64), (2, 4, 6, 6), (3, 3, 1000), (2, 3, 17, 3), (500, 40),
                (64, 45), (10, 7), (300,), (3, 2, 5, 7, 9)]


@pytest.mark.parametrize("shape", TORCH_SHAPES, ids=str)
def test_torch_sums_a_float32_dweight_by_its_cascade(shape: tuple[int, ...]) -> None:
    pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    x, dy = rng.normal(size=shape).astype(np.float32), rng.normal(size=shape).astype(np.float32)
    weight = np.linspace(-0.5, 0.5, shape[1] if len(shape) > 1 else 1).astype(np.float32)
    got = get_backend("torch").prelu("backward", x, weight, dy=dy).dweight
    assert reduce_dweight(dy, x, weight, CASCADE).view(np.uint32).tolist() == got.view(np.uint32).tolist()


def test_the_tensorflow_float16_backward_row_names_its_dweight_by_eigens_order() -> None:
    pytest.importorskip("tensorflow")
    from conformance import prelu_suite
    from conformance.config import default_config

    found = get_backend("tensorflow")
    spec = prelu_suite.PreluRowSpec.of(found, "tensorflow", "prelu", "float16", "backward")
    row = prelu_suite.run_row(spec, found, config=default_config())
    orders = [f for f in row.findings if f.category == "reduction-order"]
    assert row.verdict != "fail" and orders and "Eigen's order" in orders[0].summary
    assert "unexplained" not in {f.category for f in row.findings}

"""A wrong slope of any value is recovered from the data and proved by recomputation: a framework's
default (named with whose it is), a slope held in a narrower dtype, or an arbitrary learned value (named
by its value), for PReLU's per-channel weight and RReLU's one slope, y and dx, float32, float16 and
bfloat16; elements no slope reproduces stay ``unexplained``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import pytest

from conformance.dtypes import info, to_bits
from conformance.ops import RRELU_EVAL_SLOPE
from conformance.reference import prelu
from conformance.reference.exact import cast_exact
from conformance.triage.prelu import Operands, triage_elementwise

SHAPE = (2, 4, 8, 8)  # 128 elements a channel: about 64 negative ones pin the slope
DECLARED = (0.1, 0.05, 0.4, 0.45)  # PReLU's weight: none of them a slope under test
MOVED = 2  # the PReLU channel that used the wrong slope (one: two moved alike would read as a clip)


def _held(value: float, dtype: str) -> float:
    return float(cast_exact(np.array([value]), info(dtype))[0])


@dataclass(frozen=True)
class Slope:
    """A slope a kernel used and the words the summary must hold for it."""

    value: float
    words: str

    def __str__(self) -> str:
        return f"slope={self.value!r}"


SLOPES = [Slope(0.01, "the torch LeakyReLU default"), Slope(0.0, "the CANN LeakyReLU default"),
          Slope(0.3, "the Keras layer LeakyReLU default"), Slope(0.2, "the tf.nn LeakyReLU default"),
          Slope(0.137, "0.137"), Slope(_held(0.137, "bfloat16"), "0.13671875 (0.137 held in bf16)"),
          Slope(_held(0.01, "float16"), "(the torch LeakyReLU default")]


@dataclass(frozen=True)
class Output:
    """One op's operands in one dtype and direction, with the output a wrong slope gave."""

    ops: Operands
    expected: np.ndarray
    actual: np.ndarray
    forward: bool


def computed(dtype: str, op: str, direction: str, slope: float, *, opmath: Optional[str] = None,
             seed: int = 0) -> Output:
    """The golden, and the output of a kernel that multiplied by ``slope`` (on channel :data:`MOVED` for PReLU,
    everywhere for RReLU), each product rounded once, or (``opmath``) rounded to it first, as torch's CPU half
    kernels."""
    rng = np.random.default_rng(seed)
    x, dy = (rng.normal(size=SHAPE).astype(info(dtype).dtype) for _ in range(2))
    declared = np.array(DECLARED).astype(info(dtype).dtype) if op == "prelu" else np.array([RRELU_EVAL_SLOPE])
    used = declared.astype(np.float64)
    used[MOVED if op == "prelu" else 0] = slope
    forward = direction == "forward"
    ops = Operands(x, x if forward else dy, declared)
    actual = ops.golden(used, opmath=opmath) if opmath else \
        prelu.forward(x, used) if forward else prelu.backward(dy, x, used)
    return Output(ops, ops.golden(declared), actual, forward)


def differing(out: Output) -> np.ndarray:
    return to_bits(out.expected) != to_bits(out.actual)


def _assert_named(out: Output, *, words: str, op: str) -> float:
    """The one claim is ``alpha-mismatch`` on every differing element, named with ``words``; its slope."""
    claims = triage_elementwise(out.ops, out.expected, out.actual, forward=out.forward)
    assert [c.category for c in claims] == ["alpha-mismatch"], [(c.category, c.summary) for c in claims]
    claim = claims[0]
    assert np.array_equal(claim.mask, differing(out))
    assert words in claim.summary
    assert claim.summary.startswith("the one slope used" if op == "rrelu" else "channel 2 used")
    return claim.detail["effective_alpha"]


@pytest.mark.parametrize("direction", ["forward", "backward"])
@pytest.mark.parametrize("slope", SLOPES, ids=str)
@pytest.mark.parametrize("op", ["prelu", "rrelu"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_any_wrong_slope_is_recovered_and_named(dtype: str, op: str, slope: Slope, direction: str):
    out = computed(dtype, op, direction, slope.value)
    assert differing(out).any()
    recovered = _assert_named(out, words=slope.words, op=op)
    # the slope used, or one the data cannot tell from it (0.01 and its float16 rounding on bfloat16 data)
    alike = to_bits(computed(dtype, op, direction, recovered).actual) == to_bits(out.actual)
    assert recovered == slope.value or alike.all()


@pytest.mark.parametrize("direction", ["forward", "backward"])
@pytest.mark.parametrize("op", ["prelu", "rrelu"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_default_multiplied_in_float32_opmath_is_named(dtype: str, op: str, direction: str):
    # torch's fp16 leaky_relu on CPU: the slope held in float32, each product rounded to float32, then to half
    out = computed(dtype, op, direction, 0.01, opmath="float32")
    claims = triage_elementwise(out.ops, out.expected, out.actual, forward=out.forward)
    assert {c.category for c in claims} == {"alpha-mismatch"}
    assert all("the torch LeakyReLU default" in c.summary for c in claims)
    assert np.array_equal(np.logical_or.reduce([c.mask for c in claims]), differing(out))


def test_torch_rrelu_default_on_a_prelu_channel_is_named():
    out = computed("float16", "prelu", "forward", RRELU_EVAL_SLOPE)
    assert _assert_named(out, words="torch's RReLU eval slope", op="prelu") == RRELU_EVAL_SLOPE


def test_a_slope_of_zero_gives_signed_zeros_and_is_named():
    out = computed("float16", "rrelu", "forward", 0.0)
    negative = out.ops.x < 0
    assert (out.actual[negative] == 0).all() and np.signbit(out.actual[negative]).all()  # 0 * x<0 = -0
    assert _assert_named(out, words="the CANN LeakyReLU default", op="rrelu") == 0.0


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_noise_on_a_few_elements_stays_unexplained_and_the_rest_is_named(dtype: str):
    out = computed(dtype, "prelu", "forward", 0.01, seed=4)
    actual = out.actual.copy()
    flat, x = actual.reshape(-1), out.ops.x.reshape(-1)
    channel = np.broadcast_to(np.arange(4).reshape(1, 4, 1, 1), SHAPE).reshape(-1)
    noisy = np.concatenate([np.flatnonzero((x < 0) & (channel == c))[:3]
                            for c in (0, MOVED)])  # three in a right channel, three in the moved one
    flat[noisy] = cast_exact(flat[noisy].astype(np.float64) * (1 + 0.1 * np.random.default_rng(1).random(6)),
                             info(dtype))
    claims = triage_elementwise(out.ops, out.expected, actual, forward=True)
    by = {c.category: c for c in claims}
    assert set(by) == {"alpha-mismatch", "unexplained"}
    assert np.array_equal(np.flatnonzero(by["unexplained"].mask.reshape(-1)), np.sort(noisy))
    assert "the torch LeakyReLU default" in by["alpha-mismatch"].summary
    assert by["alpha-mismatch"].mask.sum() == (to_bits(out.expected) != to_bits(actual)).sum() - 6


def test_a_channel_of_noise_is_not_given_a_slope():
    out = computed("float32", "prelu", "forward", 0.01)
    actual = out.actual.copy()
    negative = (out.ops.x < 0) & (np.arange(4).reshape(1, 4, 1, 1) == 1)
    actual[negative] = (np.random.default_rng(2).random(int(negative.sum())) - 1).astype(np.float32)
    claims = triage_elementwise(out.ops, out.expected, actual, forward=True)
    by = {c.category: c for c in claims}
    assert np.array_equal(by["unexplained"].mask, negative)
    assert by["alpha-mismatch"].detail["channels"] == [MOVED]


@pytest.mark.parametrize("slope", [0.123456789, -0.37, 1.7], ids=repr)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_a_learned_slope_of_no_short_form_is_recovered_by_a_value_reproducing_it(dtype: str, slope: float):
    out = computed(dtype, "prelu", "backward", slope)
    recovered = _assert_named(out, words=" used ", op="prelu")
    assert (to_bits(computed(dtype, "prelu", "backward", recovered).actual) == to_bits(out.actual)).all()
    assert abs(recovered - slope) <= abs(slope) * 2.0 ** -info(dtype).mant_bits

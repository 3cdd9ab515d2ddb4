"""The emulated aclnnPrelu: its formula, its host checks, and a dweight summed per tile of its plan."""
from __future__ import annotations

import numpy as np

from conformance.dtypes import to_bits
from conformance.npu_impl import prelu as kernel
from conformance.npu_impl.backend import CannBackend
from conformance.reference import prelu
from conformance.reference.reductions import Reduction, reduce_dweight
from conformance.triage.prelu import triage_dweight


def test_the_forward_is_max_plus_weighted_min_which_differs_from_a_select_at_minus_zero():
    x = np.array([[-0.0, 2.0, -3.0, np.nan, -np.inf]], np.float16)
    y = CannBackend().prelu("forward", x, np.array([0.25], np.float16)).value
    assert np.signbit(y[0, 0]) == np.False_ and np.signbit(prelu.forward(x, np.array([0.25], np.float16))[0, 0])
    assert y[0, 1] == 2.0 and y[0, 2] == -0.75 and np.isnan(y[0, 3]) and y[0, 4] == -np.inf


def test_the_host_refuses_a_weight_of_neither_one_nor_the_channels():
    result = CannBackend().prelu("forward", np.zeros((2, 3, 4), np.float32), np.zeros(4, np.float32))
    assert result.value is None and "1 or self.shape[1] = 3" in result.rejected


def test_dweight_is_summed_per_tile_of_the_plan_and_named_so():
    rng = np.random.default_rng(5)
    x, dy = (rng.normal(size=(4, 3, 64, 64)).astype(np.float32) for _ in range(2))
    weight = np.array([0.25, 0.1, 0.3], np.float32)
    result = CannBackend().prelu("backward", x, weight, dy=dy)
    tile = kernel.plan_for(x).tile_elements
    assert tile < x.size  # several tiles per channel
    assert np.array_equal(result.dweight, reduce_dweight(dy, x, weight, Reduction("float32", "pairwise", "input",
                                                                                   tile=tile)))
    expected = prelu.dweight(dy, x, weight)
    claims = triage_dweight(dy, x, weight, expected, result.dweight, tile=result.tile_plan.tile_elements)
    differing = int(np.count_nonzero(to_bits(expected) != to_bits(result.dweight)))
    assert {c.category: int(c.mask.sum()) for c in claims} == ({"reduction-order": differing} if differing else {})

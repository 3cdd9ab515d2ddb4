"""The operators as data: RReLU's eval slope and every default named by whose it is."""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from conformance.backends import get_backend
from conformance.ops import OPS, RRELU_EVAL_SLOPE, ops_of, whose


def test_rrelu_eval_slope_is_the_mean_of_torchs_bounds():
    assert Fraction(RRELU_EVAL_SLOPE).limit_denominator(1000) == Fraction(11, 48)
    assert "torch's RReLU eval slope (1/8 + 1/3) / 2 = 11/48" in whose(float(np.float32(11 / 48)))


def test_prelu_initial_values_are_named_by_whose_they_are():
    assert whose(0.25)[0] == "torch's PReLU initial value"
    assert "Keras's PReLU initial value" in whose(0.0)


def test_a_backend_without_ops_computes_leaky_relu_only():
    assert ops_of(object()) == ("leaky_relu",) and set(OPS) == {"leaky_relu", "prelu", "rrelu"}
    assert ops_of(get_backend("cann")) == ("leaky_relu", "prelu")

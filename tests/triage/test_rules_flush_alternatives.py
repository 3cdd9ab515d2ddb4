"""A flushing kernel's finding lists, as equal alternatives, exactly the flush rules that
reproduce its bits: the rules differ where a subnormal input's product is normal (a slope above
one) and where an exact product just below the smallest normal rounds up to it (x86 FTZ tests
tininess before that rounding), and where a float32 input is a normal that is subnormal once
narrowed to a float16 output (a flush of every input read leaves it; a flush of the result takes
it)."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.config import default_config
from conformance.judge.evaluate import evaluate
from conformance.records import BackendResult
from conformance.reference import golden as ref
from conformance.reference.semantics import Semantics
from conformance.triage import rules

ALL_FLUSHED = Semantics(daz=True, ftz=True, flush_output=True)
SMALLEST_NORMAL = 2.0 ** -126
NEGATIVE_SUBNORMALS = np.arange(0x80000001, 0x80000001 + 4096, 64, dtype=np.uint32).view(np.float32)
SPREAD = np.linspace(-10, 10, 1000, dtype=np.float32)


def _window(alpha: float) -> np.ndarray:
    """Negative x whose exact product with ``alpha`` is just below the smallest normal, where
    rounding to float32 gives that normal but FTZ flushes."""
    exact = np.array([SMALLEST_NORMAL - 2.0 ** -151, SMALLEST_NORMAL - 2.0 ** -150 * 0.75])
    return (-exact / alpha).astype(np.float32)


# float32 x in [2**-24, 2**-14): normal as read, a float16 subnormal once narrowed
NARROWED_SUBNORMALS = np.geomspace(2.0 ** -24, 2.0 ** -14.5, 64).astype(np.float32)



@pytest.fixture(autouse=True)
def _catalogue_built_here() -> None:
    """Each case builds the flush rules itself, not from an earlier test's cached catalogue, so
    coverage (and mutation testing's choice of tests) credits it with them."""
    rules._fixed_rules.cache_clear()


CASES = [
    # a slope of 8: a subnormal x's product is normal, so only the rules reading x as zero hold
    pytest.param(8.0, np.concatenate([NEGATIVE_SUBNORMALS, np.float32([-2.0 ** -127, -2.0 ** -128]), SPREAD]),
                 {"subnormal inputs read as zero (DAZ)", "every subnormal result flushed to zero",
                  "every subnormal input and result flushed to zero"},
                 {"subnormal products flushed to zero (FTZ)"}, "float32", id="slope-8-subnormal-x"),
    # a product in FTZ's window: only the rules that flush products hold
    pytest.param(0.5, np.concatenate([_window(0.5), NEGATIVE_SUBNORMALS, SPREAD]),
                 {"subnormal products flushed to zero (FTZ)", "every subnormal result flushed to zero",
                  "every subnormal input and result flushed to zero"},
                 {"subnormal inputs read as zero (DAZ)"}, "float32", id="ftz-window"),
    # float32 in, float16 out: only the rules that flush the result hold
    pytest.param(0.2, np.concatenate([NARROWED_SUBNORMALS, -NARROWED_SUBNORMALS, NEGATIVE_SUBNORMALS, SPREAD]),
                 {"every subnormal result flushed to zero", "every subnormal input and result flushed to zero"},
                 {"subnormal inputs read as zero (DAZ)", "subnormal products flushed to zero (FTZ)"}, "float16",
                 id="float32-in-float16-out"),
]


@pytest.mark.parametrize(("alpha", "x", "listed", "refuted", "out_dtype"), CASES)
def test_a_flushing_kernel_lists_the_flush_rules_that_reproduce_it(alpha: float, x: np.ndarray, listed: set[str],
                                                                    refuted: set[str], out_dtype: str) -> None:
    y = ref.forward(x, alpha, out_dtype=out_dtype, semantics=ALL_FLUSHED)
    exact = ref.forward(x, alpha, out_dtype=out_dtype)
    assert np.count_nonzero(y.view(np.uint8) != exact.view(np.uint8)) > 0
    row = evaluate(x, alpha, BackendResult(y), direction="forward", out_dtype=out_dtype, backend="tensorflow",
                   config=default_config())
    [finding] = row.findings
    assert finding.category == "subnormal-flush"
    assert finding.count == finding.detail["explained"]
    named = set(finding.summary.split("; or equally: "))  # the rule named, then its equals
    assert set(finding.detail["alternatives"]) < named
    assert listed <= named
    assert not refuted & named

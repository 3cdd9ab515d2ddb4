"""``variants.CHIP_FITS`` proved, not asserted: a seeded defect marked not applicable on a chip
builds that chip's own kernel bit for bit on selftest's inputs, and a defect a chip shows under
other categories is recomputed from what the chip does."""
from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Optional

import numpy as np
import pytest

from conformance.cases.batches import InputBatch
from conformance.cases.selftest_expectations import SELFTEST_ALPHAS, SELFTEST_EXAMPLES
from conformance.dtypes import info
from conformance.npu_impl import PROFILES, VARIANTS, leaky_relu, leaky_relu_backward
from conformance.npu_impl.backend import CannBackend
from conformance.npu_impl.variants import CHIP_FITS, chip_semantics, expected_on, fit_on, not_applicable
from conformance.reference import golden
from conformance.reference.exact import saturated
from conformance.suite import Inputs, RowSpec, Selection, plan
from tests.helpers import SMALL_BATCH, assert_same_bits

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
NOT_APPLICABLE = [(chip, name) for chip, prof in PROFILES.items() for name in VARIANTS if not_applicable(name, prof)]


def selftest_batches(variant: str, profile: str) -> Iterator[tuple[RowSpec, InputBatch]]:
    """Every row selftest would run for ``variant`` on ``profile``, with every batch of it (seed 0)."""
    v = VARIANTS[variant]
    selection = Selection(backends=("cann",), dtypes=v.dtypes, alphas=SELFTEST_ALPHAS,
                          directions=v.directions, profile=profile, variant=variant)  # type: ignore[arg-type]
    inputs = Inputs(seed=0, max_examples=SELFTEST_EXAMPLES, alphas=SELFTEST_ALPHAS)
    for spec in plan(selection)[0]:
        for batch in inputs.batches(spec):
            yield spec, batch


def output(backend: CannBackend, spec: RowSpec, batch: InputBatch) -> np.ndarray:
    out = spec.out_dtype if spec.out_dtype != spec.dtype else None
    if spec.direction == "forward":
        return backend.forward(batch.x.copy(), spec.alpha, out_dtype=out).value
    return backend.backward(batch.dy.copy(), batch.x.copy(), spec.alpha, out_dtype=out).value


_OWN: dict[tuple[object, ...], np.ndarray] = {}


def own_output(profile: str, spec: RowSpec, batch: InputBatch) -> np.ndarray:
    """The chip's own kernel on one batch, computed once for every variant whose rows hold it."""
    digest = hashlib.sha256(batch.x.tobytes() + (b"" if batch.dy is None else batch.dy.tobytes())).hexdigest()
    key = (profile, spec.direction, spec.dtype, spec.out_dtype, spec.alpha, batch.x.shape, digest)
    if key not in _OWN:
        _OWN[key] = output(CannBackend(profile=profile), spec, batch)
    return _OWN[key]


#: By default the batches of at most ``SMALL_BATCH`` elements (edges, drawn examples, the shapes
#: around a few tiles) and one size just past the chip's first tiling boundary (the third of its
#: ``cann shape`` sizes, n + 1); ``make test-exhaustive`` every batch of selftest's rows.
SIZES = [pytest.param(SMALL_BATCH, id="small-batches"), pytest.param(None, id="every-batch",
                                                                    marks=pytest.mark.exhaustive)]


def _sampled(batches: list[tuple[RowSpec, InputBatch]], *, largest: Optional[int]) -> list[tuple[RowSpec, InputBatch]]:
    """``batches`` but, when ``largest`` is given, those larger than it other than the size just
    past the first chip boundary of their row (the third smallest ``cann shape``: n - 1, n, n + 1)."""
    if largest is None:
        return batches
    sizes: dict[RowSpec, list[int]] = {}
    for spec, b in batches:
        sizes.setdefault(spec, []).extend([b.x.size] if b.label.startswith("cann shape") else [])
    boundary = {spec: sorted(found)[2:3] for spec, found in sizes.items()}
    return [(spec, b) for spec, b in batches if b.x.size <= largest or b.x.size in boundary[spec]]


@pytest.mark.parametrize("largest", SIZES)
@pytest.mark.parametrize("profile,variant", NOT_APPLICABLE, ids=[f"{c}-{v}" for c, v in NOT_APPLICABLE])
def test_a_variant_not_applicable_on_a_chip_builds_its_own_kernel_bit_for_bit(profile: str, variant: str,
                                                                              largest: Optional[int]) -> None:
    built = CannBackend(profile=profile, variant=variant)
    rows, boundaries = 0, 0
    for spec, batch in _sampled(list(selftest_batches(variant, profile)), largest=largest):
        boundaries += batch.label.startswith("cann shape")
        assert_same_bits(output(built, spec, batch), own_output(profile, spec, batch), what=f"{spec} {batch.label}")
        rows += 1
    assert rows > 0 and boundaries > 0, "selftest runs no batch, or no batch at a chip boundary, for it"


def test_every_chip_fit_matches_a_chip_and_names_its_reason() -> None:
    for fit in CHIP_FITS:
        chips = [p for p in PROFILES.values() if fit.matches(p)]
        assert chips, fit
        assert all(fit_on(fit.variant, p) is fit for p in chips) and fit.reason, fit


def test_the_ascend_c_kernel_takes_every_seeded_defect() -> None:
    chip = PROFILES["ascend950"]
    assert not [name for name in VARIANTS if fit_on(name, chip)]


def _narrowed(v: np.ndarray) -> np.ndarray:
    """fp32 -> fp16 in saturation mode (RINT; overflow gives +/-65504, NaN gives 0), widened back."""
    return saturated(v, info("float16")).astype(np.float32)


SATURATING = [c for c, p in PROFILES.items() if p.float_modes == ("saturation",)]


@pytest.mark.parametrize("profile", SATURATING)
@pytest.mark.parametrize("direction", ["forward", "backward"])
@pytest.mark.parametrize("out", ["float32", "float16"])
def test_cast_before_compute_on_a_saturation_chip_is_a_saturating_narrowing(profile: str, direction: str,
                                                                           out: str) -> None:
    """No op yields inf in saturation mode, so the defect cannot overflow: the kernel's output is the
    chip's own golden of the inputs narrowed to fp16 with saturation, bit for bit."""
    chip = PROFILES[profile]
    assert expected_on("cast-before-compute", chip) == ("input-precision",)
    rng = np.random.default_rng(8)
    x = np.concatenate([np.array([7e4, -7e4, 1e5, -1e5, 65519.0, -65520.0, np.inf, -np.inf, np.nan, 1e-30, 1 / 3],
                                 np.float32), (rng.standard_normal(5000) * rng.choice([1e-6, 1, 1e5], 5000))
                        .astype(np.float32)])
    dy = x[rng.permutation(x.size)]
    semantics = chip_semantics(chip, "float32")
    out_dtype = None if out == "float32" else out
    if direction == "forward":
        actual = leaky_relu(x, 0.2, profile=profile, variant="cast-before-compute", out_dtype=out_dtype).y
        expected = golden.forward(_narrowed(x), 0.2, out_dtype=out, semantics=semantics)
    else:
        actual = leaky_relu_backward(dy, x, 0.2, profile=profile, variant="cast-before-compute",
                                     out_dtype=out_dtype).dx
        expected = golden.backward(_narrowed(dy), _narrowed(x), 0.2, out_dtype=out, semantics=semantics)
    assert not np.isinf(actual).any()
    assert_same_bits(actual, expected, what=f"{profile} {direction} float32->{out}")

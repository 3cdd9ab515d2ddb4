"""What selftest expects of each seeded kernel defect (``npu_impl.variants``): the slopes and
drawn examples of the rows it runs on (each variant's own dtypes and directions, where its defect
is visible), the triage categories it must be named as on a chip, and which variants run there.

``reference`` must be named as nothing: it passes.  A variant that seeds nothing on a chip
(``variants.CHIP_FITS``) is not run there; one a chip shows under other categories is expected
under those.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from conformance.npu_impl.chips import ChipProfile, get_profile
from conformance.npu_impl.variants import DEFAULT_VARIANT, expected_on, not_applicable

SELFTEST_ALPHAS = (0.2,)  # visible for every defect: not 0, not 0.01, not representable in fp16
SELFTEST_EXAMPLES = 20


def expected_categories(variant: str, chip: ChipProfile) -> tuple[str, ...]:
    """The categories selftest must see for an applicable ``variant`` on ``chip``; none for
    ``reference``."""
    return () if variant == DEFAULT_VARIANT else expected_on(variant, chip)


def applicable_names(names: Sequence[str], *, profile: Optional[str]) -> list[str]:
    """``reference`` and the variants of ``names`` selftest runs on ``profile``."""
    chip = get_profile(profile)
    return list(dict.fromkeys([DEFAULT_VARIANT, *(n for n in names if not not_applicable(n, chip))]))

"""``selftest`` on every chip profile, on small inputs: the reference passes, every seeded defect
that applies on the chip is caught under its expected category, and the rest are not applicable.

The full ``conformance selftest --profile P`` runs the suite's whole batches (every fp16 pattern,
boundary sizes of several hundred thousand elements) for some minutes per profile; here each row
keeps only the batches of at most ``SMALL`` elements (edges, drawn examples, the one- and two-core
boundary sizes), which still hold every edge value and a short last block.
"""
from __future__ import annotations

import pytest

from conformance.commands import selftest
from conformance.npu_impl import PROFILES, VARIANTS
from conformance.npu_impl.variants import expected_on, not_applicable
from conformance.suite import Inputs, Options, RowSpec, Selection, SuiteResult, plan, run_row

SMALL = 5000  # elements per batch at most


class SmallInputs(Inputs):
    def batches(self, spec: RowSpec) -> list:
        return [b for b in super().batches(spec) if b.x.size <= SMALL]


def small_suite(selection: Selection, options: Options) -> SuiteResult:
    specs, skipped = plan(selection)
    inputs = SmallInputs(seed=options.seed, max_examples=options.max_examples, alphas=selection.alphas)
    return SuiteResult(rows=[run_row(s, inputs, options=options) for s in specs], skipped=skipped)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("profile", list(PROFILES))
def test_selftest_catches_every_applicable_defect_on_every_profile(profile: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(selftest, "run_suite", small_suite)
    outcomes = selftest.run_selftest(list(VARIANTS), profile=profile, seed=0, strict=False)
    chip = PROFILES[profile]
    by_name = {o.variant: o for o in outcomes}
    assert list(by_name) == list(VARIANTS)
    assert by_name["reference"].ok and by_name["reference"].rows > 0
    for name, o in by_name.items():
        if not_applicable(name, chip):
            assert not o.applies and o.rows == 0, name
            continue
        assert o.applies and o.rows > 0, name
        assert o.ok, f"{name} on {profile}: {o.status}, found {o.reported}"
        if name != "reference":
            assert o.expected == expected_on(name, chip) and set(o.expected) & set(o.reported), name

"""``selftest`` on every chip profile, on small inputs: the reference passes, every seeded defect
that applies on the chip is caught under its expected category, and the rest are not applicable.

The full ``conformance selftest --profile P`` runs the suite's whole batches (every fp16 pattern,
boundary sizes of several hundred thousand elements) for some minutes per profile; here each row
keeps only the batches of at most ``SMALL_BATCH`` elements (edges, drawn examples, the one- and two-core
boundary sizes), which still hold every edge value and a short last block.  By default each
profile runs ``reference`` and the variants it takes in turn (every variant on one profile);
``make test-exhaustive`` runs the rest of every profile.
"""
from __future__ import annotations

import pytest

from conformance import selftest
from conformance.npu_impl import PROFILES, VARIANTS
from conformance.npu_impl.variants import expected_on, not_applicable
from tests.helpers import keep_small_batches, variants_in_turn


def share(profile: str, *, in_turn: bool) -> list[str]:
    """``reference`` and the variants this profile takes in turn (each variant on one profile),
    or the rest of them: the two shares of every profile are every variant."""
    keep = variants_in_turn()
    return [v for v in VARIANTS if v == "reference" or keep(profile, v) == in_turn]


SHARES = [pytest.param(p, share(p, in_turn=True), id=f"{p}-in-turn") for p in PROFILES] + [
    pytest.param(p, share(p, in_turn=False), id=f"{p}-rest", marks=pytest.mark.exhaustive) for p in PROFILES]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize(("profile", "names"), SHARES)
def test_selftest_catches_every_applicable_defect_on_every_profile(profile: str, names: list[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    keep_small_batches(monkeypatch)
    outcomes = selftest.run_selftest(names, profile=profile, seed=0, strict=False)
    chip = PROFILES[profile]
    by_name = {o.variant: o for o in outcomes}
    assert list(by_name) == names
    assert by_name["reference"].ok and by_name["reference"].rows > 0
    for name, o in by_name.items():
        if not_applicable(name, chip):
            assert not o.applies and o.rows == 0, name
            continue
        assert o.applies and o.rows > 0, name
        assert o.ok, f"{name} on {profile}: {o.status}, found {o.reported}"
        if name != "reference":
            assert o.expected == expected_on(name, chip) and set(o.expected) & set(o.reported), name


def test_the_default_run_seeds_every_variant_once_and_every_profile_a_defect() -> None:
    keep = variants_in_turn()
    seeded = [v for v in VARIANTS if v != "reference"]
    assert all(sum(keep(p, v) for p in PROFILES) == 1 for v in seeded)
    assert all(any(keep(p, v) for v in seeded) for p in PROFILES)

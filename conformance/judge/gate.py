"""Tolerances and per-backend policy -> a verdict (pass / warn / fail).

A row **passes** when it is bit-identical to golden.  It **fails** when some
element violates the tolerance (see ``metrics``) or the hazards/refusal checks,
unless every such element lies in a finding whose category the backend's policy
allows.  It **warns** when it has findings that do not fail it (the backend's
documented behaviours, or differences within tolerance such as 1-ULP rounding or
an informational signed zero).  ``strict`` fails any bit difference; ``allowed``
adds categories every backend may show.

The gate receives its policy as data: a :class:`GateConfig` holds torch.testing's
tolerances and max ULP 1 by default and an empty policy; ``conformance.config`` builds
the one a run uses (each backend's declared policy, ``[tool.conformance]``, ``--config``).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from conformance.categories import NAMES
from conformance.records import Tolerance

CATEGORIES = NAMES  # the registry's order (conformance/categories.py)
VERDICTS = ("pass", "warn", "fail")
#: torch.testing.assert_close's (rtol, atol) per dtype (torch/testing/_comparison.py
#: _DTYPE_PRECISIONS): the gate's default tolerances, and the other check of that name
TORCH_TOLERANCES = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5),
                    "float32": (1.3e-6, 1e-5), "float64": (1e-7, 1e-7)}


def _default_tolerances() -> dict[str, tuple[float, float]]:
    return dict(TORCH_TOLERANCES)


@dataclass(frozen=True)
class GateConfig:
    """Tolerances per output dtype as (rtol, atol), max ULP, zero-sign strictness, policy."""

    tolerances: Mapping[str, tuple[float, float]] = field(default_factory=_default_tolerances)
    max_ulp: int = 1
    strict_zeros: bool = False
    policy: Mapping[str, frozenset[str]] = field(default_factory=dict)  # key (policy_key) -> allowed
    sources: tuple[str, ...] = ()  # the files read, in order (empty: the defaults)
    strict: bool = False  # any bit difference fails
    allowed: frozenset[str] = frozenset()  # categories every backend may show (--allow)

    def tolerance(self, dtype: str) -> Tolerance:
        rtol, atol = self.tolerances[dtype]
        return Tolerance(rtol, atol, self.max_ulp, self.strict_zeros)

    def allows(self, backend: str, category: str, *, profile: Optional[str] = None) -> bool:
        """Whether ``backend`` (run on ``profile``) may show ``category``: the entry
        ``backend[profile]`` when the policy has one, else the backend's own entry."""
        if self.strict:
            return False
        entry = self.policy.get(policy_key(backend, profile))
        if entry is None:
            entry = self.policy.get(backend, frozenset())
        return category in entry or category in self.allowed

    @property
    def described(self) -> str:
        """Which configuration judged the run, for the first console line and JUnit."""
        where = (f"config: {', '.join(self.sources)}" if self.sources
                 else "no [tool.conformance] found; built-in policy")
        extra = [*(["--strict: any bit difference fails"] if self.strict else []),
                 *([f"--allow {', '.join(sorted(self.allowed))}"] if self.allowed else [])]
        return "; ".join([where, *extra])


def policy_key(backend: str, profile: Optional[str]) -> str:
    """The policy entry of one profile of a backend: ``keras[numpy]``; the backend's name
    without a profile."""
    return f"{backend}[{profile}]" if profile else backend


def split_key(key: str) -> tuple[str, Optional[str]]:
    """``keras[numpy]`` -> ("keras", "numpy"); ``torch`` -> ("torch", None)."""
    if key.endswith("]") and "[" in key:
        name, _, profile = key[:-1].partition("[")
        return name, profile
    return key, None


def finding_gated(category: str, *, violations: int, backend: str, config: GateConfig,
                  profile: Optional[str] = None) -> bool:
    """A finding fails its row unless its elements are within tolerance or the policy allows its
    category (under ``strict`` every finding fails)."""
    if config.strict:
        return True
    return violations > 0 and not config.allows(backend, category, profile=profile)


def verdict(gated: Iterable[bool]) -> str:
    """``fail`` if any finding is gated, ``warn`` if there are findings, else ``pass``."""
    flags = list(gated)
    if any(flags):
        return "fail"
    return "warn" if flags else "pass"


def overall(verdicts: Iterable[str]) -> str:
    """The report's top-level verdict: ``fail`` if any row fails, else ``pass``."""
    return "fail" if "fail" in set(verdicts) else "pass"


def config_dict(config: GateConfig) -> dict[str, Any]:
    """The configuration a report was judged under, as JSON: tolerances, max ULP, zero
    strictness, policy and the files it was read from."""
    return {"tolerances": {d: {"rtol": r, "atol": a} for d, (r, a) in sorted(config.tolerances.items())},
            "max_ulp": config.max_ulp, "strict_zeros": config.strict_zeros,
            "policy": {k: sorted(v) for k, v in sorted(config.policy.items())},
            "sources": list(config.sources), "strict": config.strict,
            "allowed": sorted(config.allowed)}

"""``--against``: the activations of two audits paired in order, and the pairs whose slopes differ."""
from __future__ import annotations

from dataclasses import dataclass
from itertools import zip_longest
from typing import Optional

from conformance.audit.record import DEFAULT, DYNAMIC, Activation, Audit, same_slope


@dataclass(frozen=True)
class Pair:
    """The i-th activation of each target (None: that target has fewer)."""

    index: int
    left: Optional[Activation]
    right: Optional[Activation]

    @property
    def mismatch(self) -> bool:
        if self.left is None or self.right is None:
            return True
        return not same_slope(self.left.slope, self.right.slope)

    @property
    def reason(self) -> str:
        """Why the pair differs, naming each side's default where one is involved."""
        if self.left is None or self.right is None:
            side = "first" if self.left is None else "second"
            return f"no activation #{self.index + 1} in the {side} target"
        return f"{describe(self.left)} vs {describe(self.right)}"


def describe(a: Activation) -> str:
    """``0.01 implicit: torch default of torch.nn.LeakyReLU``, ``0.25 stored (ONNX default 0.01)``."""
    if a.origin == DEFAULT:
        return f"{a.slope:.7g} implicit: {a.framework} default of {a.api}"
    value = f"dynamic {a.expression}" if a.origin == DYNAMIC else f"{a.slope:.7g} {a.origin}"
    return f"{value} ({a.framework} default {a.entry.declared:g})"


def pair(left: Audit, right: Audit) -> list[Pair]:
    """Every activation paired with the one at the same position in the other target."""
    return [Pair(i, a, b) for i, (a, b) in enumerate(zip_longest(left.activations, right.activations))]


def mismatches(pairs: list[Pair]) -> list[Pair]:
    return [p for p in pairs if p.mismatch]

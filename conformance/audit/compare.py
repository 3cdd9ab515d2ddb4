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
        if self.left.op != self.right.op or self.left.weight is not None or self.right.weight is not None:
            return self.left.op != self.right.op or not same_weight(self.left, self.right)
        return not same_slope(self.left.slope, self.right.slope)

    @property
    def reason(self) -> str:
        """Why the pair differs, naming each side's default where one is involved."""
        if self.left is None or self.right is None:
            side = "first" if self.left is None else "second"
            return f"no activation #{self.index + 1} in the {side} target"
        return f"{describe(self.left)} vs {describe(self.right)}"


def same_weight(a: Activation, b: Activation) -> bool:
    """Two PReLU weights agree element by element (as float32); a weight of one value and a slope too."""
    left = a.weight if a.weight is not None else (a.slope,)
    right = b.weight if b.weight is not None else (b.slope,)
    return len(left) == len(right) and all(same_slope(x, y) for x, y in zip(left, right))


def describe(a: Activation) -> str:
    """``0.01 implicit: torch default of torch.nn.LeakyReLU``, ``0.25 stored (ONNX default 0.01)``,
    ``prelu 0.1 to 0.3 stored, trained (torch default 0.25)``."""
    op = "" if a.op == "leaky_relu" else f"{a.op} "
    if a.origin == DEFAULT:
        return f"{op}{a.slope:.7g} implicit: {a.framework} default of {a.api}"
    shown = f"{min(a.weight):.7g} to {max(a.weight):.7g}" if a.slope is None and a.weight else None
    if shown is None:
        shown = f"dynamic {a.expression}" if a.slope is None else f"{a.slope:.7g}"
    value = shown if a.origin == DYNAMIC else f"{shown} {a.origin}"
    value += f", {a.provenance}" if a.provenance else ""
    return f"{op}{value}" + ("" if a.entry is None else f" ({a.framework} default {a.entry.declared:g})")


def pair(left: Audit, right: Audit) -> list[Pair]:
    """Every activation paired with the one at the same position in the other target."""
    return [Pair(i, a, b) for i, (a, b) in enumerate(zip_longest(left.activations, right.activations))]


def mismatches(pairs: list[Pair]) -> list[Pair]:
    return [p for p in pairs if p.mismatch]

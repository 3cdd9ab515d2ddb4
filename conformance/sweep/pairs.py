"""Do two backends of one sweep give the same bits?  Per chunk, the patterns whose outputs
differ (any NaN equal to any NaN, +0 apart from -0), stored beside the chunk rows.

The backends of one group share their inputs (:meth:`SweepSpec.group`), so every pair of
them is compared on every pattern; a backend call that returned no output (an error)
counts all of the segment's patterns as differing.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np

from conformance.judge.agreement import differing
from conformance.records import pair_text
from conformance.sweep.spec import SweepSpec

Pair = tuple[SweepSpec, SweepSpec]


def pairs_of(members: Sequence[SweepSpec]) -> list[Pair]:
    """Every pair of specs of one group, each once, in the members' order."""
    return [(a, b) for i, a in enumerate(members) for b in members[i + 1:]]


def pair_key(pair: Pair) -> str:
    return f"{pair[0].key}||{pair[1].key}"


def pair_fingerprint(first: str, second: str) -> str:
    """The fingerprint of a pair count: both backends' code."""
    return hashlib.sha256(f"{first}|{second}".encode()).hexdigest()


def count(a: Optional[np.ndarray], b: Optional[np.ndarray], *, size: int) -> int:
    """Patterns of one segment whose bits differ (every one when a side returned nothing)."""
    if a is None or b is None or a.size != b.size:
        return size
    return int(differing(a, b).sum())


@dataclass(frozen=True)
class PairTotal:
    """Patterns whose bits differ between two sweeps, over the chunks the store holds."""

    first: SweepSpec
    second: SweepSpec
    differing: int
    swept: int  # patterns both sides' counts cover
    planned: int

    @property
    def line(self) -> str:
        """``torch vs cann fp32 forward alpha=0.2: 0 of 4,294,967,296 patterns differ``."""
        a, b = self.first, self.second
        alpha = "every alpha" if a.alpha is None else f"alpha={a.alpha!r}"
        at = f" at x={a.x_class}" if a.x_class else ""
        head = (f"{_who(a)} vs {_who(b)} {pair_text(a.dtype, a.out_dtype)} {a.direction} {alpha}{at}: "
                f"{self.differing:,} of {self.swept:,} patterns differ")
        if self.swept < self.planned:
            head += f" (partial: {self.swept:,} of {self.planned:,} patterns swept)"
        return head + (" (bit-identical)" if self.differing == 0 and self.swept else "")


def _who(spec: SweepSpec) -> str:
    extra = "/".join(p for p in (spec.profile, spec.variant) if p)
    return spec.backend + (f"[{extra}]" if extra else "")

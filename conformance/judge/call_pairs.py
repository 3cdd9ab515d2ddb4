"""msprobe's two-dump workflow, judged: one LeakyReLU call and direction of a device run beside
the same call of a benchmark run.

Each side is judged against the golden on its own (its row says how many elements differ
from the exact answer and why); the pair says whether the two outputs have the same bits,
how many differ, and why: first what differs before the kernel (the slope, the dtypes, the
inputs an earlier layer handed on), then both sides' triage against the golden
(``judge.agreement``).  The verdict stays the device's against the golden: a benchmark is
another run, not the exact answer.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from conformance.judge.agreement import Agreement
from conformance.records import MsprobeColumns, Row

DEVICE, BENCHMARK = "device", "benchmark"


@dataclass(frozen=True)
class CallPair:
    """One call and direction of the device dump and its partner in the benchmark dump."""

    name: str  # the device's msprobe API name (the benchmark's when the device has no partner)
    direction: str
    device: Optional[Row]  # None: the device dump has no such call
    benchmark: Optional[Row]  # None: the benchmark dump has no such call
    benchmark_name: Optional[str] = None
    agreement: Optional[Agreement] = None  # the two outputs bit for bit (None: not bit-comparable)
    columns: Optional[MsprobeColumns] = None  # msprobe's columns, device against benchmark
    before: tuple[str, ...] = ()  # what differs before the kernel: slope, dtypes, inputs
    by_order: bool = False  # matched by place in the dump, the names differing

    @property
    def partnered(self) -> bool:
        return self.device is not None and self.benchmark is not None

    @property
    def same_bits(self) -> Optional[bool]:
        """True when both outputs hold the same bits; None when they cannot be compared bit for bit."""
        return None if self.agreement is None else self.agreement.identical

    @property
    def differing(self) -> Optional[int]:
        return None if self.agreement is None else self.agreement.differing

    @property
    def why(self) -> str:
        """The pair in one line: the partner missing, or the same bits, or what differs and why."""
        if self.device is None:
            return "no partner in the device dump"
        if self.benchmark is None:
            return "no partner in the benchmark dump"
        if self.same_bits:
            return "same bits" + (f" ({'; '.join(self.before)})" if self.before else "")
        return "; ".join((*self.before, *self._triage())) or "outputs differ"

    def _triage(self) -> tuple[str, ...]:
        """Both sides' triage against the golden, when the outputs were compared bit for bit."""
        if self.agreement is None:
            return ()
        if not (self.device and self.device.findings) and not (self.benchmark and self.benchmark.findings):
            return ("each side exact against the golden for its own inputs",)
        return (self.agreement.why,)

    @property
    def matched(self) -> str:
        """How the partner was found."""
        if not self.partnered:
            return "none"
        return "by order (names differ)" if self.by_order else "by name"

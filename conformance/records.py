"""Plain records that flow down the pipeline (cases -> backends -> metrics -> triage -> judge -> render).

Backends produce :class:`BackendResult`; the metrics, triage and judge stages read it and
the judge makes each :class:`Row` (a :class:`RowKey`, the one record of a row's identity,
with its :class:`Metrics`, :class:`Finding` s and :class:`Plots`), which render reads.
The emulator's tile plan and memory hazards travel here as data, so that no stage
imports ``npu_impl/``.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

import numpy as np

from conformance.dtypes import short_name

Direction = Literal["forward", "backward"]
#: An (input dtype, output dtype) pair by table name: ("float32", "float16").
Pair = tuple[str, str]
HazardKind = Literal["out-of-bounds-write", "write-race"]


@dataclass(frozen=True)
class TileSpan:
    """One tile of one core: elements ``[start, start + length)`` of the output."""

    core: int
    tile: int
    start: int
    length: int
    is_tail: bool = False  # the core's last (shorter) tile

    @property
    def stop(self) -> int:
        return self.start + self.length


@dataclass(frozen=True)
class TilePlan:
    """How a kernel split the output over cores and tiles."""

    tile_elements: int
    spans: tuple[TileSpan, ...]
    align_elements: int = 1  # elements per 32-byte block

    def locate(self, index: int) -> Optional[TileSpan]:
        """The span holding element ``index`` (None when outside every span)."""
        for span in self.spans:
            if span.start <= index < span.stop:
                return span
        return None


@dataclass(frozen=True)
class Hazard:
    """A memory hazard the emulator saw.

    ``index`` is an element index relative to the output tensor's start: negative
    or >= numel for red-zone writes; ``cores`` lists every core that wrote it.
    """

    kind: HazardKind
    index: int
    cores: tuple[int, ...]


class Hazards(Sequence[Hazard]):
    """The emulator's hazards as columns, sorted by index, then kind: a sequence of
    :class:`Hazard` (built when first read one by one) that triage and the report read
    as arrays.  A red-zone write of a whole tile is thousands of records.

    ``kinds[rank[i]]`` is record ``i``'s kind, ``index[i]`` its element and
    ``cores[starts[i]:starts[i + 1]]`` the cores that wrote it (ascending)."""

    def __init__(self, kinds: Sequence[HazardKind], rank: np.ndarray, index: np.ndarray, cores: np.ndarray,
                 starts: np.ndarray) -> None:
        self.kinds, self.rank, self.index, self.cores = tuple(kinds), rank, index, cores
        self.starts = np.append(starts, cores.size)
        self._records: Optional[tuple[Hazard, ...]] = None

    @classmethod
    def of(cls, records: Sequence[Hazard]) -> Hazards:
        """``records`` as columns, in their order."""
        if isinstance(records, Hazards):
            return records
        kinds = sorted({h.kind for h in records})
        lengths = np.array([len(h.cores) for h in records], dtype=np.int64)
        return cls(kinds, np.array([kinds.index(h.kind) for h in records], dtype=np.int64),
                   np.array([h.index for h in records], dtype=np.int64),
                   np.array([c for h in records for c in h.cores], dtype=np.int64),
                   np.cumsum(lengths) - lengths)

    def __len__(self) -> int:
        return int(self.index.size)

    def __getitem__(self, i):  # type: ignore[override]
        return self.records()[i]

    def __iter__(self) -> Iterator[Hazard]:
        return iter(self.records())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Hazards):
            return self.kinds_of() == other.kinds_of() and all(
                np.array_equal(a, b) for a, b in ((self.index, other.index), (self.cores, other.cores),
                                                  (self.starts, other.starts)))
        return isinstance(other, (tuple, list)) and self.records() == tuple(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Hazards({list(self.records())!r})"

    def kinds_of(self) -> list[str]:
        """Each record's kind."""
        return np.array(self.kinds, dtype=object)[self.rank].tolist()

    def of_kind(self, kind: HazardKind) -> np.ndarray:
        """The records of ``kind`` (a boolean mask over the records)."""
        return self.rank == self.kinds.index(kind) if kind in self.kinds else np.zeros(len(self), dtype=bool)

    def records(self) -> tuple[Hazard, ...]:
        """The records one by one (built once)."""
        if self._records is None:
            cores, bounds = self.cores.tolist(), self.starts.tolist()
            if len(cores) == len(self):  # one core per record: shared tuples
                alone = {c: (c,) for c in set(cores)}
                who = [alone[c] for c in cores]
            else:
                who = [tuple(cores[a:b]) for a, b in zip(bounds, bounds[1:])]
            self._records = tuple(map(Hazard, self.kinds_of(), self.index.tolist(), who))
        return self._records


@dataclass(frozen=True)
class BackendResult:
    """What one backend returned for one call.

    ``value`` is None only when the backend refused the input, in which case
    ``rejected`` holds its one-line reason; ``malformed`` when it did return, but not an
    array of the dtype and shape asked for (``rejected`` then says what it returned).
    """

    value: Optional[np.ndarray]
    tile_plan: Optional[TilePlan] = None
    hazards: Sequence[Hazard] = field(default_factory=tuple)  # the emulator's: :class:`Hazards`
    rejected: Optional[str] = None
    notes: tuple[str, ...] = ()  # what the row's reader should know (e.g. the chip is outside aclnn)
    dweight: Optional[np.ndarray] = None  # a PReLU backward's weight gradient, shaped as the weight
    malformed: bool = False


# ----------------------------------------------------------------------------- a row's identity

def pair_text(dtype: str, out_dtype: str) -> str:
    """A row's dtypes as its spelling shows them: ``fp16``, or ``fp32->fp16`` when they differ."""
    return short_name(dtype) + ("" if out_dtype == dtype else f"->{short_name(out_dtype)}")


def backend_label(backend: str, profile: Optional[str], variant: Optional[str]) -> str:
    extra = "/".join(p for p in (profile, variant) if p)
    return backend + (f"[{extra}]" if extra else "")


def label_parts(label: str) -> tuple[str, Optional[str], Optional[str]]:
    """:func:`backend_label` read back: ``cann[ascend910b3/reference]`` as (cann, ascend910b3,
    reference), ``tflite[xnnpack]`` as (tflite, xnnpack, None), ``torch`` as (torch, None, None)."""
    base, bracket, rest = label.partition("[")
    if not bracket or not rest.endswith("]") or not base:
        return label, None, None
    profile, _, variant = rest[:-1].partition("/")
    return base, profile or None, variant or None


#: The operator a row computes when its key names none (every row's spelling leaves it out).
DEFAULT_OP = "leaky_relu"


@dataclass(frozen=True)
class RowKey:
    """What names a row of the suite, run or skipped: (backend, profile, variant, dtype,
    out_dtype, direction, alpha), and ``op`` (keyword-only: ``leaky_relu``, ``prelu``, ``rrelu``;
    ``conformance.ops``), which the key, the spelling and the JSON row show only when it is not
    the default.  A PReLU row's ``alpha`` is the slope its weight starts from."""

    backend: str
    profile: Optional[str]
    variant: Optional[str]
    dtype: str
    out_dtype: str
    direction: str
    alpha: float
    op: str = field(default=DEFAULT_OP, kw_only=True)

    @property
    def key(self) -> tuple:
        return (self.backend, self.profile, self.variant, self.dtype, self.out_dtype,
                self.direction, self.alpha, *(() if self.op == DEFAULT_OP else (self.op,)))

    @property
    def label(self) -> str:
        """``cann[ascend910b1/reference]``: the backend with its profile and variant."""
        return backend_label(self.backend, self.profile, self.variant)

    def __str__(self) -> str:
        """The row's one spelling, which the console, JUnit, pytest ids and reproducers print:
        ``cann[ascend910b1/reference] fp16 forward alpha=0.2``, with ``fp32->fp16`` when the
        output dtype differs from the input's."""
        op = "" if self.op == DEFAULT_OP else f" {self.op}"
        return f"{self.label}{op} {pair_text(self.dtype, self.out_dtype)} {self.direction} alpha={self.alpha!r}"


@dataclass(frozen=True)
class Skip(RowKey):
    """A row the run planned but did not run, and why (the backend does not support it)."""

    reason: str


# ----------------------------------------------------------------------------- what a comparison measured

Shape = tuple[int, ...]
Where = Optional[tuple[str, int]]  # (part label, flat index) of an extreme value


@dataclass(frozen=True)
class Tolerance:
    """Closeness thresholds for one comparison."""

    rtol: float
    atol: float
    max_ulp: int = 1
    strict_zeros: bool = False


@dataclass(frozen=True)
class Metrics:
    """Error statistics of one comparison (or of several, merged)."""

    elements: int
    mismatches: int
    violations: int
    max_abs: float
    max_abs_at: Where
    max_rel: float
    max_rel_at: Where
    max_ulp: int
    max_ulp_at: Where
    nan_positions: int  # NaN on exactly one side
    inf_positions: int  # inf on one side, finite on the other (no NaN)
    zero_signs: int  # both zero, sign differs
    within_1e3: int
    within_5e3: int
    above: int
    below: int
    cos_dot: float = 0.0  # finite-pair sums, scaled by 2**-cos_exp
    cos_aa: float = 0.0
    cos_gg: float = 0.0
    cos_exp: int = 0

    @property
    def mismatch_ratio(self) -> float:
        return self.mismatches / self.elements if self.elements else 0.0

    @property
    def one_thousandth_ratio(self) -> Optional[float]:
        return self.within_1e3 / self.elements if self.elements else None

    @property
    def five_thousandths_ratio(self) -> Optional[float]:
        return self.within_5e3 / self.elements if self.elements else None

    @property
    def cosine(self) -> Optional[float]:
        """Cosine similarity of the finite pairs (None when either side is all zero)."""
        if self.cos_aa <= 0.0 or self.cos_gg <= 0.0:
            return None
        return self.cos_dot / math.sqrt(self.cos_aa * self.cos_gg)

    @property
    def error_balance(self) -> Optional[float]:
        return (self.above - self.below) / self.elements if self.elements else None


# ----------------------------------------------------------------------------- what the HTML report draws

@dataclass(frozen=True)
class Grid:
    """Counts per category over a ``rows`` x ``cols`` grid; cell ``(r, c)`` covers
    ``bins[0]`` rows and ``bins[1]`` columns of the underlying axes."""

    kind: str  # "plan" (cores x tiles) or "shape" (the input's axes)
    part: str
    axes: tuple[str, str]
    size: tuple[int, int]  # the underlying axes' lengths
    bins: tuple[int, int]
    cells: dict[str, Counter] = field(default_factory=dict)  # category -> (r, c) -> count

    @property
    def errors(self) -> int:
        return sum(sum(c.values()) for c in self.cells.values())

    def as_dict(self) -> dict:
        return {"kind": self.kind, "part": self.part, "axes": list(self.axes), "size": list(self.size),
                "bins": list(self.bins),
                "cells": {cat: [[r, c, n] for (r, c), n in sorted(cnt.items())]
                          for cat, cnt in self.cells.items()}}


@dataclass(frozen=True)
class Sample:
    """One element the transfer picture draws: its category (``""``: an element sampled from
    the whole batch, differing or not), input, upstream gradient (None forward), golden and
    actual output, widened to Python floats."""

    category: str
    x: float
    dy: Optional[float]
    expected: float
    actual: float

    def __post_init__(self) -> None:
        for name in ("x", "dy", "expected", "actual"):  # one NaN object: samples of equal bits are equal
            value = getattr(self, name)
            if value is not None and value != value:
                object.__setattr__(self, name, math.nan)

    def as_list(self) -> list:
        """``[category, x, dy, expected, actual]``, the numbers as ``repr`` strings (strict JSON)."""
        return [self.category, *(None if v is None else repr(v) for v in (self.x, self.dy, self.expected,
                                                                           self.actual))]


@dataclass(frozen=True)
class Plots:
    """A row's plot data: per category, ULP bins and input classes; its grids; the sampled
    elements of its transfer picture."""

    ulp: dict[str, Counter] = field(default_factory=dict)  # category -> bin label -> count
    values: dict[str, Counter] = field(default_factory=dict)  # category -> class label -> count
    grids: tuple[Grid, ...] = ()
    transfer: tuple[Sample, ...] = ()

    def as_dict(self) -> dict:
        return {"ulp": {c: dict(sorted(b.items(), key=lambda kv: ulp_order(kv[0]))) for c, b in self.ulp.items()},
                "values": {c: dict(sorted(v.items(), key=lambda kv: class_order(kv[0])))
                           for c, v in self.values.items()},
                "grids": [g.as_dict() for g in self.grids],
                "transfer": [s.as_list() for s in self.transfer]}


# ----------------------------------------------------------------------------- labels and order

def ulp_order(label: str) -> float:
    """Bins in increasing distance, ``nan`` last."""
    return float("inf") if label == "nan" else float(label)


_CLASS_RANK = {"-inf": -3.0, "-subnormal": -1.0, "-0": -0.5, "+0": 0.5, "+subnormal": 1.0,
               "+inf": 3.0, "nan": 4.0}


def class_order(label: str) -> float:
    """``-inf < -2^e (large e first) < -subnormal < -0 < +0 < +subnormal < +2^e < +inf < nan``."""
    if label in _CLASS_RANK:
        return _CLASS_RANK[label]
    sign, exponent = (-1 if label[0] == "-" else 1), int(label.split("^")[1])
    return sign * (2.0 + (exponent + 2000) / 4000)  # within (1, 3): between subnormal and inf


# ----------------------------------------------------------------------------- the judged row

MAX_EXAMPLES = 5  # offenders a finding keeps, and a message shows


@dataclass(frozen=True)
class Offender:
    """One example element; values are numpy scalars of their dtype (None when unknown)."""

    index: int
    x: Any
    dy: Any
    expected: Any
    actual: Any
    core: Optional[int] = None
    tile: Optional[int] = None
    part: str = ""


@dataclass(frozen=True)
class Finding:
    """One category's share of a row's differences.  ``gated``: it fails its row (some element
    is outside tolerance in a category the policy does not allow, every finding under ``--strict``,
    a quantized one more than a code off: ``judge.gate.finding_gated``); the JSON report writes
    the opposite, ``allowed``."""

    category: str
    count: int
    gated: bool
    summary: str
    detail: dict
    examples: tuple[Offender, ...]
    reproducer: Optional[str] = None
    violations: int = 0  # elements of this finding outside tolerance


@dataclass(frozen=True)
class OtherCheck:
    """What another tool's default check would say about a row's output against the golden
    (``judge.other_checks``): ``torch.assert_close``, ``msprobe``, ``onnx-backend-test``,
    ``tf.test``, ``jax.test``, with their defaults.  ``tally`` holds the counts it was decided on,
    which merged batches add up."""

    name: str
    passes: bool
    detail: str
    tally: tuple[tuple[str, float], ...] = ()
    passes_if_shared_equal: bool = False  # its verdict when a NaN or inf both sides hold counts as equal


@dataclass(frozen=True)
class Row(RowKey):
    """The judged result for one (backend, dtype, out_dtype, direction, alpha)."""

    metrics: Metrics
    findings: tuple[Finding, ...]
    verdict: str
    parts: tuple[str, ...] = ()
    shapes: tuple[Shape, ...] = ()  # the shape of each part's input array, aligned with parts
    notes: tuple[str, ...] = ()  # what the reader of the row should know, e.g. a default slope was used
    plots: Optional[Plots] = None  # bounded counts the HTML report draws (None: no differences)
    other_checks: tuple[OtherCheck, ...] = ()  # what other tools' checks would say (none: not applicable)

    def shape_of(self, part: str) -> Optional[Shape]:
        """The input shape of the batch labelled ``part`` (None when unknown)."""
        return dict(zip(self.parts, self.shapes)).get(part) if len(self.shapes) == len(self.parts) else None


@dataclass(frozen=True)
class Chunk:
    """A flat piece of one tensor, in native byte order: inputs and the device's output."""

    offset: int  # flat index of the first element in the whole tensor
    x: np.ndarray
    dy: Optional[np.ndarray]
    actual: np.ndarray


#: msprobe's value of a compare column: a number, or its word for none ("unsupported", "N/A", "Nan").
MsprobeValue = float | str


@dataclass(frozen=True)
class MsprobeColumns:
    """msprobe's compare columns of one device output against its benchmark output, computed
    as msprobe's two-dump compare computes them (``metrics.msprobe_columns``); field order is
    msprobe's column order."""

    cosine: MsprobeValue
    euc_dist: MsprobeValue
    max_abs_err: MsprobeValue
    max_relative_err: MsprobeValue
    one_thousandth_err_ratio: MsprobeValue
    five_thousandths_err_ratio: MsprobeValue

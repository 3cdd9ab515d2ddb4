"""Your own kernel as a backend: wrap a plain function, no subclassing.

- :func:`from_numpy` wraps ``fn(x: np.ndarray, alpha: float) -> np.ndarray`` and an
  optional ``backward(dy, x, alpha) -> np.ndarray``;
- :func:`from_torch` wraps a torch function (tensors in and out); its backward is
  autograd's (``fn(x).backward(dy)``), unless it has none.

Dtype pairs: ``dtypes`` names the pairs the kernel runs (``"float16"``, or
``"fp32:fp16"`` and ``"float32->float16"`` for a pair).  Without it, the kernel runs
the four same-dtype pairs.  A kernel is never skipped on a pair it is asked for: a
call that raises, or returns the wrong dtype or shape, becomes that row's
``rejected-input`` finding ("my_kernel returned float64[4]; expected float16[4]"),
which fails the row.

The same adapter serves ``conformance run --backend package.module:NAME`` (NAME a
factory returning ``from_numpy(...)``, or a plain ``fn(x, alpha)`` wrapped by
:func:`from_function`), :func:`conformance.check` and the pytest fixture
``leakyrelu_conformance``.

The kernel's Python warnings (numpy's "overflow encountered in multiply" on the
suite's inf, NaN and largest finite inputs) never reach stderr: :attr:`KernelBackend.warned`
counts them per row (dtype, output dtype, direction, alpha), and each row's notes carry the
count and the first message (:data:`WARNINGS_NOTE`).
"""
from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, Optional

import numpy as np

from conformance.backends import BackendBase
from conformance.dtypes import DTYPES, info
from conformance.errors import UsageError
from conformance.records import BackendResult, Direction, Pair

Kind = Literal["numpy", "torch"]
Forward = Callable[[Any, float], Any]
Backward = Callable[[Any, Any, float], Any]


#: How a dtype pair is written: ``fp32:fp16`` is safe in every shell; ``"fp32->fp16"`` needs quotes
#: (unquoted, the shell reads ``>`` as a redirection and the harness sees ``fp32-``).
PAIR_EXAMPLE = "fp32:fp16"


def parse_pair(text: str, *, what: str = "dtype") -> Pair:
    """``fp16``, ``fp32:fp16`` or ``float32->float16`` as a pair of table names; a UsageError
    naming the fix otherwise (``what`` names the value in it, e.g. ``--dtype``)."""
    spelled = str(text).strip()
    if spelled.endswith("-"):
        raise UsageError(f"{what} {spelled!r}: the shell took '>' of an unquoted pair as a redirection "
                         f"(and may have written a file named after the output dtype); write the pair "
                         f"as {PAIR_EXAMPLE}")
    try:
        names = [info(part.strip()).name for part in spelled.replace("->", ":").split(":")]
    except ValueError:
        raise UsageError(f"{what} {spelled!r} is unknown; use fp16, bf16, fp32, fp64 (or float16, ...) "
                         f"or a pair such as {PAIR_EXAMPLE}") from None
    if len(names) > 2:
        raise UsageError(f"{what} {spelled!r}: a pair has two dtypes, such as {PAIR_EXAMPLE}")
    return names[0], names[-1]


def parse_pairs(dtypes: Iterable[str]) -> tuple[Pair, ...]:
    """``["fp16", "fp32:fp16", "float32->float16"]`` as table-name pairs, de-duplicated."""
    return tuple(dict.fromkeys(parse_pair(text) for text in dtypes))


@dataclass(frozen=True)
class WarningTally:
    """The Python warnings a kernel raised on one row: how many, and the first one's text."""

    count: int
    first: str


RowKey = tuple[str, str, Direction, float]  # dtype, out_dtype, direction, alpha
#: How a row's note about the kernel's warnings starts (the console sums these up per kernel).
WARNINGS_NOTE = "Python warnings raised by the kernel: "


class KernelBackend(BackendBase):
    """A kernel function as a backend; build one with :func:`from_numpy` or :func:`from_torch`."""

    def __init__(self, fn: Forward, *, backward: Optional[Backward] = None, kind: Kind = "numpy",
                 dtypes: Optional[Iterable[str]] = None, name: Optional[str] = None):
        if not callable(fn) or (backward is not None and not callable(backward)):
            raise UsageError("pass a kernel function fn(x, alpha) (and a callable backward, if any)")
        self.fn, self.bwd, self.kind = fn, backward, kind
        self.name = name or getattr(fn, "__name__", "kernel")
        self.declared = parse_pairs(dtypes) if dtypes is not None else None
        #: Warnings the kernel raised, per row (the rows' notes say how many, and the first).
        self.warned: dict[RowKey, WarningTally] = {}

    def __repr__(self) -> str:
        return f"<{self.kind} kernel {self.name}>"

    # ------------------------------------------------------------------ facts

    def suite_pairs(self) -> tuple[Pair, ...]:
        return self.declared if self.declared is not None else tuple((d, d) for d in DTYPES)

    def supports(self, dtype: str, out_dtype: str, direction: Direction) -> bool:
        return self.skip_reason(dtype, out_dtype, direction) == ""

    def skip_reason(self, dtype: str, out_dtype: str, direction: Direction) -> str:
        """Why this kernel does not run a pair ("" when it does)."""
        if direction == "backward" and not self.has_backward:
            return f"{self.name} has no backward (pass backward=...)"
        if self.declared is not None:
            return "" if (dtype, out_dtype) in self.declared else \
                f"{self.name} declares {', '.join(f'{a}->{b}' for a, b in self.declared)} only"
        if dtype != out_dtype:
            return f"{self.name} runs same-dtype pairs only (declare dtypes=[...] for mixed pairs)"
        return ""

    @property
    def has_backward(self) -> bool:
        return self.bwd is not None or self.kind == "torch"

    # ------------------------------------------------------------------ calls

    def forward(self, x: np.ndarray, alpha: float, *, out_dtype: Optional[str] = None) -> BackendResult:
        return self._call("forward", x, alpha, dy=None, out_dtype=out_dtype or info(x.dtype).name)

    def backward(self, dy: np.ndarray, x: np.ndarray, alpha: float, *,
                 out_dtype: Optional[str] = None) -> BackendResult:
        return self._call("backward", x, alpha, dy=dy, out_dtype=out_dtype or info(x.dtype).name)

    def _call(self, direction: Direction, x: np.ndarray, alpha: float, *, dy: Optional[np.ndarray],
              out_dtype: str, tally: bool = True) -> BackendResult:
        """One call, with anything the kernel raises or returns amiss turned into a refusal, and
        its warnings counted instead of printed."""
        compute = _numpy_call if self.kind == "numpy" else _torch_call
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                value = compute(self, direction, x, alpha, dy)
            except Exception as exc:  # the user's code: any failure is this row's finding
                return BackendResult(value=None, rejected=f"{self.name} raised {type(exc).__name__}: {exc}")
            finally:
                if tally:
                    self._count((info(x.dtype).name, out_dtype, direction, alpha), caught)
        return _checked(value, name=self.name, like=x, out_dtype=out_dtype)

    def _count(self, key: RowKey, caught: list[warnings.WarningMessage]) -> None:
        """Add ``caught`` to row ``key``'s tally."""
        if not caught:
            return
        before = self.warned.get(key)
        self.warned[key] = WarningTally((before.count if before else 0) + len(caught),
                                        before.first if before else _warning_text(caught[0]))

    def row_notes(self, dtype: str, out_dtype: str, direction: Direction, alpha: float) -> tuple[str, ...]:
        tally = self.warned.get((dtype, out_dtype, direction, alpha))
        return () if tally is None else (f"{WARNINGS_NOTE}{tally.count:,} (the first: {tally.first})",)


def _warning_text(caught: warnings.WarningMessage) -> str:
    return f"{caught.category.__name__}: {str(caught.message)[:200]}"


def _numpy_call(k: KernelBackend, direction: Direction, x: np.ndarray, alpha: float,
                dy: Optional[np.ndarray]) -> Any:
    if direction == "forward":
        return k.fn(x.copy(), alpha)
    if k.bwd is None:
        raise NotImplementedError("no backward given")
    return k.bwd(np.asarray(dy).copy(), x.copy(), alpha)


def _torch_call(k: KernelBackend, direction: Direction, x: np.ndarray, alpha: float,
                dy: Optional[np.ndarray]) -> Any:
    from conformance.frameworks.torch_backend import numpy_from_tensor, tensor_from_numpy

    if direction == "forward":
        return numpy_from_tensor(k.fn(tensor_from_numpy(x), alpha))
    if k.bwd is not None:
        return numpy_from_tensor(k.bwd(tensor_from_numpy(np.asarray(dy)), tensor_from_numpy(x), alpha))
    xt = tensor_from_numpy(x).requires_grad_(True)
    k.fn(xt, alpha).backward(tensor_from_numpy(np.asarray(dy)))
    if xt.grad is None:
        raise RuntimeError("autograd gave no gradient for x")
    return numpy_from_tensor(xt.grad)


def _checked(value: Any, *, name: str, like: np.ndarray, out_dtype: str) -> BackendResult:
    """The kernel's output as a result, or a refusal saying what was wrong with it."""
    if not isinstance(value, np.ndarray):
        return BackendResult(value=None, rejected=f"{name} returned a {type(value).__name__}, not an array")
    if value.dtype.name != out_dtype or value.shape != like.shape:
        return BackendResult(value=None, rejected=f"{name} returned {value.dtype.name}{list(value.shape)}; "
                                                  f"expected {out_dtype}{list(like.shape)}")
    return BackendResult(value)


def from_numpy(fn: Forward, *, backward: Optional[Backward] = None, dtypes: Optional[Iterable[str]] = None,
               name: Optional[str] = None) -> KernelBackend:
    """A numpy kernel ``fn(x, alpha) -> y`` (and ``backward(dy, x, alpha) -> dx``) as a backend."""
    return KernelBackend(fn, backward=backward, kind="numpy", dtypes=dtypes, name=name)


def _companion_backward(fn: Forward) -> Optional[Backward]:
    """``<fn>_backward`` beside ``fn`` in its module, when there is one."""
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    found = getattr(module, f"{getattr(fn, '__name__', '')}_backward", None)
    return found if callable(found) else None


def from_function(fn: Forward) -> KernelBackend:
    """A plain numpy ``fn(x, alpha)`` named on the command line (``--backend mod:fn``), with its
    companion ``fn_backward(dy, x, alpha)`` from the same module when there is one; its dtype pairs
    are probed."""
    return from_numpy(fn, backward=_companion_backward(fn))


def from_torch(fn: Forward, *, backward: Optional[Backward] = None, dtypes: Optional[Iterable[str]] = None,
               name: Optional[str] = None) -> KernelBackend:
    """A torch kernel ``fn(x, alpha) -> y`` on tensors as a backend; backward by autograd unless given."""
    return KernelBackend(fn, backward=backward, kind="torch", dtypes=dtypes, name=name)

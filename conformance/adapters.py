"""Your own kernel as a backend: wrap a plain function, no subclassing.

- :func:`from_numpy` wraps ``fn(x: np.ndarray, alpha: float) -> np.ndarray`` and an
  optional ``backward(dy, x, alpha) -> np.ndarray``;
- :func:`from_torch` wraps a torch function (tensors in and out); its backward is
  autograd's (``fn(x).backward(dy)``), unless it has none;
- :func:`from_function` wraps a plain function that takes numpy arrays, torch tensors, JAX
  arrays or TensorFlow tensors (what it takes is found as :func:`taken_framework` says) and
  returns any of them; its backward is that framework's autodiff (torch autograd,
  ``jax.vjp``, ``tf.GradientTape``), or ``fn_backward`` beside it, or none for numpy.

Arrays go to the kernel as its framework's own (bfloat16 as ``torch.bfloat16``, never an
``ml_dtypes`` array handed to ``torch.from_numpy``) and come back bit for bit
(:mod:`conformance.frameworks.arrays`).

Dtype pairs: ``dtypes`` names the pairs the kernel runs (``"float16"``, or
``"fp32:fp16"`` and ``"float32->float16"`` for a pair).  Without it, the kernel runs
the four same-dtype pairs.  A kernel is never skipped on a pair it is asked for: a
call that raises, or returns the wrong dtype or shape, becomes that row's
``rejected-input`` finding ("my_kernel returned float64 for fp16 input"), which fails
the row.  One exception: a plain function found to take numpy arrays that raises on a
bfloat16 one (numpy has no bfloat16 of its own; ``torch.from_numpy`` refuses ml_dtypes')
skips its bfloat16 rows, saying so and how to run them.

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

import inspect
import sys
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, Optional

import numpy as np

from conformance.backends import BackendBase
from conformance.dtypes import DTYPES, info, short_name
from conformance.errors import UsageError, one_line
from conformance.frameworks.arrays import FRAMEWORKS, Framework, framework_of, installed, to_framework, to_numpy
from conformance.records import BackendResult, Direction, Pair

Kind = Literal["auto", "numpy", "torch", "jax", "tensorflow"]
KINDS: tuple[str, ...] = ("auto", *FRAMEWORKS)
#: The Python API's way to give a numpy kernel its backward (the command line's is ``fn_backward``).
BACKWARD_HINT = "pass backward=..."
#: ... and to declare mixed dtype pairs.
PAIRS_HINT = "declare dtypes=[...] for mixed pairs"
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
        if kind not in KINDS:
            raise UsageError(f"kind={kind!r}: pass one of {', '.join(map(repr, KINDS))}")
        self.fn, self.bwd, self.kind = fn, backward, kind
        #: How a user adds a backward, in the words of the door the kernel came through.
        self.backward_hint, self.pairs_hint = BACKWARD_HINT, PAIRS_HINT
        self._taken: Optional[Framework] = None  # what an ``auto`` kernel takes, once found
        self._bf16_refusal: Optional[str] = None  # why an ``auto`` numpy kernel refuses bfloat16
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
            return f"{self.name} has no backward ({self.backward_hint})"
        if dtype == "bfloat16" and self.kind == "auto" and self.declared is None and self.framework == "numpy":
            refusal = self._numpy_bfloat16_refusal()
            if refusal:
                return refusal
        if self.declared is not None:
            return "" if (dtype, out_dtype) in self.declared else \
                f"{self.name} declares {', '.join(f'{a}->{b}' for a, b in self.declared)} only"
        if dtype != out_dtype:
            return f"{self.name} runs same-dtype pairs only ({self.pairs_hint})"
        return ""

    @property
    def has_backward(self) -> bool:
        """A backward given, or the autodiff of the framework the kernel takes."""
        return self.bwd is not None or self.framework != "numpy"

    @property
    def framework(self) -> Framework:
        """What the kernel takes: its ``kind``, or for ``auto`` what :func:`taken_framework` finds."""
        if self.kind != "auto":
            return self.kind  # type: ignore[return-value]
        if self._taken is None:
            self._taken = taken_framework(self.fn)
        return self._taken

    def _numpy_bfloat16_refusal(self) -> str:
        """Why this numpy kernel, which runs a float32 array, cannot take a bfloat16 one ("" when
        it can, or when it raises on float32 too: its rows then fail with what it raised)."""
        if self._bf16_refusal is None:  # refused: it runs a float32 array, not a bfloat16 one
            exc = None if _probe(self.fn, "numpy") is not None else _probe(self.fn, "numpy",
                                                                            dtype=info("bfloat16").dtype)
            self._bf16_refusal = "" if exc is None else (
                f"{self.name} raised {one_line(exc).split('. ')[0][:120]} on a bfloat16 numpy array "
                "(numpy has no bfloat16 of its own; torch.from_numpy refuses ml_dtypes'); a function taking "
                "and returning torch tensors runs these rows")
        return self._bf16_refusal

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
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                value = _kernel_call(self, direction, x, alpha, dy)
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


def _kernel_call(k: KernelBackend, direction: Direction, x: np.ndarray, alpha: float,
                 dy: Optional[np.ndarray]) -> Any:
    """The kernel's output (or its backward's, or its framework's autodiff's) on fresh copies
    of the inputs in the framework it takes."""
    framework = k.framework
    if direction == "forward":
        return k.fn(to_framework(x, framework), alpha)
    if k.bwd is not None:
        return k.bwd(to_framework(np.asarray(dy), framework), to_framework(x, framework), alpha)
    from conformance.frameworks.autodiff import gradient

    return gradient(k.fn, framework, x, np.asarray(dy), alpha)


def _dtype_text(dtype: np.dtype) -> str:
    try:
        return short_name(info(dtype).name)
    except (ValueError, KeyError, TypeError):
        return str(dtype)


def _checked(value: Any, *, name: str, like: np.ndarray, out_dtype: str) -> BackendResult:
    """The kernel's output as numpy, or a malformed result saying what was wrong with it
    ("f returned float64 for fp32 input")."""
    found = to_numpy(value)
    if found is None:
        return BackendResult(value=None, rejected=f"{name} returned a {type(value).__name__}, not an array",
                             malformed=True)
    given, got = _dtype_text(like.dtype), found.dtype.name
    if _dtype_text(found.dtype) != short_name(out_dtype):
        wanted = "" if out_dtype == info(like.dtype).name else f" (expected {short_name(out_dtype)})"
        return BackendResult(value=None, rejected=f"{name} returned {got} for {given} input{wanted}",
                             malformed=True)
    if found.shape != like.shape:
        return BackendResult(value=None, rejected=f"{name} returned shape {list(found.shape)} for input of "
                                                  f"shape {list(like.shape)}", malformed=True)
    return BackendResult(found)


#: The array a plain function is tried with: float32 (every framework's), both signs, a zero.
_PROBE = (-2.0, -0.5, 0.0, 1.5)


def _tried(fn: Forward, framework: Framework, *, dtype: Any = np.float32) -> Any:
    """What ``fn`` returns, or the exception it raises, on a small array of ``framework``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(to_framework(np.array(_PROBE, dtype=dtype), framework), 0.25)
        except Exception as exc:  # the user's code: a refusal tells what it does not take
            return exc


def _probe(fn: Forward, framework: Framework, *, dtype: Any = np.float32) -> Optional[Exception]:
    """What ``fn`` raises on a small array of ``framework`` (None when it returns an array)."""
    out = _tried(fn, framework, dtype=dtype)
    if isinstance(out, Exception):
        return out
    return None if to_numpy(out) is not None else TypeError(f"returned a {type(out).__name__}")


def annotated_framework(fn: Forward) -> Optional[Framework]:
    """The framework the annotation of ``fn``'s first parameter names (``torch.Tensor``,
    ``jax.Array``, ``tf.Tensor``, ``np.ndarray``), or None."""
    try:
        first = next(iter(inspect.signature(fn).parameters.values()))
    except (TypeError, ValueError, StopIteration):
        return None
    note = first.annotation
    text = note if isinstance(note, str) else f"{getattr(note, '__module__', '')}.{getattr(note, '__name__', '')}"
    for framework, marks in (("torch", ("torch",)), ("jax", ("jax", "jnp")), ("tensorflow", ("tf.", "tensorflow")),
                             ("numpy", ("np.", "numpy", "ndarray"))):
        if note is not inspect.Parameter.empty and any(m in text for m in marks):
            return framework  # type: ignore[return-value]
    return None


def taken_framework(fn: Forward) -> Framework:
    """What a plain function takes: what its first parameter's annotation names; else, when it
    returns a framework's array for a numpy one and takes that framework's arrays too (as
    ``jax.nn.leaky_relu`` does), that framework (whose autodiff then gives the backward); else
    the first of numpy, torch, JAX and TensorFlow (those installed) on whose float32 array it
    returns an array of any of them; else numpy (its rows then show what it raised)."""
    named = annotated_framework(fn)
    if named is not None:
        return named
    returned = framework_of(_tried(fn, "numpy"))
    if returned not in (None, "numpy") and _probe(fn, returned) is None:
        return returned  # type: ignore[return-value]
    for framework in FRAMEWORKS:
        if (framework == "numpy" or installed(framework)) and _probe(fn, framework) is None:
            return framework
    return "numpy"


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
    """A plain ``fn(x, alpha)`` named on the command line (``--backend mod:fn``), taking numpy
    arrays or a framework's tensors (:func:`taken_framework`), with its companion
    ``fn_backward(dy, x, alpha)`` from the same module when there is one."""
    kernel = KernelBackend(fn, backward=_companion_backward(fn), kind="auto")
    kernel.backward_hint = f"define {kernel.name}_backward(dy, x, alpha) beside it in its module"
    kernel.pairs_hint = "for mixed pairs, pass --backend a factory returning from_numpy(fn, dtypes=[...])"
    return kernel


def from_torch(fn: Forward, *, backward: Optional[Backward] = None, dtypes: Optional[Iterable[str]] = None,
               name: Optional[str] = None) -> KernelBackend:
    """A torch kernel ``fn(x, alpha) -> y`` on tensors as a backend; backward by autograd unless given."""
    return KernelBackend(fn, backward=backward, kind="torch", dtypes=dtypes, name=name)

"""The golden on 16M elements as ratios to the faster of a memory copy and torch, in one run.

For each direction and dtype, in alternation so all see the same machine load: the golden
(its compiled loops when numba is installed, which allocate their output, as torch does),
a one-thread copy of the same bytes into a buffer already there (``np.copyto``: N elements
forward; 1.5N backward, which reads dy and x and writes dx), torch's own ``leaky_relu`` (or
``leaky_relu_backward``) when torch is installed, and the golden's numpy path
(``CONFORMANCE_COMPILED=0``), the reference implementation.  Each figure is the time divided by
the faster of the copy and torch.  Target: the golden at most 1.5x at every row.
Then the golden's peak traced memory, and the calls triage makes: variants of the golden on a
few thousand elements, the compiled loop against the numpy path, per call.
Run: ``make bench`` or ``.venv/bin/python -m benchmarks.bench_golden``.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable
from typing import Optional

import numpy as np

from benchmarks.timing import alternated, peak_bytes
from conformance import jit
from conformance.dtypes import info
from conformance.records import Direction
from conformance.reference import golden
from conformance.reference.semantics import Semantics

N = 16 * 1024 * 1024
ALPHA = 0.2
SMALL = 3000  # a triage batch of mismatches
#: The rows: (direction, dtype).
ROWS: tuple[tuple[Direction, str], ...] = (("forward", "float32"), ("forward", "float16"), ("forward", "bfloat16"),
                                          ("backward", "float32"), ("backward", "float16"), ("backward", "bfloat16"))
#: Variants triage scores often, by direction (each covered by the compiled loop).
TRIAGE_VARIANTS = (("forward", Semantics(opmath="float32")), ("forward", Semantics(formulation="merge")),
                   ("forward", Semantics(formulation="max_or_min", nan_operand="x", saturate=True)),
                   ("backward", Semantics(nan_grad="dy*0", opmath="float32")),
                   ("backward", Semantics(grad_form="sum", nan_grad="nan", daz=True, ftz=True)),
                   ("forward", Semantics(opmath="float32", input_dtype="float16", result_dtype="float16")),
                   ("backward", Semantics(opmath="float32", input_dtype="bfloat16", result_dtype="bfloat16")),
                   ("forward", Semantics(formulation="twice")), ("forward", Semantics(formulation="maxmin")),
                   ("forward", Semantics(formulation="mask-multiply")), ("backward", Semantics(grad_rule="step")),
                   ("backward", Semantics(grad_rule="result")))


def main() -> None:
    bits = np.random.default_rng(0).integers(0, 1 << 32, N, dtype=np.uint64).astype(np.uint32)
    path = "compiled" if jit.enabled() else "numpy (numba missing or CONFORMANCE_COMPILED=0)"
    print(f"golden path: {path}; {jit.threads()} threads; load average {os.getloadavg()[0]:.1f}")
    torch = importlib.import_module("torch") if importlib.util.find_spec("torch") else None
    for direction, name in ROWS:
        _row(direction, _operand(bits, name), _operand(bits[::-1], name), torch)
    x = bits.view(np.float32)
    peak = peak_bytes(lambda: golden.forward(x, ALPHA))
    print(f"peak traced memory {peak / x.nbytes:4.2f}x the input size (output included; target < 4x)")
    _triage_calls(bits[:SMALL].view(np.float32).astype(np.float16))


def _operand(bits: np.ndarray, name: str) -> np.ndarray:
    """The random bit patterns as ``name`` (16-bit: their low halves), contiguous."""
    rec = info(name)
    return np.ascontiguousarray(bits.astype(rec.uint)).view(rec.dtype)


def _copy_of(x: np.ndarray, direction: Direction) -> Callable[[], object]:
    """A one-thread copy of the bytes the golden moves, into a buffer already there."""
    src = np.resize(x, x.size * 3 // 2) if direction == "backward" else x.copy()
    sink = np.empty_like(src)
    return lambda: np.copyto(sink, src)


def _torch_call(x: np.ndarray, dy: np.ndarray, direction: Direction, torch) -> Optional[Callable[[], object]]:
    """torch's own forward or backward on the same data (None without torch)."""
    if torch is None:
        return None
    from conformance.frameworks.torch_backend import tensor_from_numpy

    t, g = tensor_from_numpy(x), tensor_from_numpy(dy)
    if direction == "forward":
        return lambda: torch.nn.functional.leaky_relu(t, ALPHA)
    return lambda: torch.ops.aten.leaky_relu_backward(g, t, ALPHA, False)


def _row(direction: Direction, x: np.ndarray, dy: np.ndarray, torch) -> None:
    """One row: the golden, the copy, torch and the numpy path in alternation, as ratios."""
    golden.compute(direction, x, ALPHA, dy=dy)  # loaded (bench_compile times that), a 16-bit table built
    calls = [lambda: golden.compute(direction, x, ALPHA, dy=dy), _copy_of(x, direction),
             lambda: golden.reference_compute(direction, x, ALPHA, dy=dy)]
    theirs = _torch_call(x, dy, direction, torch)
    times = alternated(*calls, *([theirs] if theirs is not None else []))
    ours, copy, numpy_path = times[:3]
    best = min(times[1:2] + times[3:])
    shown = f"torch {times[3] * 1e3:6.1f} ms   " if theirs is not None else ""
    print(f"{direction:8} {x.dtype.name:8} golden {ours * 1e3:6.1f} ms   copy {copy * 1e3:6.1f} ms   {shown}"
          f"ratio {ours / best:4.2f}x the faster (target <= 1.5x)   numpy path {numpy_path / best:5.1f}x", flush=True)


def _triage_calls(x: np.ndarray) -> None:
    """Per-call time of the variants triage scores, compiled and numpy path, side by side."""
    dy = x[::-1].copy()
    for direction, s in TRIAGE_VARIANTS:
        def call(fn, d=direction, s=s):
            return lambda: [fn(d, x, 0.2, dy=dy, semantics=s) for _ in range(100)]

        fast, ref = alternated(call(golden.compute), call(golden.reference_compute))
        print(f"{direction} {s} on {x.size} float16: golden {fast * 1e4:6.0f} us a call, "
              f"numpy path {ref * 1e4:6.0f} us ({ref / fast:4.1f}x)", flush=True)


if __name__ == "__main__":
    main()

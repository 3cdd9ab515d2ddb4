"""Golden throughput on 16M float32 elements, as ratios to the naive ``np.where`` in the same run.

Each slope times, in alternation, the naive ``np.where(x > 0, x, x*a)``, the golden
(its compiled loop when numba is installed) and the golden's numpy path
(``CONFORMANCE_COMPILED=0``), so the three see the same machine load.
Targets: golden <= 1.5x naive at every slope; peak extra memory < 4x the input size.
Then the calls triage makes: variants of the golden on a few thousand elements, the compiled
loop against the numpy path, per call.
Run: ``make bench`` or ``.venv/bin/python -m benchmarks.bench_golden``.
"""
from __future__ import annotations

import numpy as np

from benchmarks.timing import alternated, peak_bytes
from conformance import jit
from conformance.reference import golden
from conformance.reference.semantics import Semantics

N = 16 * 1024 * 1024
SMALL = 3000  # a triage batch of mismatches
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


def _naive(x: np.ndarray, alpha: float) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.where(x > 0, x, x * np.float32(alpha))


def main() -> None:
    bits = np.random.default_rng(0).integers(0, 1 << 32, N, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    golden.forward(x[:16], 0.2)  # the compiled loop loaded (bench_compile times that)
    path = "compiled" if jit.enabled() else "numpy (numba missing or CONFORMANCE_COMPILED=0)"
    print(f"golden path: {path}")
    for alpha in (0.2, 0.01, 1.0):
        naive, fast, ref = alternated(lambda a=alpha: _naive(x, a), lambda a=alpha: golden.forward(x, a),
                                      lambda a=alpha: golden.reference_compute("forward", x, a))
        print(f"alpha={alpha:<5} naive np.where {naive * 1e3:6.1f} ms   golden {fast * 1e3:6.1f} ms "
              f"ratio {fast / naive:4.2f}x (target <= 1.5x)   numpy path {ref * 1e3:6.1f} ms "
              f"ratio {ref / naive:4.2f}x", flush=True)
    peak = peak_bytes(lambda: golden.forward(x, 0.2))
    print(f"peak traced memory {peak / x.nbytes:4.2f}x the input size (output included; target < 4x)")
    _sixteen_bits(bits)
    _triage_calls(bits[:SMALL].view(np.float32).astype(np.float16))


def _sixteen_bits(bits: np.ndarray) -> None:
    """The 16-bit forward (read from the golden of every pattern) against a one-thread memory
    copy of the same bytes into a buffer already there and torch's own ``leaky_relu`` when
    installed, side by side; the golden, like torch, allocates its output."""
    import importlib.util

    from conformance.dtypes import info

    torch = importlib.import_module("torch") if importlib.util.find_spec("torch") else None
    for name in ("float16", "bfloat16"):
        x = bits.astype(np.uint16).view(info(name).dtype)
        sink = np.empty_like(x)
        golden.forward(x, 0.2)  # the table built once, as every later call of the run finds it
        calls = [lambda x=x: golden.forward(x, 0.2), lambda x=x, sink=sink: np.copyto(sink, x)]
        if torch is not None:
            from conformance.frameworks.torch_backend import tensor_from_numpy

            tensor = tensor_from_numpy(x)
            calls.append(lambda t=tensor: torch.nn.functional.leaky_relu(t, 0.2))
        times = alternated(*calls)
        best = min(times[1:])
        shown = f"torch {times[2] * 1e3:6.1f} ms   " if torch is not None else ""
        print(f"forward {name}: golden {times[0] * 1e3:6.1f} ms   copy {times[1] * 1e3:6.1f} ms   {shown}"
              f"ratio {times[0] / best:4.2f}x the faster (target <= 1.5x)", flush=True)


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

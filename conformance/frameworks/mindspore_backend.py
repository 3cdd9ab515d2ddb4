"""``mindspore``: ``mindspore.ops.leaky_relu`` on CPU, forward, and backward by MindSpore's autodiff;
``mindspore.ops.prelu`` the same way (the weight's gradient too).

Opt-in (``--backend mindspore``), in a worker running in ``.venv-mindspore``
(created by ``make conformance-all``; MindSpore 2.10 needs numpy 1.26).  Its CPU
kernels run float16 and float32 (bfloat16 Maximum is not supported, float64 is
refused); the other pairs are skipped with that reason.  Backward is
``mindspore.vjp`` with the cotangent dy; it gives the same bits as
``mindspore.grad`` of ``sum(leaky_relu(x) * dy)`` (checked on all 65,536 fp16
patterns and 200,000 random fp32 ones, alpha 0.2).

The worker's thread runs with FZ/DAZ set, as MindSpore's own threads do
(:func:`flushing`), so every float32 op flushes subnormals on every call;
unpinned, the same call flushes or not depending on which thread runs it.
"""
from __future__ import annotations

import ctypes
import platform
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Optional

import numpy as np

from conformance.errors import BackendUnavailable
from conformance.extras import require
from conformance.frameworks.environments import Environment, OwnEnvironmentBackend
from conformance.records import BackendResult, Direction

ENVIRONMENT = Environment("mindspore", ".venv-mindspore")


class MindSporeBackend(OwnEnvironmentBackend):
    """``ops.leaky_relu(x, alpha)`` in PyNative mode on the CPU device."""

    name = "mindspore"
    environment = ENVIRONMENT
    packages = ("mindspore",)
    allowed = frozenset({"alpha-precision", "formulation", "subnormal-flush"})
    dtypes = ("float16", "float32")

    def __init__(self) -> None:
        self.ms = _mindspore_on_cpu()

    def skip_reason(self, dtype: str, out_dtype: str, direction: Direction) -> str:
        if dtype != out_dtype:
            return "mindspore's leaky_relu returns the input's dtype"
        return "mindspore's CPU kernels run leaky_relu on float16/float32 only (no bfloat16 Maximum)"

    def _fn(self, alpha: float):
        return lambda t: self.ms.ops.leaky_relu(t, alpha)

    def forward(self, x: np.ndarray, alpha: float, *, out_dtype: Optional[str] = None) -> BackendResult:
        with flushing():
            y = np.asarray(self._fn(alpha)(self.ms.Tensor(x)).asnumpy())
        return BackendResult(y)

    def backward(self, dy: np.ndarray, x: np.ndarray, alpha: float, *,
                 out_dtype: Optional[str] = None) -> BackendResult:
        ms = self.ms
        with flushing():
            _, pullback = ms.vjp(self._fn(alpha), ms.Tensor(x))
            dx = pullback(ms.Tensor(dy))
            dx = np.asarray((dx[0] if isinstance(dx, tuple) else dx).asnumpy())
        return BackendResult(dx)

    ops = ("leaky_relu", "prelu")  # no RReLU: 2.10's ops.rrelu and nn.RReLU always sample their slopes
    #: The CPU kernels (``mindspore/ops/kernel/cpu/native/prelu_cpu_kernel.cc``, ``prelu_grad_cpu_kernel.cc``):
    #: y = ``x < 0 ? w*x : x`` (-0 stays -0), dx = ``x <= 0 ? w*dy : dy`` (dy at x = NaN), under FZ/DAZ.
    prelu_allowed = frozenset({"formulation", "nan-gradient", "subnormal-flush"})

    def prelu_supports(self, dtype: str, direction: Direction) -> bool:
        """float16 and float32: the CPU PReLU and PReLUGrad kernels' dtypes (bfloat16 is refused)."""
        return dtype in self.dtypes

    def prelu(self, direction: Direction, x: np.ndarray, weight: np.ndarray, *,
              dy: Optional[np.ndarray] = None) -> BackendResult:
        """``ops.prelu(x, w)`` with w of 1 or C elements (channel axis 1), under FZ/DAZ as every call here;
        dx and dweight from ``mindspore.vjp`` with the cotangent dy."""
        ms = self.ms
        w = np.asarray(weight)
        xt, wt = ms.Tensor(x), ms.Tensor(w.reshape(-1))
        with flushing():
            if direction == "forward":
                return BackendResult(np.asarray(ms.ops.prelu(xt, wt).asnumpy()))
            _, pullback = ms.vjp(ms.ops.prelu, xt, wt)
            dx, dw = pullback(ms.Tensor(dy))
            return BackendResult(np.asarray(dx.asnumpy()), dweight=np.asarray(dw.asnumpy()).reshape(w.shape))


def _mindspore_on_cpu() -> Any:
    ms = require("mindspore", backend="mindspore")
    # one runtime thread, synchronous: light on a shared machine; under ``flushing`` the
    # default pool and asynchronous execution give the same bits (measured)
    ms.set_context(mode=ms.PYNATIVE_MODE, runtime_num_threads=1, pynative_synchronize=True)
    ms.set_device("CPU")
    _check_flushing(ms)
    return ms


#: MXCSR bits: flush-to-zero (FZ, bit 15) and denormals-are-zero (DAZ, bit 6).
_FZ_DAZ = 0x8040
_MXCSR = slice(28, 32)  # glibc x86-64 ``fenv_t``: 28 bytes of x87 state, then ``__mxcsr``
_X86 = sys.platform == "linux" and platform.machine() in ("x86_64", "AMD64")


@contextmanager
def flushing() -> Iterator[None]:
    """Run the block with FZ and DAZ set on this thread, as MindSpore sets them on its own.

    MindSpore's thread pool turns both on in every worker thread it starts
    (``Worker::Run`` in ``mindspore/core/mindrt/src/thread/threadpool.cc``: "Some CPU
    kernels need set the flush zero mode"); measured with gdb on mindspore 2.10,
    ``ActorThread_0`` and ``KernelThread_0`` run with MXCSR 0x9ff2 (FZ, DAZ), the Python
    thread with 0x1fa2.  A PyNative op evidently runs on the Python thread on its first
    calls and on an actor thread later (inferred from the bits), so unpinned the same
    call flushes or not depending on how often it ran.  The caller's MXCSR is restored
    afterwards (numpy in this process keeps IEEE subnormals).  Nothing to pin outside
    Linux on x86-64.
    """
    if not _X86:
        yield
        return
    libm = ctypes.CDLL("libm.so.6")
    saved = (ctypes.c_ubyte * 32)()
    if libm.fegetenv(saved) != 0:
        raise BackendUnavailable("backend mindspore: fegetenv failed; cannot set FZ/DAZ")
    pinned = (ctypes.c_ubyte * 32).from_buffer_copy(saved)
    mxcsr = int.from_bytes(bytes(saved[_MXCSR]), "little") | _FZ_DAZ
    pinned[_MXCSR] = list(mxcsr.to_bytes(4, "little"))
    libm.fesetenv(pinned)
    try:
        yield
    finally:
        libm.fesetenv(saved)


def _check_flushing(ms: Any) -> None:
    """The first call must already be in the flushing state the golden model describes."""
    probe = ms.Tensor(np.full(8, -1e-40, dtype=np.float32))
    with flushing():
        kept = ms.ops.leaky_relu(probe, 0.5).asnumpy()[0] != 0
    if kept and _X86:
        raise BackendUnavailable("backend mindspore: float32 subnormals are not flushed with FZ/DAZ "
                                 "set; the mindspore golden model would not apply")

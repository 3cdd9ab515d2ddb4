"""The machine a run's bits were made on: the CPU's floating-point features and the process's
flush-to-zero (FTZ) / denormals-are-zero (DAZ) state.

Both change results: a kernel takes a different path with AVX-512 or F16C, and a thread with
FTZ/DAZ set (by ``torch.set_flush_denormal(True)``, a library built with ``-ffast-math``, a
framework's thread pool) flushes subnormals.  The state is *measured*, not read from a setting:
two float32 products on this thread, one whose result is subnormal (flushed under FTZ) and one
whose operand is subnormal and result normal (zero under DAZ).  That is the x86 MXCSR bits or
the Arm FPCR FZ bit, as the thread actually computes; ``torch.set_flush_denormal`` has no getter,
and sets exactly these bits on the calling thread.  Other threads (a framework's pool) keep
their own state.  Off Linux the flags are unknown (None).
"""
from __future__ import annotations

import platform
from pathlib import Path
from typing import Any, Optional

import numpy as np

#: The /proc/cpuinfo flags that change floating-point results or the paths kernels take.
FLOAT_FLAGS = ("sse2", "sse4_1", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
               "avx512_fp16", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_tile", "amx_bf16",
               "amx_fp16", "amx_int8",
               # Arm (``Features``): half and bfloat16 arithmetic, SVE
               "fphp", "asimdhp", "bf16", "i8mm", "sve", "sve2")
CPUINFO = Path("/proc/cpuinfo")
FIELDS = ("platform", "machine", "cpu", "cpu_flags", "flush_to_zero", "denormals_are_zero")


def _cpuinfo(path: Path) -> dict[str, str]:
    """The first processor's fields of ``/proc/cpuinfo`` (empty when it cannot be read)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_flags(*, path: Path = CPUINFO) -> Optional[list[str]]:
    """The :data:`FLOAT_FLAGS` this CPU has, in that order (None when ``path`` has no flags)."""
    fields = _cpuinfo(path)
    listed = fields.get("flags") or fields.get("Features")
    if listed is None:
        return None
    have = set(listed.split())
    return [f for f in FLOAT_FLAGS if f in have]


def cpu_name(*, path: Path = CPUINFO) -> Optional[str]:
    """The CPU's model name (``/proc/cpuinfo``, else ``platform.processor()``; None when neither says)."""
    fields = _cpuinfo(path)
    return fields.get("model name") or fields.get("Model") or platform.processor() or None


def flushes_results() -> bool:
    """FTZ: a float32 product whose exact result is subnormal comes out zero on this thread."""
    with np.errstate(all="ignore"):
        return bool(np.float32(2.0 ** -100) * np.float32(2.0 ** -30) == 0)


def zeroes_inputs() -> bool:
    """DAZ: a subnormal float32 operand reads as zero (its product with 2^100 is normal otherwise)."""
    subnormal = np.array([1 << 15], dtype=np.uint32).view(np.float32)[0]  # 2^-134, from bits: no rounding
    with np.errstate(all="ignore"):
        return bool(subnormal * np.float32(2.0 ** 100) == 0)


def describe(*, path: Path = CPUINFO) -> dict[str, Any]:
    """This process's machine as the JSON report's ``environment`` holds it (:data:`FIELDS`)."""
    return {"platform": platform.platform(), "machine": platform.machine(), "cpu": cpu_name(path=path),
            "cpu_flags": cpu_flags(path=path), "flush_to_zero": flushes_results(),
            "denormals_are_zero": zeroes_inputs()}


def summary_line(environment: dict[str, Any], *, versions: dict[str, str]) -> str:
    """One console line: the frameworks that ran, the CPU's float features, FTZ/DAZ, and each worker's."""
    parts = [", ".join(f"{k} {v}" for k, v in versions.items()) or "no framework"]
    parts.append(_machine_text(environment))
    for name, worker in (environment.get("workers") or {}).items():
        parts.append(f"worker {name}: {_machine_text(worker)}")
    return "environment: " + "; ".join(parts)


def _machine_text(machine: dict[str, Any]) -> str:
    flags = machine.get("cpu_flags")
    features = "cpu flags unknown" if flags is None else (" ".join(flags) or "no float features")
    states = [f"{word} {_state(machine.get(key))}" for word, key in
              (("FTZ", "flush_to_zero"), ("DAZ", "denormals_are_zero"))]
    device = f"{machine['device']}, " if machine.get("device") else ""
    return f"{device}{machine.get('machine', '?')} {features}, {', '.join(states)}"


def _state(value: Optional[bool]) -> str:
    return "unknown" if value is None else ("on" if value else "off")

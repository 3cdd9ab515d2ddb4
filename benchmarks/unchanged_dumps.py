"""The defect dumps of the proof that nothing changed (``benchmarks/unchanged.py``).

Made with numpy alone from fixed seeds, so the inputs are the same whatever the checkout
under test: each dump is what a defective device could write, for ``conformance compare``.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

F32 = np.float32
F16 = np.float16

@dataclass(frozen=True)
class Dump:
    """One defect dump: the arrays a device wrote and the ``compare`` arguments that read them."""

    name: str
    files: dict[str, np.ndarray]
    args: tuple[str, ...]


def _all_f16() -> np.ndarray:
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(F16)


def _f32_bits(n: int, *, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(F32)


def _f32_normal(n: int, *, seed: int, scale: float = 1.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(n) * scale).astype(F32)


def _exact(x: np.ndarray, alpha: float, *, dy: Optional[np.ndarray] = None) -> np.ndarray:
    """LeakyReLU (or its gradient) for an alpha with few mantissa bits: the float64 product is exact."""
    scaled = (x if dy is None else dy).astype(np.float64) * alpha
    return np.where(x > 0, x if dy is None else dy, scaled.astype(x.dtype))


def _flush(a: np.ndarray) -> np.ndarray:
    tiny = np.finfo(a.dtype).tiny
    return np.where((a != 0) & (np.abs(a) < tiny), np.copysign(np.zeros_like(a), a), a)


def _forward(name: str, x: np.ndarray, y: np.ndarray, alpha: str, *extra: str, y_file: str = "y.npy") -> Dump:
    return Dump(name, {"x.npy": x, y_file: y}, ("--x", "x.npy", "--y", y_file, "--alpha", alpha, *extra))


def _backward(name: str, x: np.ndarray, dy: np.ndarray, dx: np.ndarray, alpha: str) -> Dump:
    return Dump(name, {"x.npy": x, "dy.npy": dy, "dx.npy": dx},
                ("--x", "x.npy", "--dy", "dy.npy", "--dx", "dx.npy", "--alpha", alpha))


def _bf16_truncated() -> Dump:
    bits = np.arange(1 << 16, dtype=np.uint32)
    x = (bits << 16).view(F32)
    product = np.where(x > 0, x, (x.astype(np.float64) * 0.2).astype(F32))
    y = (product.view(np.uint32) >> 16).astype(np.uint16)
    return _forward("bf16-truncated-product", bits.astype(np.uint16), y, "0.2", "--dtype", "bfloat16")


def _tail_garbage() -> Dump:
    x = np.random.default_rng(4).permutation(_all_f16())
    y = _exact(x, 0.25)
    y[-300:] = np.random.default_rng(44).integers(0, 1 << 16, 300, dtype=np.uint32).astype(np.uint16).view(F16)
    return _forward("fp16-tail-garbage", x, y, "0.25", "--profile", "ascend910b1")


def _flushed_subnormals() -> Dump:
    x = _f32_bits(100_000, seed=5)
    x[::7] = (x[::7].view(np.uint32) & np.uint32(0x807FFFFF)).view(F32)
    return _forward("fp32-flushed-subnormals", x, _flush(_exact(_flush(x), 0.25)), "0.25")


def _lost_nan() -> Dump:
    x = _f32_bits(100_000, seed=6)
    y = _exact(x, 0.25)
    y[np.isnan(x)] = 0
    return _forward("fp32-lost-nan", x, y, "0.25")


def _mask_multiply() -> Dump:
    x = _f32_normal(100_000, seed=8)
    x[:4] = [np.inf, -np.inf, np.nan, -0.0]
    m = (x > 0).astype(F32)
    return _forward("fp32-mask-multiply", x, x * m + F32(0.25) * x * (F32(1) - m), "0.25")


def _stale_block() -> Dump:
    x, dy = _f32_normal(100_000, seed=10), _f32_normal(100_000, seed=11)
    dx = _exact(x, 0.25, dy=dy)
    dx[8192:10240] = dx[6144:8192]
    return _backward("fp32-backward-stale-block", x, dy, dx, "0.25")


def _cast_first() -> Dump:
    x = _f32_normal(100_000, seed=12, scale=3e4)
    x16 = x.astype(F16)
    y = np.where(x16 > 0, x16, (x16.astype(F32) * F32(0.25)).astype(F16))
    return _forward("fp32-to-fp16-cast-first", x, y, "0.25", y_file="y16.npz")


def defect_dumps() -> list[Dump]:
    """The eleven defect dumps, made with numpy alone from fixed seeds."""
    x16, xn = _all_f16(), _f32_normal(100_000, seed=1)
    dy16 = np.random.default_rng(9).permutation(x16)
    with np.errstate(all="ignore"):
        return [
            _forward("fp32-slope-0.01-for-0.2", xn, np.where(xn > 0, xn, xn * F32(0.01)), "0.2"),
            _forward("fp16-slope-in-fp16", x16, np.where(x16 > 0, x16, (x16.astype(F32) * F32(F16(0.2))).astype(F16)),
                     "0.2"),
            _bf16_truncated(), _tail_garbage(), _flushed_subnormals(), _lost_nan(),
            _forward("fp16-saturated", x16, np.clip(_exact(x16, 2.0), -65504, 65504), "2.0"),
            _mask_multiply(),
            _backward("fp16-backward-ge-at-zero", x16, dy16,
                      np.where(x16 >= 0, dy16, (dy16.astype(np.float64) * 0.25).astype(F16)), "0.25"),
            _stale_block(), _cast_first(),
        ]


def _array_sha256(a: np.ndarray) -> str:
    return hashlib.sha256(f"{a.dtype.str}{a.shape}".encode() + np.ascontiguousarray(a).tobytes()).hexdigest()


def tree_sha256(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def write_dumps(dumps: Sequence[Dump], root: Path) -> dict[str, str]:
    """Write each dump into ``root/<name>/``; the sha256 of every array (zip timestamps excluded)."""
    hashes = {}
    for dump in dumps:
        (root / dump.name).mkdir(parents=True)
        for file, array in dump.files.items():
            if file.endswith(".npz"):
                np.savez(root / dump.name / file, y=array)
            else:
                np.save(root / dump.name / file, array)
            hashes[f"{dump.name}/{file}"] = _array_sha256(array)
    return hashes

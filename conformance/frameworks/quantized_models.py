"""What each framework's quantized LeakyReLU computes, as code models that reproduce its bits.

A model takes a 1-D array of input codes in element order (PyTorch's result depends on the
position) and returns the output codes.  Each one is written from the framework's source,
cited in its record; ``tests/test_quantized.py`` checks it against the real framework over
all 256 codes where that framework is installed.  float32 steps are numpy float32
operations, each rounded once, as the C++ ``float`` arithmetic they mirror.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from conformance.reference.quantized import QuantParams

f32 = np.float32
_XNN_NEGATIVE_MIN = float.fromhex("-0x1.FFFCp6")  # XNNPACK's lower bound on the negative scale
QuantModelFn = Callable[..., np.ndarray]


def _codes(codes: np.ndarray, params: QuantParams) -> np.ndarray:
    return np.asarray(codes, dtype=params.storage).astype(np.int64)


def _clamp(values: np.ndarray, params: QuantParams) -> np.ndarray:
    lo, hi = params.code_range
    return np.clip(values, lo, hi).astype(params.storage)


def _requantize_f32(y: np.ndarray, params: QuantParams, *, divide: bool, zero_point_first: bool) -> np.ndarray:
    """float32 ``y`` to codes: ``y/s_out`` or ``y*f32(1/s_out)``, half-even, ``z_out`` added
    as an integer after rounding or as a float32 before it."""
    scaled = y / f32(params.s_out) if divide else y * (f32(1) / f32(params.s_out))
    if zero_point_first:
        return _clamp(np.rint(scaled + f32(params.z_out)).astype(np.int64), params)
    return _clamp(np.rint(scaled).astype(np.int64) + params.z_out, params)


def torch_vector(codes: np.ndarray, alpha: float, *, params: QuantParams) -> np.ndarray:
    """FBGEMM vector body: ``dx = fma(s, q, f32(s*-z))`` (one rounding; the float64 sum of a
    24-bit by 8-bit product and a float32 is exact), ``dx * blendv(alpha, 1, dx > 0)``,
    ``* f32(1/s_out)``, ``cvtps`` half-even, ``+ z_out``."""
    q = _codes(codes, params)
    s = f32(params.s_in)
    premul = s * -f32(params.z_in)
    dx = (np.float64(s) * q + np.float64(premul)).astype(f32)
    dy = np.where(dx > 0, dx, dx * f32(alpha))
    return _requantize_f32(dy, params, divide=False, zero_point_first=False)


def torch_scalar(codes: np.ndarray, alpha: float, *, params: QuantParams) -> np.ndarray:
    """The scalar op of ``cpu_kernel_vec``: ``dequantize_val`` = ``f32(s) * (q - z)`` (the
    subtraction in integers), then ``fbgemm::Quantize``: ``y * f32(1/s_out)``, and
    ``nearbyint(z_out + t)``: the zero point added in float32 before rounding."""
    q = _codes(codes, params)
    dx = f32(params.s_in) * (q - params.z_in).astype(f32)
    dy = np.where(dx > 0, dx, dx * f32(alpha))
    return _requantize_f32(dy, params, divide=False, zero_point_first=True)


def torch(codes: np.ndarray, alpha: float, *, params: QuantParams, block: int = 64) -> np.ndarray:
    """``torch.ao.nn.quantized.functional.leaky_relu``: the first ``floor(n/block)*block``
    elements take the vector body, the rest the scalar op (``vectorized_loop`` steps two
    vectors of 8-bit codes at a time; 64 with 32-lane AVX2 vectors)."""
    q = np.asarray(codes, dtype=params.storage).reshape(-1)
    split = (q.size // block) * block
    return np.concatenate([torch_vector(q[:split], alpha, params=params),
                           torch_scalar(q[split:], alpha, params=params)])


def quantize_multiplier(multiplier: float) -> tuple[int, int]:
    """TFLite ``QuantizeMultiplier``: ``frexp``, ``round(q * 2**31)`` half away from zero."""
    if multiplier == 0:
        return 0, 0
    fraction, shift = math.frexp(multiplier)
    fixed = int(math.copysign(math.floor(abs(fraction) * 2.0 ** 31 + 0.5), fraction))
    if abs(fixed) == 2 ** 31:
        fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return fixed, shift


def saturating_rounding_doubling_high_mul(a: np.ndarray, b: int) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingDoublingHighMul`` (int32 ``a``, ``b``; no operand pair here
    is the saturating INT32_MIN*INT32_MIN)."""
    ab = a.astype(np.int64) * np.int64(b)
    nudged = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    return np.sign(nudged) * (np.abs(nudged) // (1 << 31))  # C division truncates toward zero


def rounding_divide_by_pot(x: np.ndarray, exponent: int) -> np.ndarray:
    """gemmlowp ``RoundingDivideByPOT``: ``x / 2**exponent`` rounded half away from zero."""
    mask = (1 << exponent) - 1
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + ((x & mask) > threshold)


def multiply_by_quantized_multiplier(x: np.ndarray, multiplier: int, shift: int) -> np.ndarray:
    """TFLite ``MultiplyByQuantizedMultiplier``, the double-rounding build."""
    left, right = max(shift, 0), max(-shift, 0)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x * (1 << left), multiplier), right)


def tflite_builtin(codes: np.ndarray, alpha: float, *, params: QuantParams) -> np.ndarray:
    """TFLite ``LEAKY_RELU`` (reference = optimized): multipliers formed in float32
    (``s_in*alpha/s_out``, ``s_in/s_out``), widened, ``QuantizeMultiplier``; the branch on
    ``q - z_in >= 0``.  uint8 models run QUANTIZE(u8->i8), this kernel, QUANTIZE(i8->u8):
    zero points shifted by 128, the same codes as computing in the uint8 range."""
    x = _codes(codes, params) - params.z_in
    identity = quantize_multiplier(float(f32(params.s_in) / f32(params.s_out)))
    negative = quantize_multiplier(float(f32(params.s_in) * f32(alpha) / f32(params.s_out)))
    out = np.where(x >= 0, multiply_by_quantized_multiplier(x, *identity),
                   multiply_by_quantized_multiplier(x, *negative))
    return _clamp(out + params.z_out, params)


def xnnpack_multipliers(alpha: float, *, params: QuantParams) -> tuple[int, int] | None:
    """``lrintf(256*scale)`` for the positive and negative branch, or None where the
    delegate declines the node: where XNNPACK's parameter asserts would fail (positive
    scale outside [2**-8, 2**7], negative scale outside [-0x1.FFFCp6, 2**7] or of magnitude
    below 2**-8; the positive bounds and the 2**-8 magnitude are measured with the interpreter)."""
    positive = f32(params.s_in) / f32(params.s_out)
    negative = positive * f32(alpha)
    if not (2.0 ** -8 <= positive <= 2.0 ** 7) or not (_XNN_NEGATIVE_MIN <= negative <= 2.0 ** 7):
        return None
    if abs(negative) < 2.0 ** -8:
        return None
    return int(np.rint(f32(256) * positive)), int(np.rint(f32(256) * negative))


def tflite_xnnpack(codes: np.ndarray, alpha: float, *, params: QuantParams) -> np.ndarray:
    """XNNPACK ``qs8/qu8-vlrelu``: ``z_out + ((q - z_in)*m + 128 >> 8)`` with Q8 multipliers
    (the AVX2 ``mulhrs`` form computes the same); the builtin kernel where XNNPACK declines."""
    multipliers = xnnpack_multipliers(alpha, params=params)
    if multipliers is None:
        return tflite_builtin(codes, alpha, params=params)
    x = _codes(codes, params) - params.z_in
    m = np.where(x >= 0, multipliers[0], multipliers[1])
    return _clamp(params.z_out + ((x * m + 128) >> 8), params)


def onnxruntime(codes: np.ndarray, alpha: float, *, params: QuantParams) -> np.ndarray:
    """``QLinearLeakyRelu``'s 256-entry table: ``f32(s_in) * (q - z_in)``, ``x >= 0 ? x :
    x*f32(alpha)``, then ``MlasQuantizeLinear``: ``/ s_out``, half-even, ``+ z_out``.  The
    QDQ graph (DequantizeLinear, LeakyRelu, QuantizeLinear) computes the same steps."""
    dx = f32(params.s_in) * (_codes(codes, params) - params.z_in).astype(f32)
    dy = np.where(dx >= 0, dx, dx * f32(alpha))
    return _requantize_f32(dy, params, divide=True, zero_point_first=False)


@dataclass(frozen=True)
class QuantModel:
    """One framework's quantized LeakyReLU, with the sources it is written from."""

    name: str
    compute: QuantModelFn
    sources: tuple[str, ...]


MODELS: dict[str, QuantModel] = {m.name: m for m in (
    QuantModel("torch", torch, (
        "pytorch: aten/src/ATen/native/quantized/cpu/kernels/QuantizedOpKernels.cpp (leaky_qrelu_out_kernel)",
        "pytorch: aten/src/ATen/cpu/vec/vec256/vec256_qint.h (dequantize fmadd, QuantizeAvx2)",
        "fbgemm: include/fbgemm/QuantUtilsAvx2.h, QuantUtils.h (Quantize)")),
    QuantModel("tflite[builtin]", tflite_builtin, (
        "tensorflow: tensorflow/lite/kernels/activations.cc (LeakyReluPrepare)",
        "tensorflow: tensorflow/lite/kernels/internal/reference/leaky_relu.h (QuantizeLeakyRelu)",
        "tensorflow: tensorflow/lite/kernels/internal/quantization_util.cc (QuantizeMultiplier)",
        "gemmlowp: fixedpoint/fixedpoint.h (SaturatingRoundingDoublingHighMul, RoundingDivideByPOT)")),
    QuantModel("tflite[xnnpack]", tflite_xnnpack, (
        "XNNPACK: src/microparams-init.c (xnn_init_qs8_lrelu_scalar_params)",
        "XNNPACK: src/qs8-vlrelu/scalar-select.c.in, avx2.c.in")),
    QuantModel("onnxruntime", onnxruntime, (
        "onnxruntime: onnxruntime/contrib_ops/cpu/quantization/qlinear_lookup_table.cc",
        "onnxruntime: onnxruntime/core/mlas/lib/quantize.cpp (MlasQuantizeLinear)")),
)}

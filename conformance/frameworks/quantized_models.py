"""What each framework's quantized LeakyReLU computes, as code models that reproduce its bits.

A model takes a 1-D array of input codes in element order (PyTorch's result depends on the
position) and returns the output codes.  Each path is a golden variant, a
:class:`~conformance.reference.quantized.QuantSemantics` record written from the framework's
source, cited in its model; ``tests/quantized/test_quantized.py`` checks each model against the real
framework over all 256 codes where that framework is installed.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

import numpy as np

from conformance.reference.quantized import QuantParams, QuantSemantics, branch_scales, lookup, variant_table

_XNN_NEGATIVE_MIN = float.fromhex("-0x1.FFFCp6")  # XNNPACK's lower bound on the negative scale
QuantModelFn = Callable[..., np.ndarray]

#: FBGEMM vector body: ``dx = fma(s, q, f32(s*-z))``, ``dx * blendv(alpha, 1, dx > 0)``,
#: ``* f32(1/s_out)``, ``cvtps`` half-even, ``+ z_out``.
TORCH_VECTOR = QuantSemantics("float32", requantize="reciprocal", dequantize="fma")
#: the scalar op of ``cpu_kernel_vec``: ``f32(s) * (q - z)`` (the subtraction in integers), then
#: ``fbgemm::Quantize``: ``y * f32(1/s_out)``, ``nearbyint(z_out + t)``.
TORCH_SCALAR = QuantSemantics("float32", requantize="reciprocal", zero_point="before")
#: TFLite ``LEAKY_RELU``: Q31 multipliers per branch, gemmlowp double rounding.
TFLITE_BUILTIN = QuantSemantics("q31")
#: XNNPACK ``qs8/qu8-vlrelu``: Q8 multipliers ``lrintf(256*scale)``.
TFLITE_XNNPACK = QuantSemantics("q8")
#: ``QLinearLeakyRelu``'s float32 table: ``f32(s_in)*(q - z_in)``, ``MlasQuantizeLinear``'s
#: division by ``s_out``, half-even.
ONNXRUNTIME = QuantSemantics("float32", requantize="divide")
TORCH_BLOCK = 64  # vectorized_loop steps two 32-lane AVX2 vectors of 8-bit codes


def _path(codes: np.ndarray, alpha: float, *, params: QuantParams, rule: QuantSemantics) -> np.ndarray:
    q = np.asarray(codes, dtype=params.storage).reshape(-1)
    return lookup(variant_table(alpha, params=params, semantics=rule), q, params=params)


def torch_vector(codes: np.ndarray, alpha: float, *, params: QuantParams) -> np.ndarray:
    """PyTorch's vector body on every element."""
    return _path(codes, alpha, params=params, rule=TORCH_VECTOR)


def torch_scalar(codes: np.ndarray, alpha: float, *, params: QuantParams) -> np.ndarray:
    """PyTorch's scalar op on every element: the zero point added in float32 before rounding."""
    return _path(codes, alpha, params=params, rule=TORCH_SCALAR)


def torch(codes: np.ndarray, alpha: float, *, params: QuantParams, block: int = TORCH_BLOCK) -> np.ndarray:
    """``torch.ao.nn.quantized.functional.leaky_relu``: the first ``floor(n/block)*block``
    elements take the vector body, the rest the scalar op."""
    q = np.asarray(codes, dtype=params.storage).reshape(-1)
    split = (q.size // block) * block
    return np.concatenate([torch_vector(q[:split], alpha, params=params),
                           torch_scalar(q[split:], alpha, params=params)])


def tflite_builtin(codes: np.ndarray, alpha: float, *, params: QuantParams) -> np.ndarray:
    """TFLite ``LEAKY_RELU`` (reference = optimized): multipliers formed in float32
    (``s_in*alpha/s_out``, ``s_in/s_out``), widened, ``QuantizeMultiplier``; the branch on
    ``q - z_in >= 0``.  uint8 models run QUANTIZE(u8->i8), this kernel, QUANTIZE(i8->u8):
    zero points shifted by 128, the same codes as computing in the uint8 range."""
    return _path(codes, alpha, params=params, rule=TFLITE_BUILTIN)


def xnnpack_multipliers(alpha: float, *, params: QuantParams) -> Optional[tuple[int, int]]:
    """``lrintf(256*scale)`` for the positive and negative branch, or None where the
    delegate declines the node: where XNNPACK's parameter asserts would fail (positive
    scale outside [2**-8, 2**7], negative scale outside [-0x1.FFFCp6, 2**7] or of magnitude
    below 2**-8; the positive bounds and the 2**-8 magnitude are measured with the interpreter)."""
    positive, negative = branch_scales(alpha, params=params)
    if not (2.0 ** -8 <= positive <= 2.0 ** 7) or not (_XNN_NEGATIVE_MIN <= negative <= 2.0 ** 7):
        return None
    if abs(negative) < 2.0 ** -8:
        return None
    return int(np.rint(np.float32(256) * np.float32(positive))), int(np.rint(np.float32(256) * np.float32(negative)))


def xnnpack_rule(alpha: float, *, params: QuantParams) -> QuantSemantics:
    """The rule the XNNPACK profile computes a setting with: Q8, or the builtin's where it declines."""
    return TFLITE_BUILTIN if xnnpack_multipliers(alpha, params=params) is None else TFLITE_XNNPACK


def tflite_xnnpack(codes: np.ndarray, alpha: float, *, params: QuantParams) -> np.ndarray:
    """XNNPACK ``qs8/qu8-vlrelu``: ``z_out + ((q - z_in)*m + 128 >> 8)`` with Q8 multipliers
    (the AVX2 ``mulhrs`` form computes the same); the builtin kernel where XNNPACK declines."""
    return _path(codes, alpha, params=params, rule=xnnpack_rule(alpha, params=params))


def onnxruntime(codes: np.ndarray, alpha: float, *, params: QuantParams) -> np.ndarray:
    """``QLinearLeakyRelu``'s 256-entry table: ``f32(s_in) * (q - z_in)``, ``x >= 0 ? x :
    x*f32(alpha)``, then ``MlasQuantizeLinear``: ``/ s_out``, half-even, ``+ z_out``.  The
    QDQ graph (DequantizeLinear, LeakyRelu, QuantizeLinear) computes the same steps."""
    return _path(codes, alpha, params=params, rule=ONNXRUNTIME)


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

"""The real frameworks' quantized LeakyReLU, run on given codes (CPU).

Each runner takes a 1-D array of codes in element order and returns the output codes.
Frameworks are imported when a runner is first called; a missing one raises
:class:`~conformance.errors.BackendUnavailable`.  TFLite chooses its own quantization
parameters at conversion: :func:`tflite_model` builds and converts the model and reads
them back from the interpreter.
"""
from __future__ import annotations

import contextlib
import functools
import io
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from conformance.extras import require
from conformance.reference.quantized import QuantParams, all_codes

_ORT_LEVELS = ("off", "all")
_ORT_GRAPHS = ("qlinear", "qdq")


def torch(codes: np.ndarray, alpha: float, *, params: QuantParams) -> np.ndarray:
    """``torch.ao.nn.quantized.functional.leaky_relu`` on a per-tensor affine tensor."""
    torch_mod = require("torch", backend="torch")
    functional = require("torch.ao.nn.quantized.functional", backend="torch")
    q = torch_mod.from_numpy(np.ascontiguousarray(codes, dtype=params.storage).reshape(-1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # quantized dtypes are deprecated, still computed
        qx = torch_mod._make_per_tensor_quantized_tensor(q, params.s_in, params.z_in)
        y = functional.leaky_relu(qx, alpha, scale=params.s_out, zero_point=params.z_out)
    return y.int_repr().numpy()


def _onnx_tensors(params: QuantParams) -> list[Any]:
    helper = require("onnx.helper", backend="onnxruntime")
    onnx = require("onnx", backend="onnxruntime")
    zp_type = onnx.TensorProto.INT8 if params.dtype == "qint8" else onnx.TensorProto.UINT8
    return [helper.make_tensor("s_in", onnx.TensorProto.FLOAT, [], [params.s_in]),
            helper.make_tensor("z_in", zp_type, [], [params.z_in]),
            helper.make_tensor("s_out", onnx.TensorProto.FLOAT, [], [params.s_out]),
            helper.make_tensor("z_out", zp_type, [], [params.z_out])]


def _onnx_nodes(alpha: float, *, graph: str) -> list[Any]:
    helper = require("onnx.helper", backend="onnxruntime")
    if graph == "qlinear":
        return [helper.make_node("QLinearLeakyRelu", ["x", "s_in", "z_in", "s_out", "z_out"], ["y"],
                                 domain="com.microsoft", alpha=alpha)]
    return [helper.make_node("DequantizeLinear", ["x", "s_in", "z_in"], ["real"]),
            helper.make_node("LeakyRelu", ["real"], ["act"], alpha=alpha),
            helper.make_node("QuantizeLinear", ["act", "s_out", "z_out"], ["y"])]


def onnx_model(alpha: float, *, params: QuantParams, graph: str = "qlinear") -> bytes:
    """A one-node ``com.microsoft.QLinearLeakyRelu`` graph, or the QDQ graph
    DequantizeLinear -> LeakyRelu -> QuantizeLinear, serialized."""
    if graph not in _ORT_GRAPHS:
        raise ValueError(f"graph must be one of {', '.join(_ORT_GRAPHS)}, got {graph!r}")
    onnx = require("onnx", backend="onnxruntime")
    helper = require("onnx.helper", backend="onnxruntime")
    elem = onnx.TensorProto.INT8 if params.dtype == "qint8" else onnx.TensorProto.UINT8
    g = helper.make_graph(_onnx_nodes(alpha, graph=graph), "quantized_leaky_relu",
                          [helper.make_tensor_value_info("x", elem, [None])],
                          [helper.make_tensor_value_info("y", elem, [None])],
                          initializer=_onnx_tensors(params))
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(g, opset_imports=opsets, ir_version=8).SerializeToString()


def onnxruntime(codes: np.ndarray, alpha: float, *, params: QuantParams, graph: str = "qlinear",
                optimization: str = "all") -> np.ndarray:
    """The model of :func:`onnx_model` on ONNX Runtime's CPU provider, graph optimizations
    ``off`` or ``all`` (which fuses the QDQ graph into QLinearLeakyRelu)."""
    if optimization not in _ORT_LEVELS:
        raise ValueError(f"optimization must be one of {', '.join(_ORT_LEVELS)}, got {optimization!r}")
    ort = require("onnxruntime", backend="onnxruntime")
    options = ort.SessionOptions()
    options.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_DISABLE_ALL if optimization == "off"
                                        else ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    session = ort.InferenceSession(onnx_model(alpha, params=params, graph=graph), options,
                                   providers=["CPUExecutionProvider"])
    x = np.ascontiguousarray(codes, dtype=params.storage).reshape(-1)
    return session.run(["y"], {"x": x})[0]


@dataclass(frozen=True)
class TFLiteModel:
    """A converted one-layer LeakyReLU model and the quantization its interpreter reports."""

    flatbuffer: bytes
    params: QuantParams
    alpha: float
    size: int


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """TensorFlow's conversion and interpreter chatter (stdout prints, C++ logs, warnings) muted."""
    from conformance.frameworks.tensorflow_backend import _quiet_stderr

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), _quiet_stderr():
        warnings.simplefilter("ignore")
        yield


def _keras_leaky_relu(alpha: float, *, size: int) -> Any:
    from conformance.frameworks.tensorflow_backend import tensorflow

    tf = tensorflow()
    inputs = tf.keras.Input(shape=(size,), batch_size=1, dtype="float32")
    return tf.keras.Model(inputs, tf.keras.layers.LeakyReLU(negative_slope=alpha)(inputs))


def _convert(model: Any, *, low: float, high: float, dtype: str, size: int) -> bytes:
    from conformance.frameworks.tensorflow_backend import tensorflow

    tf = tensorflow()
    calibration = np.linspace(low, high, size, dtype=np.float32).reshape(1, size)
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: iter([[calibration]])
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = converter.inference_output_type = (
        tf.int8 if dtype == "qint8" else tf.uint8)
    return converter.convert()


def _interpreter(flatbuffer: bytes, *, xnnpack: bool) -> Any:
    from conformance.frameworks.tensorflow_backend import tensorflow

    tf = tensorflow()
    resolver = (tf.lite.experimental.OpResolverType.AUTO if xnnpack
                else tf.lite.experimental.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    with _quiet():
        interpreter = tf.lite.Interpreter(model_content=flatbuffer, experimental_op_resolver_type=resolver)
        interpreter.allocate_tensors()
    return interpreter


def tflite_model(alpha: float, *, low: float, high: float, dtype: str = "qint8", size: int = 256) -> TFLiteModel:
    """A Keras ``LeakyReLU`` layer converted with full-integer post-training quantization,
    calibrated on ``[low, high]``; its parameters as the interpreter reports them."""
    require("tensorflow", backend="tflite")
    with _quiet():
        flatbuffer = _convert(_keras_leaky_relu(alpha, size=size), low=low, high=high, dtype=dtype, size=size)
    interpreter = _interpreter(flatbuffer, xnnpack=False)
    s_in, z_in = interpreter.get_input_details()[0]["quantization"]
    s_out, z_out = interpreter.get_output_details()[0]["quantization"]
    params = QuantParams(float(s_in), int(z_in), float(s_out), int(z_out), dtype)
    return TFLiteModel(flatbuffer, params, alpha, size)


def tflite(codes: np.ndarray, *, model: TFLiteModel, xnnpack: bool) -> np.ndarray:
    """``model`` run by ``tf.lite.Interpreter`` with the default delegates (XNNPACK) or the
    builtin kernels only; ``codes`` hold ``model.size`` elements."""
    interpreter = _interpreter(model.flatbuffer, xnnpack=xnnpack)
    x = np.ascontiguousarray(codes, dtype=model.params.storage).reshape(1, model.size)
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"]).reshape(-1)


Runner = Callable[[float, QuantParams], tuple[QuantParams, np.ndarray]]


def _torch_body(alpha: float, params: QuantParams) -> tuple[QuantParams, np.ndarray]:
    """All codes in one tensor: every element takes the vector body."""
    return params, torch(all_codes(params), alpha, params=params)


def _torch_tail(alpha: float, params: QuantParams) -> tuple[QuantParams, np.ndarray]:
    """All codes in 16-element tensors: every element takes the scalar op."""
    codes = all_codes(params)
    return params, np.concatenate([torch(codes[i:i + 16], alpha, params=params) for i in range(0, codes.size, 16)])


def _onnxruntime(graph: str, optimization: str) -> Runner:
    def run(alpha: float, params: QuantParams) -> tuple[QuantParams, np.ndarray]:
        return params, onnxruntime(all_codes(params), alpha, params=params, graph=graph, optimization=optimization)
    return run


@functools.cache
def _setting_model(alpha: float, params: QuantParams) -> TFLiteModel:
    """One converted model per setting, shared by both profiles: calibrated on the input range
    the setting's codes cover."""
    lo, hi = params.code_range
    return tflite_model(alpha, low=params.s_in * (lo - params.z_in), high=params.s_in * (hi - params.z_in),
                        dtype=params.dtype)


def _tflite(*, xnnpack: bool) -> Runner:
    def run(alpha: float, params: QuantParams) -> tuple[QuantParams, np.ndarray]:
        """The interpreter's own parameters (float32 scales, the output's from calibration) are
        the ones returned."""
        model = _setting_model(alpha, params)
        return model.params, tflite(all_codes(model.params), model=model, xnnpack=xnnpack)
    return run


#: framework[profile] -> runner over all codes of a setting; the module each needs.
RUNNERS: dict[str, tuple[Runner, str]] = {
    "torch[vector]": (_torch_body, "torch"),
    "torch[tail]": (_torch_tail, "torch"),
    "tflite[builtin]": (_tflite(xnnpack=False), "tensorflow"),
    "tflite[xnnpack]": (_tflite(xnnpack=True), "tensorflow"),
    "onnxruntime[qlinear]": (_onnxruntime("qlinear", "all"), "onnxruntime"),
    "onnxruntime[qdq-off]": (_onnxruntime("qdq", "off"), "onnxruntime"),
    "onnxruntime[qdq-all]": (_onnxruntime("qdq", "all"), "onnxruntime"),
}

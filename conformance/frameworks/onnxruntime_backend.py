"""``onnxruntime``: a one-node ``LeakyRelu`` graph built with ``onnx.helper``, CPU, forward only.

In the default suite.  ONNX Runtime's CPU provider has no bfloat16
or float64 LeakyRelu (onnxruntime 1.32: NOT_IMPLEMENTED), and ONNX has no gradient to run,
so those rows are skipped with the reason.
One session is built per (dtype, alpha) and process, and kept: a process forked from this one
(``run --jobs``) builds its own, since the threads of a session do not survive a fork.
"""
from __future__ import annotations

import functools
import os
from typing import Any, Optional

import numpy as np

from conformance.backends import BackendBase
from conformance.errors import Unsupported
from conformance.extras import require
from conformance.records import BackendResult, Direction

OPSET = 22
DTYPES = ("float16", "float32")  # measured: the CPU provider has no bfloat16 or float64 LeakyRelu


class OnnxRuntimeBackend(BackendBase):
    """``LeakyRelu(alpha)`` (alpha stored as a float32 attribute, as ONNX defines it)."""

    name = "onnxruntime"
    default_suite = True
    packages = ("onnx", "onnxruntime")
    requires = ("onnx", "onnxruntime")
    allowed = frozenset({"alpha-precision"})  # the float32 alpha attribute

    def __init__(self) -> None:
        self.onnx = require("onnx", backend=self.name)
        self.ort = require("onnxruntime", backend=self.name)
        self.session = functools.lru_cache(maxsize=64)(self._session)
        self.prelu_session = functools.lru_cache(maxsize=8)(self._prelu_session)

    def supports(self, dtype: str, out_dtype: str, direction: Direction) -> bool:
        return direction == "forward" and dtype == out_dtype and dtype in DTYPES

    def skip_reason(self, dtype: str, out_dtype: str, direction: Direction) -> str:
        if direction == "backward":
            return "ONNX Runtime runs no gradient of LeakyRelu"
        if dtype in ("bfloat16", "float64") and dtype == out_dtype:
            return f"ONNX Runtime's CPU provider has no {dtype} LeakyRelu"
        return f"onnxruntime runs LeakyRelu on (T, T) only, T in {', '.join(DTYPES)}"

    def _session(self, pid: int, dtype: str, alpha: float) -> Any:
        helper, proto = self.onnx.helper, self.onnx.TensorProto
        elem = {"float16": proto.FLOAT16, "float32": proto.FLOAT}[dtype]
        node = helper.make_node("LeakyRelu", ["x"], ["y"], alpha=alpha)
        graph = helper.make_graph([node], "leaky_relu", [helper.make_tensor_value_info("x", elem, [None])],
                                  [helper.make_tensor_value_info("y", elem, [None])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        options = self.ort.SessionOptions()
        options.log_severity_level = 3
        return self.ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])

    def forward(self, x: np.ndarray, alpha: float, *, out_dtype: Optional[str] = None) -> BackendResult:
        if x.dtype.name not in DTYPES:
            raise Unsupported(self.skip_reason(x.dtype.name, x.dtype.name, "forward"))
        flat = np.ascontiguousarray(x).reshape(-1)
        (y,) = self.session(os.getpid(), x.dtype.name, float(alpha)).run(["y"], {"x": flat})
        return BackendResult(np.asarray(y).reshape(x.shape))

    def backward(self, dy: np.ndarray, x: np.ndarray, alpha: float, *,
                 out_dtype: Optional[str] = None) -> BackendResult:
        raise Unsupported(self.skip_reason(x.dtype.name, x.dtype.name, "backward"))

    ops = ("leaky_relu", "prelu")
    #: Measured (onnxruntime 1.32, CPU, per-channel slope): x = -0 stays -0, as ``x >= 0 ? x : slope*x``
    #: gives (the select gives +0 for a negative slope).  A scalar float16 slope of 0 was seen to give
    #: +0 for a negative x (where the select gives -0); the suite's batches hold no such case.
    prelu_allowed = frozenset({"formulation"})

    def prelu_supports(self, dtype: str, direction: Direction) -> bool:
        """``PRelu`` forward on float16 and float32 (no gradient in ONNX)."""
        return direction == "forward" and dtype in DTYPES

    def _prelu_session(self, pid: int, dtype: str) -> Any:
        helper, proto = self.onnx.helper, self.onnx.TensorProto
        elem = {"float16": proto.FLOAT16, "float32": proto.FLOAT}[dtype]
        node = helper.make_node("PRelu", ["x", "slope"], ["y"])
        graph = helper.make_graph([node], "prelu", [helper.make_tensor_value_info("x", elem, None),
                                                    helper.make_tensor_value_info("slope", elem, None)],
                                  [helper.make_tensor_value_info("y", elem, None)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        options = self.ort.SessionOptions()
        options.log_severity_level = 3
        return self.ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])

    def prelu(self, direction: Direction, x: np.ndarray, weight: np.ndarray, *,
              dy: Optional[np.ndarray] = None) -> BackendResult:
        """``PRelu(X, slope)`` with a per-channel slope shaped (C, 1, ..., 1): ONNX broadcasts the slope
        numpy-style from the trailing axes (onnx/defs/math/defs.cc, PRelu), so that is how an NCHW model
        must give it."""
        from conformance.reference.prelu import expanded_weight

        if direction != "forward" or x.dtype.name not in DTYPES:
            raise Unsupported(f"onnxruntime runs PRelu forward on {', '.join(DTYPES)}")
        slope = np.ascontiguousarray(expanded_weight(weight, x.shape)[0]).astype(x.dtype)
        session = self.prelu_session(os.getpid(), x.dtype.name)
        (y,) = session.run(["y"], {"x": np.ascontiguousarray(x), "slope": slope})
        return BackendResult(np.asarray(y).reshape(x.shape))

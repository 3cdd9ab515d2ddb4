"""Each framework's default LeakyReLU slope: declared (docs/domain.md) and probed live.

A script that relies on one framework's default silently changes behaviour
when it moves to another: this table is the "default-alpha trap".
A probe calls the API without a slope on x = -1 and reads the slope off the output.
Frameworks in environments of their own (Paddle, MindSpore) are probed by
their backend's worker (a ``probe`` message), in their own python.
"""
from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Optional

import numpy as np

from conformance.errors import UsageError

_X = -1.0


def _probe_torch_functional() -> float:
    import torch

    return -float(torch.nn.functional.leaky_relu(torch.tensor([_X], dtype=torch.float64))[0])


def _probe_torch_module() -> float:
    import torch

    return -float(torch.nn.LeakyReLU()(torch.tensor([_X], dtype=torch.float64))[0])


def _probe_tf_nn() -> float:
    from conformance.reference.tensorflow_backend import tensorflow

    tf = tensorflow()
    return -float(tf.nn.leaky_relu(tf.constant([_X], dtype=tf.float64)).numpy()[0])


def _keras() -> Any:
    import keras

    return keras


def _probe_keras_layer() -> float:
    return -float(np.asarray(_keras().layers.LeakyReLU()(np.asarray([_X], dtype=np.float32)))[0])


def _probe_keras_ops() -> float:
    keras = _keras()
    return -float(keras.ops.convert_to_numpy(keras.ops.leaky_relu(np.asarray([_X], dtype=np.float32)))[0])


def _probe_jax() -> float:
    import jax
    import jax.numpy as jnp

    return -float(jax.nn.leaky_relu(jnp.asarray([_X], dtype=jnp.float32))[0])


def _probe_onnx() -> float:
    """A LeakyRelu node without its ``alpha`` attribute, run by ONNX Runtime on CPU."""
    import onnxruntime
    from onnx import TensorProto, helper

    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1]) for n in ("x", "y")]
    graph = helper.make_graph([helper.make_node("LeakyRelu", ["x"], ["y"])], "default", io[:1], io[1:])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return -float(session.run(None, {"x": np.asarray([_X], dtype=np.float32)})[0][0])


def _probe_paddle_functional() -> float:
    import paddle

    return -float(paddle.nn.functional.leaky_relu(paddle.to_tensor([_X], dtype="float32")).numpy()[0])


def _probe_paddle_module() -> float:
    import paddle

    return -float(paddle.nn.LeakyReLU()(paddle.to_tensor([_X], dtype="float32")).numpy()[0])


def _probe_mindspore_ops() -> float:
    import mindspore

    return -float(mindspore.ops.leaky_relu(mindspore.Tensor(np.asarray([_X], dtype=np.float32))).asnumpy()[0])


def _probe_mindspore_module() -> float:
    import mindspore

    return -float(mindspore.nn.LeakyReLU()(mindspore.Tensor(np.asarray([_X], dtype=np.float32))).asnumpy()[0])


@dataclass(frozen=True)
class DefaultSlope:
    """One API's default slope, where it is declared, and how to probe it."""

    api: str
    framework: str
    argument: str
    declared: float
    module: Optional[str] = None  # the import that must exist for the probe
    probe: Optional[Callable[[], float]] = None
    source: str = ""
    #: Distributions whose version the probe reports (the first installed one).
    packages: tuple[str, ...] = ()
    #: The backend whose worker runs the probe in its framework's own environment (None: in-process).
    environment: Optional[str] = None


_TORCH, _TF, _KERAS = ("torch",), ("tensorflow-cpu", "tensorflow"), ("keras",)
_ORT, _PADDLE, _MS = ("onnxruntime", "onnx"), ("paddlepaddle",), ("mindspore",)

DEFAULTS: tuple[DefaultSlope, ...] = (
    DefaultSlope("CANN LeakyRelu (graph op)", "CANN", "negative_slope", 0.0,
                 source="hicann/ops-nn activation/leaky_relu/op_host/leaky_relu_def.cpp"),
    DefaultSlope("torch.nn.functional.leaky_relu", "torch", "negative_slope", 0.01, "torch",
                 _probe_torch_functional, "aten/src/ATen/native/Activation.cpp", _TORCH),
    DefaultSlope("torch.nn.LeakyReLU", "torch", "negative_slope", 0.01, "torch",
                 _probe_torch_module, "torch/nn/modules/activation.py", _TORCH),
    DefaultSlope("tf.nn.leaky_relu", "tf.nn", "alpha", 0.2, "tensorflow",
                 _probe_tf_nn, "tensorflow/python/ops/nn_ops.py", _TF),
    DefaultSlope("keras.layers.LeakyReLU", "Keras layer", "negative_slope", 0.3, "keras",
                 _probe_keras_layer, "keras/src/layers/activations/leaky_relu.py", _KERAS),
    DefaultSlope("keras.ops.leaky_relu", "Keras ops", "negative_slope", 0.2, "keras",
                 _probe_keras_ops, "keras/src/ops/nn.py", _KERAS),
    DefaultSlope("mindspore.ops.leaky_relu", "MindSpore", "alpha", 0.2, "mindspore",
                 _probe_mindspore_ops, "mindspore/python/mindspore/ops/function/nn_func.py", _MS, "mindspore"),
    DefaultSlope("mindspore.nn.LeakyReLU", "MindSpore", "alpha", 0.2, "mindspore",
                 _probe_mindspore_module, "mindspore/python/mindspore/nn/layer/activation.py", _MS, "mindspore"),
    DefaultSlope("ONNX LeakyRelu", "ONNX", "alpha", 0.01, "onnxruntime",
                 _probe_onnx, "onnx/defs/math/defs.cc (float32 attribute)", _ORT),
    DefaultSlope("jax.nn.leaky_relu", "JAX", "negative_slope", 0.01, "jax",
                 _probe_jax, "jax/_src/nn/functions.py", ("jax", "jaxlib")),
    DefaultSlope("paddle.nn.functional.leaky_relu", "Paddle", "negative_slope", 0.01, "paddle",
                 _probe_paddle_functional, "python/paddle/nn/functional/activation.py", _PADDLE, "paddle"),
    DefaultSlope("paddle.nn.LeakyReLU", "Paddle", "negative_slope", 0.01, "paddle",
                 _probe_paddle_module, "python/paddle/nn/layer/activation.py", _PADDLE, "paddle"),
)


def entry_for(api: str) -> DefaultSlope:
    """The table's entry for ``api``; a UsageError naming the choices otherwise."""
    found = [d for d in DEFAULTS if d.api == api]
    if not found:
        raise UsageError(f"no default-slope entry for {api!r}; choose from {', '.join(d.api for d in DEFAULTS)}")
    return found[0]


def frameworks_with_default(alpha: float) -> tuple[str, ...]:
    """Frameworks whose declared default equals ``alpha`` (compared as float32, as they store it)."""
    names = (d.framework for d in DEFAULTS if np.float32(d.declared) == np.float32(alpha))
    return tuple(dict.fromkeys(names))


def default_slopes() -> tuple[float, ...]:
    """Every distinct declared default slope."""
    return tuple(sorted({d.declared for d in DEFAULTS}))


NOT_SET_UP = "not set up (make conformance-all)"


@dataclass(frozen=True)
class ProbeResult:
    """A declared default beside the live probe, with the version that ran it.

    ``probed`` is None when no probe ran; ``why`` then says why (not installed,
    environment not set up, the worker failed).
    """

    entry: DefaultSlope
    probed: Optional[float]
    version: Optional[str] = None
    why: Optional[str] = None

    @property
    def status(self) -> str:
        if self.entry.probe is None:
            return "declared only"
        if self.probed is None:
            return self.why or "not installed"
        agree = np.float32(self.probed) == np.float32(self.entry.declared)
        return "agrees" if agree else "DISAGREES"


def installed_version(entry: DefaultSlope) -> Optional[str]:
    """``"<distribution> <version>"`` of the first of the entry's packages installed here."""
    for dist in entry.packages:
        try:
            return f"{dist} {metadata.version(dist)}"
        except metadata.PackageNotFoundError:
            continue
    return None


def probe_here(entry: DefaultSlope) -> ProbeResult:
    """Run ``entry``'s probe in this process when its framework is importable."""
    if entry.probe is None:
        return ProbeResult(entry, None)
    if entry.module is None or importlib.util.find_spec(entry.module) is None:
        return ProbeResult(entry, None, why="not installed (make setup)")
    try:
        slope = entry.probe()
    except Exception as exc:  # a broken install is a row of the table, not a traceback
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        return ProbeResult(entry, None, installed_version(entry), why=f"probe failed: {type(exc).__name__}: {first}")
    return ProbeResult(entry, slope, installed_version(entry))


def _not_set_up(backend: str) -> bool:
    """Whether ``backend`` declares an environment of its own that does not exist."""
    from conformance.backends import BackendUnavailable, load

    try:
        environment = getattr(load(backend), "environment", None)
    except BackendUnavailable:
        return False
    return environment is not None and environment.missing() is not None


def probe(entry: DefaultSlope) -> ProbeResult:
    """``entry``'s probe: through its environment's worker when it has one, else in this process."""
    if entry.environment is None or entry.probe is None:
        return probe_here(entry)
    from conformance.backends import BackendUnavailable, default_worker

    try:
        spec = default_worker(entry.environment)
    except BackendUnavailable as exc:
        return ProbeResult(entry, None, why=NOT_SET_UP if _not_set_up(entry.environment) else f"probe failed: {exc}")
    if spec is None:  # the backend runs in-process after all
        return probe_here(entry)
    from conformance.worker.client import WorkerFailure, connect

    try:
        slope, version = connect(spec).probe_default(entry.api)
    except (BackendUnavailable, WorkerFailure) as exc:
        return ProbeResult(entry, None, why=f"probe failed: {exc}")
    return ProbeResult(entry, slope, version)


def probe_all() -> tuple[ProbeResult, ...]:
    return tuple(probe(entry) for entry in DEFAULTS)

"""Live probes of each framework's default LeakyReLU slope, beside the declared table.

A probe calls the API without a slope on x = -1 and reads the slope off the
output; :data:`conformance.reference.defaults.DEFAULTS` says what it should be.
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

from conformance.backends import default_worker, load
from conformance.errors import BackendUnavailable, WorkerFailure
from conformance.extras import install_hint
from conformance.frameworks.environments import SETUP, in_checkout
from conformance.reference.defaults import DEFAULTS, DefaultSlope, entry_for
from conformance.worker.protocol import Message, error_message

_X = -1.0


def _probe_torch_functional() -> float:
    import torch

    return -float(torch.nn.functional.leaky_relu(torch.tensor([_X], dtype=torch.float64))[0])


def _probe_torch_module() -> float:
    import torch

    return -float(torch.nn.LeakyReLU()(torch.tensor([_X], dtype=torch.float64))[0])


def _probe_tf_nn() -> float:
    from conformance.frameworks.tensorflow_backend import tensorflow

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


#: The probe of each API of the table that has one (by ``DefaultSlope.api``).
PROBES: dict[str, Callable[[], float]] = {
    "torch.nn.functional.leaky_relu": _probe_torch_functional,
    "torch.nn.LeakyReLU": _probe_torch_module,
    "tf.nn.leaky_relu": _probe_tf_nn,
    "keras.layers.LeakyReLU": _probe_keras_layer,
    "keras.ops.leaky_relu": _probe_keras_ops,
    "mindspore.ops.leaky_relu": _probe_mindspore_ops,
    "mindspore.nn.LeakyReLU": _probe_mindspore_module,
    "ONNX LeakyRelu": _probe_onnx,
    "jax.nn.leaky_relu": _probe_jax,
    "paddle.nn.functional.leaky_relu": _probe_paddle_functional,
    "paddle.nn.LeakyReLU": _probe_paddle_module,
}

NOT_SET_UP = "not set up"


def not_set_up(environment: str) -> str:
    """A probe's status when ``environment``'s own python is missing, with how to set it up:
    the make target in the repository, the variable to a pip install."""
    how = SETUP if in_checkout() else f"set CONFORMANCE_{environment.upper()}_PYTHON"
    return f"{NOT_SET_UP} ({how})"


def has_probe(entry: DefaultSlope) -> bool:
    return entry.api in PROBES


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
        if not has_probe(self.entry):
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
    if not has_probe(entry):
        return ProbeResult(entry, None)
    if entry.module is None or importlib.util.find_spec(entry.module) is None:
        return ProbeResult(entry, None, why=f"not installed ({install_hint(entry.module or entry.api)})")
    try:
        slope = PROBES[entry.api]()
    except Exception as exc:  # a broken install is a row of the table, not a traceback
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        return ProbeResult(entry, None, installed_version(entry), why=f"probe failed: {type(exc).__name__}: {first}")
    return ProbeResult(entry, slope, installed_version(entry))


def _not_set_up(backend: str) -> bool:
    """Whether ``backend`` declares an environment of its own that does not exist."""
    try:
        environment = getattr(load(backend), "environment", None)
    except BackendUnavailable:
        return False
    return environment is not None and environment.missing() is not None


def probe(entry: DefaultSlope) -> ProbeResult:
    """``entry``'s probe: through its environment's worker when it has one, else in this process."""
    if entry.environment is None or not has_probe(entry):
        return probe_here(entry)
    try:
        spec = default_worker(entry.environment)
    except BackendUnavailable as exc:
        return ProbeResult(entry, None, why=not_set_up(entry.environment) if _not_set_up(entry.environment)
                           else f"probe failed: {exc}")
    if spec is None:  # the backend runs in-process after all
        return probe_here(entry)
    from conformance.worker.client import connect

    try:
        slope, version = connect(spec).probe_default(entry.api)
    except (BackendUnavailable, WorkerFailure) as exc:
        return ProbeResult(entry, None, why=f"probe failed: {exc}")
    return ProbeResult(entry, slope, version)


def probe_all() -> tuple[ProbeResult, ...]:
    return tuple(probe(entry) for entry in DEFAULTS)


def probe_message(api: str) -> Message:
    """A worker's reply to a ``probe``: the default slope of ``api`` measured in this process, and
    its version (``conformance worker`` answers probes with it)."""

    try:
        result = probe_here(entry_for(api))
    except Exception as exc:
        return error_message("error", f"probing {api}: {type(exc).__name__}: {exc}")
    if result.probed is None:
        return error_message("unavailable", f"probing {api}: {result.status}")
    return Message({"type": "probed", "api": api, "slope": result.probed, "version": result.version})

"""Keras ``.keras`` files (their config.json) and TensorFlow SavedModels (saved_model.pb).

Neither is deserialized into a model nor run: a ``.keras`` file is a zip whose
config.json is read as JSON (its ``LeakyReLU`` layers, and its ``PReLU`` layers with the value their
initializer fills the weight with and their ``shared_axes``); a SavedModel's protobuf is parsed (by protobuf alone, with
the fields :mod:`conformance.audit.saved_model_schema` declares) and its graphs (and function
library) searched for ``LeakyRelu`` ops.
"""
from __future__ import annotations

import lzma
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

from conformance.audit.record import STORED, Activation, dynamic, from_default, with_value
from conformance.audit.source import INITIALIZERS, KERAS_PRELU
from conformance.errors import UsageError
from conformance.ingest import bounded

LAYER, ACTIVATION, TF_OP = "keras.layers.LeakyReLU", "keras.ops.leaky_relu", "tf.nn.leaky_relu"
_TF_DTYPES = {1: "float32", 2: "float64", 14: "bfloat16", 19: "float16"}  # tensorflow DataType enum


def _dtype(config: dict) -> Optional[str]:
    """A layer's dtype: a plain name or a DTypePolicy's name."""
    value = config.get("dtype")
    if isinstance(value, dict):
        value = (value.get("config") or {}).get("name")
    return value if isinstance(value, str) else None


def _layer(obj: dict, *, where: str) -> Optional[Activation]:
    """A LeakyReLU layer, or a layer whose ``activation`` is the string "leaky_relu"."""
    config = obj.get("config") if isinstance(obj.get("config"), dict) else {}
    if obj.get("class_name") == "LeakyReLU":
        value = next((config[k] for k in ("negative_slope", "alpha") if isinstance(config.get(k), (int, float))), None)
        if value is None:
            return from_default(where=where, api=LAYER, dtype=_dtype(config))
        return with_value(value, where=where, api=LAYER, origin=STORED, dtype=_dtype(config))
    if obj.get("class_name") == "PReLU":
        return prelu_layer(config, where=where, dtype=_dtype(config))
    if config.get("activation") == "leaky_relu":
        return from_default(where=f"{where} (activation=\"leaky_relu\")", api=ACTIVATION, dtype=_dtype(config))
    return None


def prelu_layer(config: dict, *, where: str, dtype: Optional[str]) -> Activation:
    """A saved Keras PReLU layer: the value its initializer fills the weight with, and its ``shared_axes``
    (the weights themselves are not read: they are not in the config)."""
    initializer = config.get("alpha_initializer")
    value = _saved_initial(initializer)
    shared = config.get("shared_axes")
    arguments = (f"shared_axes={shared}",) if shared is not None else ()
    if value is None:
        found = dynamic(str(initializer), where=where, api=KERAS_PRELU)
    else:
        found = with_value(value, where=where, api=KERAS_PRELU, origin=STORED, dtype=dtype)
    return replace(found, arguments=arguments, dtype=dtype)


def _saved_initial(initializer: Any) -> Optional[float]:
    """The fill value of a serialized initializer (``{"class_name": "Zeros"}``, ``Constant`` with its
    ``value``, or a name); None for any other (a random one has no one value)."""
    if isinstance(initializer, str):
        return INITIALIZERS.get(initializer.lower())
    if not isinstance(initializer, dict):
        return None
    name = str(initializer.get("class_name", "")).lower()
    value = (initializer.get("config") or {}).get("value") if name == "constant" else INITIALIZERS.get(name)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def walk_config(obj: Any, *, path: str = "") -> Iterator[Activation]:
    """Every LeakyReLU in a Keras config tree, named by its layers' names joined with "/"."""
    if isinstance(obj, list):
        for item in obj:
            yield from walk_config(item, path=path)
        return
    if not isinstance(obj, dict):
        return
    name = (obj.get("config") or {}).get("name") if isinstance(obj.get("config"), dict) else None
    here = f"{path}/{name}" if path and name else (name or path)
    found = _layer(obj, where=here or "?") if "class_name" in obj else None
    if found is not None:
        yield found
    for key, value in obj.items():
        if isinstance(value, (dict, list)) and key not in ("build_config", "compile_config"):
            yield from walk_config(value, path=here)


def audit_keras(path: Path) -> list[Activation]:
    """Every LeakyReLU of a ``.keras`` file's config.json."""
    fix = "save the model with model.save('model.keras')"
    try:
        with zipfile.ZipFile(path) as archive:
            text = bounded.read_member(archive, "config.json", limit=bounded.MAX_CONFIG, where=str(path))
    except (OSError, KeyError, zipfile.BadZipFile, EOFError, RuntimeError, NotImplementedError,
            zlib.error, lzma.LZMAError) as exc:
        raise UsageError(f"{path}: not a readable .keras file (a zip holding config.json; "
                         f"{type(exc).__name__}); {fix}") from None
    try:
        config = bounded.parse_json(text.decode("utf-8"), where=f"{path} config.json", fix=fix)
    except UnicodeDecodeError:
        raise UsageError(f"{path}: config.json is not UTF-8 text; {fix}") from None
    return list(walk_config(config))


def _graph_nodes(saved: Any) -> Iterator[tuple[str, Any]]:
    """Every node of every meta graph and of its function library, named ``function/node``."""
    for meta in saved.meta_graphs:
        for node in meta.graph_def.node:
            yield node.name, node
        for function in meta.graph_def.library.function:
            for node in function.node_def:
                yield f"{function.signature.name}/{node.name}", node


def _op(name: str, node: Any) -> Activation:
    dtype = _TF_DTYPES.get(node.attr["T"].type) if "T" in node.attr else "float32"  # T's default, stripped
    if "alpha" not in node.attr:  # SavedModels strip attributes equal to the op's default
        return from_default(where=name, api=TF_OP, dtype=dtype)
    return with_value(node.attr["alpha"].f, where=name, api=TF_OP, origin=STORED, dtype=dtype)


def audit_saved_model(directory: Path) -> list[Activation]:
    """Every LeakyRelu op of a SavedModel directory (its saved_model.pb is parsed, not loaded)."""
    try:
        from conformance.audit.saved_model_schema import saved_model_class
    except ImportError:
        raise UsageError(f"{directory}: reading a SavedModel needs protobuf; "
                         "pip install 'conformance[tensorflow]'") from None
    saved = saved_model_class()()
    try:
        saved.ParseFromString((directory / "saved_model.pb").read_bytes())
    except Exception as exc:  # noqa: BLE001  DecodeError and OSError
        raise UsageError(f"{directory}: saved_model.pb is not a readable SavedModel ({type(exc).__name__})") from None
    return [_op(name, node) for name, node in _graph_nodes(saved) if node.op == "LeakyRelu"]

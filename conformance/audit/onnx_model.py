"""An ONNX model: its LeakyRelu nodes, their ``alpha`` attribute (or the default), the input type.

The model is loaded as a protobuf (external weights are not read) and never run.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

from conformance.audit.record import STORED, Activation, from_default, with_value
from conformance.errors import UsageError

API = "ONNX LeakyRelu"
_NAMES = {1: "float32", 10: "float16", 11: "float64", 16: "bfloat16"}  # TensorProto element types; others by enum name


def _element_types(graph: Any) -> dict[str, str]:
    """Value name -> element type name, from the graph's inputs, outputs and value_info."""
    import onnx

    found = {}
    for value in (*graph.input, *graph.output, *graph.value_info):
        elem = value.type.tensor_type.elem_type
        if elem:
            found[value.name] = _NAMES.get(elem, onnx.TensorProto.DataType.Name(elem).lower())
    return found


def _nodes(graph: Any, *, prefix: str = "") -> Iterator[tuple[str, Any, dict[str, str]]]:
    """Every node of ``graph`` and of its subgraphs (If/Loop bodies), with its graph's types."""
    types = _element_types(graph)
    for i, node in enumerate(graph.node):
        name = f"{prefix}{node.name or f'{node.op_type}#{i}'}"
        yield name, node, types
        for attr in node.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                yield from _nodes(sub, prefix=f"{name}/")


def _activation(name: str, node: Any, *, types: dict[str, str]) -> Activation:
    dtype: Optional[str] = types.get(node.input[0]) if node.input else None
    alpha = [a for a in node.attribute if a.name == "alpha"]
    if not alpha:
        return from_default(where=name, api=API, dtype=dtype)
    return with_value(alpha[0].f, where=name, api=API, origin=STORED, dtype=dtype)


def audit_onnx(path: Path) -> list[Activation]:
    """Every LeakyRelu node of the model at ``path``, in graph order."""
    import onnx

    try:
        model = onnx.load(str(path), load_external_data=False)
        model = onnx.shape_inference.infer_shapes(model)
    except Exception as exc:  # noqa: BLE001  a bad protobuf raises many kinds
        raise UsageError(f"{path}: not a readable ONNX model ({type(exc).__name__}); pass a .onnx file") from None
    return [_activation(name, node, types=types) for name, node, types in _nodes(model.graph)
            if node.op_type == "LeakyRelu" and node.domain in ("", "ai.onnx")]

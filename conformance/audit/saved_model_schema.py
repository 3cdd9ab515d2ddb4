"""The part of TensorFlow's SavedModel protobuf schema that the audit reads, declared here.

TensorFlow's generated ``saved_model_pb2`` cannot be imported without ``import tensorflow``
(seconds of start-up), yet reading a SavedModel's LeakyRelu ops needs only protobuf and these
fields, with their numbers from tensorflow/core/protobuf/saved_model.proto, meta_graph.proto
and tensorflow/core/framework/{graph,function,node_def,op_def,attr_value}.proto.  A field not
declared here (weights, signatures, shapes) is kept by protobuf as an unknown field, unread.
"""
from __future__ import annotations

from functools import cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_PACKAGE = "conformance.audit.tf"
Field = descriptor_pb2.FieldDescriptorProto
_MESSAGES: dict[str, list[tuple[str, int, int, str]]] = {  # message: (field, number, type, message type)
    "SavedModel": [("meta_graphs", 2, Field.TYPE_MESSAGE, "MetaGraphDef")],
    "MetaGraphDef": [("graph_def", 2, Field.TYPE_MESSAGE, "GraphDef")],
    "GraphDef": [("node", 1, Field.TYPE_MESSAGE, "NodeDef"), ("library", 2, Field.TYPE_MESSAGE, "FunctionDefLibrary")],
    "FunctionDefLibrary": [("function", 1, Field.TYPE_MESSAGE, "FunctionDef")],
    "FunctionDef": [("signature", 1, Field.TYPE_MESSAGE, "OpDef"), ("node_def", 3, Field.TYPE_MESSAGE, "NodeDef")],
    "OpDef": [("name", 1, Field.TYPE_STRING, "")],
    "NodeDef": [("name", 1, Field.TYPE_STRING, ""), ("op", 2, Field.TYPE_STRING, ""),
                ("attr", 5, Field.TYPE_MESSAGE, "NodeDef.AttrEntry")],
    "AttrValue": [("f", 4, Field.TYPE_FLOAT, ""), ("type", 6, Field.TYPE_INT32, "")],  # type: a DataType enum
}
_REPEATED = {("SavedModel", "meta_graphs"), ("GraphDef", "node"), ("FunctionDefLibrary", "function"),
             ("FunctionDef", "node_def"), ("NodeDef", "attr")}


def _add_fields(message: descriptor_pb2.DescriptorProto, fields: list[tuple[str, int, int, str]]) -> None:
    for name, number, kind, type_name in fields:
        label = Field.LABEL_REPEATED if (message.name, name) in _REPEATED else Field.LABEL_OPTIONAL
        field = message.field.add(name=name, number=number, type=kind, label=label)
        if type_name:
            field.type_name = f".{_PACKAGE}.{type_name}"


def _attr_entry(node: descriptor_pb2.DescriptorProto) -> None:
    """NodeDef's ``map<string, AttrValue> attr``: protobuf's nested map-entry message."""
    entry = node.nested_type.add(name="AttrEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=Field.TYPE_STRING, label=Field.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=Field.TYPE_MESSAGE, label=Field.LABEL_OPTIONAL,
                    type_name=f".{_PACKAGE}.AttrValue")


@cache
def saved_model_class() -> Any:
    """The message class of a ``saved_model.pb``, reading only the fields declared above."""
    schema = descriptor_pb2.FileDescriptorProto(name="conformance/audit/tf_saved_model.proto",
                                                package=_PACKAGE, syntax="proto3")
    for name, fields in _MESSAGES.items():
        message = schema.message_type.add(name=name)
        _add_fields(message, fields)
        if name == "NodeDef":
            _attr_entry(message)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(schema)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.SavedModel"))

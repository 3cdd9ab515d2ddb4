"""The quantized profiles ``conformance run`` has, and the policy each declares.

Data only (no framework is imported here): the runner of each profile is in
:mod:`conformance.frameworks.quantized_backends`, the rule it computes with in
:mod:`conformance.frameworks.quantized_models`.
"""
from __future__ import annotations

from dataclasses import dataclass

#: the categories every quantized profile may show, within one code of exact: the named
#: rounding and requantization rules its framework computes with
QUANT_ALLOWED: frozenset[str] = frozenset({"rounding", "requantization"})


@dataclass(frozen=True)
class QuantProfile:
    """One quantized profile: its ``quantized_backends.RUNNERS`` entry, the module it needs, and
    the float backend whose selection brings it into a run (TFLite comes with TensorFlow)."""

    runner: str
    module: str
    brought_by: str


SUITE_PROFILES: dict[tuple[str, str], QuantProfile] = {
    ("torch", "vector"): QuantProfile("torch[vector]", "torch", "torch"),
    ("torch", "tail"): QuantProfile("torch[tail]", "torch", "torch"),
    ("tflite", "builtin"): QuantProfile("tflite[builtin]", "tensorflow", "tensorflow"),
    ("tflite", "xnnpack"): QuantProfile("tflite[xnnpack]", "tensorflow", "tensorflow"),
    ("onnxruntime", "qlinear"): QuantProfile("onnxruntime[qlinear]", "onnxruntime", "onnxruntime"),
    ("onnxruntime", "qdq"): QuantProfile("onnxruntime[qdq-off]", "onnxruntime", "onnxruntime"),
}


def quantized_policy() -> dict[str, frozenset[str]]:
    """The policy each quantized profile declares, keyed ``backend[profile]``."""
    return {f"{backend}[{profile}]": QUANT_ALLOWED for backend, profile in SUITE_PROFILES}

"""The PReLU and RReLU rows of ``conformance run``: planned from what each backend declares, run
forward and backward, every difference named (nothing ``unexplained``), no row failing."""
from __future__ import annotations

import pytest

from conformance import prelu_suite
from conformance.backends import get_backend
from conformance.config import default_config
from conformance.ops import ops_of


def backend(name: str):
    if name in ("torch", "tensorflow", "onnxruntime", "jax"):
        pytest.importorskip(name)
    return get_backend(name)


@pytest.mark.parametrize("name", ["torch", "cann", "golden"])
def test_rows_are_planned_from_the_ops_a_backend_declares(name: str):
    found = backend(name)
    specs = prelu_suite.plan_rows({name: found}, directions=("forward", "backward"))
    ops = {s.op for s in specs}
    assert ops == {o for o in ("prelu", "rrelu") if o in ops_of(found)}
    assert all(str(s).startswith(f"{s.label} {s.op} ") for s in specs)


@pytest.mark.parametrize("name", ["torch", "cann", "tensorflow", "onnxruntime", "jax"])
def test_every_row_passes_with_every_difference_named(name: str):
    found = backend(name)
    for spec in prelu_suite.plan_rows({name: found}, directions=("forward", "backward")):
        row = prelu_suite.run_row(spec, found, config=default_config())
        assert row.verdict != "fail", (str(spec), [(f.category, f.summary) for f in row.findings])
        assert "unexplained" not in {f.category for f in row.findings}, str(spec)
        assert row.op == spec.op and row.metrics.elements > 0
        if spec.direction == "backward" and spec.op == "prelu":
            assert any(p.endswith("dweight") for p in row.parts)


def test_the_emulated_kernel_shows_aclnn_prelus_formulation_at_minus_zero():
    found = backend("cann")
    spec = prelu_suite.PreluRowSpec.of(found, "cann", "prelu", "float16", "forward")
    row = prelu_suite.run_row(spec, found, config=default_config())
    assert [f.category for f in row.findings] == ["formulation"] and row.verdict == "warn"


def test_torch_half_precision_dweight_is_a_named_reduction_order():
    found = backend("torch")
    spec = prelu_suite.PreluRowSpec.of(found, "torch", "prelu", "float16", "backward")
    row = prelu_suite.run_row(spec, found, config=default_config())
    orders = [f for f in row.findings if f.category == "reduction-order"]
    assert orders and "shares rounded to the input dtype" in orders[0].summary and not orders[0].gated


def test_keras_prelu_on_tensorflow_is_its_formula_and_its_gradient():
    found = backend("tensorflow")
    spec = prelu_suite.PreluRowSpec.of(found, "tensorflow", "prelu", "float32", "backward")
    row = prelu_suite.run_row(spec, found, config=default_config())
    assert {f.category for f in row.findings} <= {"formulation", "subnormal-flush", "reduction-order"}
    assert any("step" in f.summary for f in row.findings if f.category == "formulation")


def test_the_json_row_says_its_op_only_when_it_is_not_leaky_relu():
    from conformance.metrics import exact as met
    from conformance.records import Row
    from conformance.render.export import row_dict

    key = ("torch", None, None, "float16", "float16", "forward", 0.25)
    prelu_row = row_dict(Row(*key, op="prelu", metrics=met.empty(elements=1), findings=(), verdict="pass"))
    leaky_row = row_dict(Row(*key, metrics=met.empty(elements=1), findings=(), verdict="pass"))
    assert prelu_row["op"] == "prelu" and "op" not in leaky_row
    assert list(prelu_row)[:4] == ["backend", "profile", "variant", "op"]

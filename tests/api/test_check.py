"""``conformance.check``: the same rows and verdicts as ``conformance run``; Report.to_json.

Both run on the suite's small batches (``small_batches``): what they show is that the API and
the CLI give the same rows, verdicts and agreements, not the inputs' size."""
from __future__ import annotations

import json
import re

import pytest

import conformance
from conformance.errors import UsageError
from conformance.judge.gate import GateConfig
from conformance.render import export
from examples import my_kernel
from tests.helpers import run_cli

pytestmark = pytest.mark.usefixtures("small_batches")
FEW = 5  # hypothesis examples per batch: the rows compared are the same whatever their number
_RUN_FIELDS = ("backend", "profile", "variant", "dtype", "out_dtype", "direction", "alpha", "elements",
               "mismatches", "max_ulp", "verdict")


def _rows(doc: dict) -> list[tuple]:
    return [tuple(json.dumps(r[k]) for k in _RUN_FIELDS) + (tuple(f["category"] for f in r["findings"]),)
            for r in doc["rows"]]


def test_check_gives_the_cli_rows_for_a_backend_name(tmp_path, capsys) -> None:
    out = tmp_path / "cli.json"
    code = run_cli(["run", "--backend", "cann", "--variant", "default-slope", "--dtype", "fp16", "--alpha", "0.2",
                    "--max-examples", str(FEW), "--json", str(out), "--results-dir", str(tmp_path), "-q"], capsys).code
    report = conformance.check("cann", variant="default-slope", dtypes=["float16"], alphas=[0.2], max_examples=FEW)
    assert code == 1 and report.verdict == "fail"
    assert _rows(json.loads(report.to_json())) == _rows(json.loads(out.read_text()))


def test_report_json_is_the_schema_and_carries_the_verdict() -> None:
    report = conformance.check(my_kernel.max_leaky_relu, dtypes=["float16"], alphas=[0.2, 1.5],
                               directions=["forward"], max_examples=FEW)
    doc = json.loads(report.to_json())
    assert export.validate(doc, export.SCHEMA) == []
    assert doc["verdict"] == report.verdict == "fail"
    assert [r["verdict"] for r in doc["rows"]] == [r.verdict for r in report.rows] == ["pass", "fail"]
    assert "Mismatched elements: " in report.message and "formulation x" in report.message


def test_a_seed_changes_the_random_inputs_but_not_the_verdict() -> None:
    a = conformance.check(my_kernel.exact_leaky_relu, dtypes=["float32"], alphas=[0.1], directions=["forward"],
                          max_examples=FEW)
    b = conformance.check(my_kernel.exact_leaky_relu, dtypes=["float32"], alphas=[0.1], directions=["forward"],
                          seed=7, max_examples=FEW)
    assert a.verdict == b.verdict == "pass" and (a.seed, b.seed) == (0, 7)


def test_nothing_to_run_is_a_usage_error_that_says_why() -> None:
    with pytest.raises(UsageError, match="has no backward"):
        conformance.check(my_kernel.max_leaky_relu, dtypes=["float16"], alphas=[0.2], directions=["backward"])


def test_an_unknown_variant_is_a_usage_error_naming_the_choices() -> None:
    with pytest.raises(UsageError, match="variant of cann: 'nope' is unknown; choose from reference"):
        conformance.check("cann", variant="nope", dtypes=["float16"], alphas=[0.2])
    with pytest.raises(UsageError, match="profile of torch: 'x' is unknown; choose from none"):
        conformance.check("torch", profile="x", dtypes=["float16"], alphas=[0.2])


@pytest.mark.parametrize("alphas", [[float("nan")], [float("inf"), 0.2], []])
def test_a_slope_that_is_not_finite_is_a_usage_error(alphas) -> None:
    with pytest.raises(UsageError, match="alphas must be finite slopes"):
        conformance.check(my_kernel.exact_leaky_relu, dtypes=["float16"], alphas=alphas)


def test_a_config_file_sets_the_gate(tmp_path) -> None:
    strict = tmp_path / "gate.toml"
    strict.write_text("max_ulp = 0\n")
    args = dict(dtypes=["float16"], alphas=[0.1], directions=["forward"], max_examples=FEW)
    assert conformance.check(my_kernel.naive_leaky_relu, **args).verdict == "pass"  # 1-ULP alpha-precision warns
    assert conformance.check(my_kernel.naive_leaky_relu, config=strict, **args).verdict == "fail"


def test_a_gate_config_policy_may_allow_a_kernels_categories() -> None:
    allowed = frozenset({"formulation"})
    args = dict(dtypes=["float16"], alphas=[1.5], directions=["forward"], max_examples=FEW)
    assert conformance.check(my_kernel.max_leaky_relu, **args).verdict == "fail"
    report = conformance.check(my_kernel.max_leaky_relu, config=GateConfig(policy={"max_leaky_relu": allowed}), **args)
    assert report.verdict == "pass" and [r.verdict for r in report.rows] == ["warn"]


def test_check_takes_a_backend_object_under_its_name() -> None:
    from conformance.adapters import from_numpy

    kernel = from_numpy(my_kernel.exact_leaky_relu, dtypes=["float16"], name="mine")
    report = conformance.check(kernel, alphas=[0.2, 1.5], max_examples=FEW)
    assert [(r.backend, r.direction, r.verdict) for r in report.rows] == [("mine", "forward", "pass")] * 2
    assert {why for _, why in report.skipped} == {"mine has no backward (pass backward=...)"}


# ----------------------------------------------------------------------------- reference=

def _agreement_rows(doc: dict) -> list[tuple]:
    return [tuple(json.dumps(a[k]) for k in sorted(a)) for a in doc["agreement"]]


def test_reference_gives_the_agreement_run_reference_gives(tmp_path, capsys) -> None:
    out = tmp_path / "cli.json"
    code = run_cli(["run", "--backend", "cann", "--reference", "torch", "--dtype", "fp16", "--alpha", "0.2",
                    "--direction", "forward", "--max-examples", str(FEW), "--json", str(out), "--results-dir",
                    str(tmp_path), "-q"], capsys).code
    report = conformance.check("cann", reference="torch", dtypes=["float16"], alphas=[0.2], directions=["forward"],
                               max_examples=FEW)
    cli_doc, api_doc = json.loads(out.read_text()), json.loads(report.to_json())
    assert code == 0 and report.verdict == "pass" and export.validate(api_doc, export.SCHEMA) == []
    assert _rows(api_doc) == _rows(cli_doc) and [r.backend for r in report.rows] == ["torch", "cann"]
    assert _agreement_rows(api_doc) == _agreement_rows(cli_doc) and len(report.agreement) == 1
    (found,) = report.agreement
    assert (found.reference, found.backend, found.identical) == ("torch", "cann", False)  # fp16(alpha) on 910B
    assert found.causes[0] == "alpha-precision" and [r.backend for r in report.subject] == ["cann"]


def test_a_kernel_against_a_reference_is_identical_or_says_why_it_differs() -> None:
    options = dict(dtypes=["float16"], alphas=[0.1], directions=["forward"], reference="golden", max_examples=FEW)
    exact = conformance.check(my_kernel.exact_leaky_relu, **options)
    naive = conformance.check(my_kernel.naive_leaky_relu, **options)
    assert [(a.reference, a.backend, a.identical) for a in exact.agreement] == [("golden", "exact_leaky_relu", True)]
    (differs,) = naive.agreement
    assert not differs.identical and differs.differing > 0 and differs.causes == ("alpha-precision",)
    assert [r.backend for r in naive.subject] == ["naive_leaky_relu"] and naive.references == ("golden",)


def test_several_references_are_each_compared_as_run_compares_them() -> None:
    listed = conformance.check(my_kernel.exact_leaky_relu, dtypes=["float32"], alphas=[0.2],
                               directions=["forward"], reference=["golden", "torch"], max_examples=FEW)
    joined = conformance.check(my_kernel.exact_leaky_relu, dtypes=["float32"], alphas=[0.2],
                               directions=["forward"], reference="golden,torch", max_examples=FEW)
    pairs = [(a.reference, a.backend) for a in listed.agreement]
    assert pairs == [(a.reference, a.backend) for a in joined.agreement]
    assert sorted(pairs) == [("golden", "exact_leaky_relu"), ("golden", "torch"), ("torch", "exact_leaky_relu")]


def test_no_reference_leaves_the_report_without_agreement() -> None:
    report = conformance.check(my_kernel.exact_leaky_relu, dtypes=["float32"], alphas=[0.2], directions=["forward"],
                               max_examples=FEW)
    assert report.agreement == () and "agreement" not in json.loads(report.to_json())


@pytest.mark.parametrize("reference, says", [("nope", "reference: unknown backend 'nope'"),
                                             ("", "reference='': pass a backend name"),
                                             ([3], "reference=[3]: pass a backend name")])
def test_a_bad_reference_is_a_usage_error_naming_the_fix(reference, says: str) -> None:
    with pytest.raises(UsageError, match=re.escape(says)):
        conformance.check(my_kernel.exact_leaky_relu, dtypes=["float32"], alphas=[0.2], reference=reference)

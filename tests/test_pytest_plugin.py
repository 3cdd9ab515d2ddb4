"""The pytest plugin: a user's test run with the ``leakyrelu_conformance`` fixture (pytester).

The plugin is loaded with ``-p conformance.pytest_plugin``: an editable install made
before the ``pytest11`` entry point existed does not have it (the entry point is
named after the module, so both ways register it once).  The users' runs keep the suite's
small batches (``small_batches``) and five hypothesis examples: what they show is the plugin's
verdicts and items.
"""
from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from conformance.render import export

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.usefixtures("small_batches")  # the users' runs: their rows' verdicts, not sizes
ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ("-p", "conformance.pytest_plugin")
KERNELS = '''
import numpy as np
from examples.my_kernel import exact_leaky_relu

def max_kernel(x, alpha):  # wrong for alpha > 1
    return np.maximum(x, (x.astype(np.float64) * alpha).astype(x.dtype))

def test_exact(leakyrelu_conformance):
    leakyrelu_conformance(exact_leaky_relu, dtypes=["float16"], alphas=[0.2], directions=["forward"], max_examples=5)

def test_defective(leakyrelu_conformance):
    leakyrelu_conformance(max_kernel, dtypes=["float16"], alphas=[1.5], directions=["forward"], max_examples=5)
'''


@pytest.fixture(scope="module", autouse=True)
def _compiled_before_pytester() -> None:
    """The compiled golden loaded in this process first: pytester's in-process runs drop the
    modules they import, and numba cannot register its typing of a re-imported module twice."""
    import conformance
    from examples.my_kernel import exact_leaky_relu

    conformance.check(exact_leaky_relu, dtypes=["float16"], alphas=[0.2], directions=["forward"], max_examples=1)


def _run(pytester, *args: str):
    pytester.syspathinsert(ROOT)
    pytester.makepyfile(test_kernels=KERNELS)
    return pytester.runpytest(*PLUGIN, *args)


def test_a_correct_kernel_passes_and_a_defective_one_fails_with_its_categories(pytester) -> None:
    result = _run(pytester)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_defective*",
                                 "*LeakyReLU conformance failed for 1 of 1 rows*",
                                 "*max_kernel fp16 forward alpha=1.5*",
                                 "Mismatched elements: * / * (*%)",
                                 "formulation x*: computed as max(x, a*x)"])


def test_the_json_option_writes_every_checked_row(pytester) -> None:
    out = pytester.path / "report.json"
    _run(pytester, "--leakyrelu-json", str(out)).assert_outcomes(passed=1, failed=1)
    doc = json.loads(out.read_text())
    assert export.validate(doc, export.SCHEMA) == []
    assert doc["verdict"] == "fail"
    assert [(r["backend"], r["verdict"]) for r in doc["rows"]] == [("exact_leaky_relu", "pass"),
                                                                    ("max_kernel", "fail")]


def test_the_fixture_json_argument_writes_that_check(pytester) -> None:
    pytester.syspathinsert(ROOT)
    pytester.makepyfile('''
from examples.my_kernel import exact_leaky_relu

def test_one(leakyrelu_conformance, tmp_path_factory):
    leakyrelu_conformance(exact_leaky_relu, dtypes=["float32"], alphas=[0.3], directions=["forward"],
                          json="one.json", max_examples=5)
''')
    pytester.runpytest(*PLUGIN).assert_outcomes(passed=1)
    doc = json.loads((pytester.path / "one.json").read_text())
    assert doc["verdict"] == "pass" and [r["dtype"] for r in doc["rows"]] == ["float32"]


def test_a_usage_error_fails_the_test_in_one_line(pytester) -> None:
    pytester.makepyfile('''
def test_bad(leakyrelu_conformance):
    leakyrelu_conformance(lambda x, a: x, dtypes=["float8"])
''')
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*leakyrelu_conformance: dtype 'float8' is unknown*"])
    assert "Traceback" not in result.stdout.str()


def test_pyproject_declares_the_pytest11_entry_point() -> None:
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["pytest11"]
    assert table == {"conformance.pytest_plugin": "conformance.pytest_plugin"}


def test_the_example_test_file_passes(pytester) -> None:
    pytester.syspathinsert(ROOT)
    pytester.runpytest(*PLUGIN, str(ROOT / "examples" / "test_my_kernel.py")).assert_outcomes(passed=2)


ROW_TESTS = '''
import numpy as np
from conformance.pytest_plugin import conformance_rows, generate_rows
from examples.my_kernel import exact_leaky_relu

def max_kernel(x, alpha):  # wrong for alpha > 1
    return np.maximum(x, (x.astype(np.float64) * alpha).astype(x.dtype))

@conformance_rows(max_kernel, dtypes=["float16", "bfloat16"], alphas=[0.2, 1.5], directions=["forward"],
                  max_examples=5)
def test_row(leakyrelu_row):
    leakyrelu_row()

def pytest_generate_tests(metafunc):
    if metafunc.function.__name__ == "test_generated":
        generate_rows(metafunc, exact_leaky_relu, dtypes=["float16"], alphas=[0.3], directions=["forward", "backward"],
                      max_examples=5)

def test_generated(leakyrelu_row):
    leakyrelu_row()
'''


def _run_rows(pytester, *args: str):
    pytester.syspathinsert(ROOT)
    pytester.makepyfile(test_rows=ROW_TESTS)
    return pytester.runpytest(*PLUGIN, *args)


def test_each_row_is_its_own_test_item_with_a_readable_id(pytester) -> None:
    result = _run_rows(pytester, "-v")
    result.assert_outcomes(passed=3, failed=2, skipped=1)  # exact_leaky_relu has no backward: skipped
    result.stdout.fnmatch_lines_random(["*test_row?max_kernel fp16 forward alpha=0.2? PASSED*",
                                        "*test_row?max_kernel fp16 forward alpha=1.5? FAILED*",
                                        "*test_row?max_kernel bf16 forward alpha=0.2? PASSED*",
                                        "*test_row?max_kernel bf16 forward alpha=1.5? FAILED*",
                                        "*test_generated?exact_leaky_relu fp16 forward alpha=0.3? PASSED*",
                                        "*test_generated?exact_leaky_relu fp16 backward alpha=0.3? SKIPPED*"])


def test_a_failing_row_fails_with_its_message_and_categories(pytester) -> None:
    result = _run_rows(pytester, "-k", "fp16 and 1.5")
    result.assert_outcomes(failed=1, deselected=5)
    result.stdout.fnmatch_lines(["*max_kernel fp16 forward alpha=1.5*",
                                 "Mismatched elements: * / * (*%)", "formulation x*"])


def test_k_selects_rows_by_the_short_dtype_name_and_direction(pytester) -> None:
    _run_rows(pytester, "-k", "bf16").assert_outcomes(passed=1, failed=1, deselected=4)
    _run_rows(pytester, "-k", "fp16 and backward").assert_outcomes(skipped=1, deselected=5)


def test_the_row_fixture_without_parametrization_says_how_to_use_it(pytester) -> None:
    pytester.makepyfile('''
def test_bare(leakyrelu_row):
    leakyrelu_row()
''')
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*leakyrelu_row: parametrize the test with @conformance_rows(fn, ...)*"])


def test_row_items_feed_the_session_json_report(pytester) -> None:
    out = pytester.path / "rows.json"
    _run_rows(pytester, "-k", "max_kernel", "--leakyrelu-json", str(out)).assert_outcomes(passed=2, failed=2,
                                                                                         deselected=2)
    doc = json.loads(out.read_text())
    assert export.validate(doc, export.SCHEMA) == []
    assert sorted((r["dtype"], r["alpha"]["value"], r["verdict"]) for r in doc["rows"]) == [
        ("bfloat16", 0.2, "pass"), ("bfloat16", 1.5, "fail"), ("float16", 0.2, "pass"), ("float16", 1.5, "fail")]


# ----------------------------------------------------------------------------- reference=

REFERENCE_TESTS = '''
from conformance.pytest_plugin import conformance_rows
from examples.my_kernel import exact_leaky_relu, naive_leaky_relu

def test_fixture_same_bits(leakyrelu_conformance):
    report = leakyrelu_conformance(exact_leaky_relu, dtypes=["float16"], alphas=[0.1], directions=["forward"],
                                   reference="golden", max_examples=5)
    assert [(a.reference, a.backend, a.identical) for a in report.agreement] == [
        ("golden", "exact_leaky_relu", True)]

@conformance_rows(naive_leaky_relu, dtypes=["float16"], alphas=[0.1], directions=["forward"], reference="golden",
                  max_examples=5)
def test_row_against_golden(leakyrelu_row):
    row = leakyrelu_row()
    assert row.backend == "naive_leaky_relu"
    (found,) = leakyrelu_row.report.agreement
    assert not found.identical and found.causes == ("alpha-precision",), found.why
'''


def test_reference_in_the_fixture_and_the_marker_gives_the_agreement(pytester) -> None:
    pytester.syspathinsert(ROOT)
    pytester.makepyfile(test_reference=REFERENCE_TESTS)
    out = pytester.path / "agree.json"
    pytester.runpytest(*PLUGIN, "--leakyrelu-json", str(out)).assert_outcomes(passed=2)
    doc = json.loads(out.read_text())
    assert export.validate(doc, export.SCHEMA) == []
    assert [(r["backend"], r["verdict"]) for r in doc["rows"]] == [
        ("golden", "pass"), ("exact_leaky_relu", "pass"), ("golden", "pass"), ("naive_leaky_relu", "warn")]
    assert [(a["backend"], a["identical"]) for a in doc["agreement"]] == [
        ("exact_leaky_relu", True), ("naive_leaky_relu", False)]


def test_a_session_without_reference_writes_no_agreement(pytester) -> None:
    out = pytester.path / "report.json"
    _run(pytester, "--leakyrelu-json", str(out)).assert_outcomes(passed=1, failed=1)
    assert "agreement" not in json.loads(out.read_text())

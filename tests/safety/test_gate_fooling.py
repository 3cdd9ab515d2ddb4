"""A wrong kernel never passes the gate: inputs written by a backend, exits raised by it, empty
inputs, audits that read nothing, and a report that records the configuration it was judged under."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from conformance import suite
from conformance.config import default_config
from conformance.render import export
from tests.helpers import assert_usage_error, run_cli

ONE_ROW = ["--dtype", "fp16", "--alpha", "0.2", "--direction", "forward", "--max-examples", "5"]

_BACKEND = '''
import numpy as np
from conformance.records import BackendResult
from conformance.reference import golden


class Backend:
    name, profile, variant = "mine", None, None

    def supports(self, dtype, out_dtype, direction):
        return dtype == out_dtype == "float16"

    def forward(self, x, alpha, *, out_dtype=None):
{body}

    def backward(self, dy, x, alpha, *, out_dtype=None):
        return BackendResult(golden.backward(dy, x, alpha))


def backend():
    return Backend()
'''

# A kernel that writes ReLU into its input and returns it: golden of the written x agrees.
RELU_IN_PLACE = "        np.maximum(x, 0, out=x)\n        return BackendResult(x)"
# A kernel whose output is right but which leaves ReLU in its input behind.
RIGHT_BUT_WRITES = ("        y = golden.forward(x, alpha)\n        np.maximum(x, 0, out=x)\n"
                    "        return BackendResult(y)")


def _kernel(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(_BACKEND.format(body=body))
    return f"{path}:backend"


def _report(tmp_path: Path, *backends: str) -> tuple[list[str], Path]:
    """The ``run`` argv of one row per backend with a JSON report, and the report's path."""
    out = tmp_path / "r.json"
    argv = ["run", *(a for b in backends for a in ("--backend", b)), *ONE_ROW, "--json", str(out),
            "--results-dir", str(tmp_path / "res"), "-q"]
    return argv, out


@pytest.mark.parametrize("body, categories", [
    (RELU_IN_PLACE, {"input-modified", "alpha-mismatch"}),
    (RIGHT_BUT_WRITES, {"input-modified"}),
])
def test_a_backend_that_writes_into_its_input_fails_its_row(tmp_path: Path, capsys, body: str,
                                                             categories: set) -> None:
    argv, out = _report(tmp_path, _kernel(tmp_path, f"k{len(body)}", body))
    result = run_cli(argv, capsys)
    assert result.code == 1, result.text
    (row,) = json.loads(out.read_text())["rows"]
    failing = {f["category"] for f in row["findings"] if not f["allowed"]}
    assert row["verdict"] == "fail" and categories <= failing


def test_a_wrong_kernel_after_a_writing_one_still_fails(tmp_path: Path, capsys) -> None:
    """The second backend gets the untouched batch: its wrong slope is seen."""
    writer = _kernel(tmp_path, "writer", RELU_IN_PLACE)
    wrong = _kernel(tmp_path, "wrong", "        return BackendResult(golden.forward(x, 0.25))")
    argv, out = _report(tmp_path, writer, wrong)
    assert run_cli(argv, capsys).code == 1
    rows = json.loads(out.read_text())["rows"]
    assert [r["verdict"] for r in rows] == ["fail", "fail"]
    assert "input-modified" not in {f["category"] for f in rows[1]["findings"]}
    assert "alpha-mismatch" in {f["category"] for f in rows[1]["findings"]}


def test_golden_is_computed_from_an_untouched_copy() -> None:
    class Writer:
        name, profile, variant = "writer", None, None

        def supports(self, *_: object) -> bool:
            return True

        def forward(self, x, alpha, *, out_dtype=None):
            from conformance.reference import golden
            y = golden.forward(x, alpha)
            x[...] = 0
            return suite.BackendResult(y)

    x = np.array([-1.0, 2.0, -3.0], np.float16)
    spec = suite.RowSpec("writer", None, None, "float16", "float16", "forward", 0.2, given=Writer())
    row = suite.run_batch(spec, suite.InputBatch("t", x), config=default_config())
    assert np.array_equal(x, np.array([-1.0, 2.0, -3.0], np.float16))  # the batch is untouched
    assert [f.category for f in row.findings] == ["input-modified"] and row.verdict == "fail"
    assert row.metrics.mismatches == 0  # its output is judged against golden of the original x


@pytest.mark.parametrize("raising", ["raise SystemExit(0)", "import sys; sys.exit()", "raise KeyboardInterrupt"])
def test_a_backend_that_exits_or_interrupts_in_a_call_fails_its_row(tmp_path: Path, capsys,
                                                                    raising: str) -> None:
    argv, out = _report(tmp_path, _kernel(tmp_path, f"x{abs(hash(raising))}", f"        {raising}"))
    result = run_cli(argv, capsys)
    assert result.code == 1, result.text
    (row,) = json.loads(out.read_text())["rows"]
    assert row["verdict"] == "fail" and row["findings"][0]["category"] == "rejected-input"
    assert "the backend raised" in row["findings"][0]["summary"] and "Traceback" not in result.text


@pytest.mark.parametrize("target", ["sys:exit", "KERNEL_EXITS"])
def test_exit_at_load_time_is_exit_2(tmp_path: Path, capsys, target: str) -> None:
    if target == "KERNEL_EXITS":
        kernel = tmp_path / "exits_kernel.py"
        kernel.write_text(textwrap.dedent("""
            import sys
            def main():
                return 0
            sys.exit(main())
        """))
        target = f"{kernel}:main"
    result = run_cli(["run", "--backend", target, *ONE_ROW, "-q"], capsys, cwd=tmp_path)
    assert_usage_error(result, mentions="sys.exit(")


def test_audit_of_sys_exit_is_exit_2(tmp_path: Path, capsys) -> None:
    assert_usage_error(run_cli(["audit", "sys:exit"], capsys, cwd=tmp_path), mentions="sys.exit(")


def test_compare_of_empty_arrays_is_exit_2(tmp_path: Path, capsys) -> None:
    np.save(tmp_path / "x.npy", np.zeros(0, np.float16))
    np.save(tmp_path / "y.npy", np.zeros(0, np.float16))
    result = run_cli(["compare", "--x", "x.npy", "--y", "y.npy", "--alpha", "0.2"], capsys, cwd=tmp_path)
    assert_usage_error(result, mentions="holds no elements")


@pytest.mark.parametrize("name, content", [("empty.onnx", b""), ("nothing.py", b"x = 1\n")])
def test_an_audit_that_reads_no_activation_is_no_pass(tmp_path: Path, capsys, name: str, content: bytes) -> None:
    (tmp_path / name).write_bytes(content)
    result = run_cli(["audit", name], capsys, cwd=tmp_path)
    assert result.code == 2 and "PASS:" not in result.out and "Traceback" not in result.text
    assert len(result.err.strip().splitlines()) == 1


def test_a_savedmodel_with_an_unreadable_pb_is_exit_2(tmp_path: Path, capsys) -> None:
    (tmp_path / "sm").mkdir()
    (tmp_path / "sm" / "saved_model.pb").write_bytes(b"\x00not a protobuf\xff" * 3)
    result = run_cli(["audit", "sm"], capsys, cwd=tmp_path)
    assert result.code == 2 and "PASS:" not in result.out and "Traceback" not in result.text
    assert len(result.err.strip().splitlines()) == 1


SWEEP_ONE = ["--dtype", "fp16", "--range", "0x8000:0x8100", "--workers", "1", "--store", "s.sqlite"]


@pytest.mark.parametrize("command", [["run", *ONE_ROW], ["sweep", *SWEEP_ONE]], ids=["run", "sweep"])
def test_the_report_records_the_gate_configuration(tmp_path: Path, capsys, command: list[str]) -> None:
    config = tmp_path / "gate.toml"
    config.write_text("max_ulp = 3\n[tolerances]\nfloat16 = { rtol = 1e300, atol = 1e300 }\n"
                      '[policy]\ngolden = ["rounding"]\n')
    out = tmp_path / "r.json"
    result = run_cli([*command, "--backend", "golden", "--config", str(config), "--json", str(out), "-q"],
                     capsys, cwd=tmp_path)
    assert result.code == 0, result.text
    doc = json.loads(out.read_text())
    assert export.validate(doc, export.SCHEMA) == []
    recorded = doc["config"]
    assert recorded["tolerances"]["float16"] == {"rtol": 1e300, "atol": 1e300}
    assert recorded["max_ulp"] == 3 and recorded["policy"]["golden"] == ["rounding"]
    assert recorded["sources"] == [str(config)]


def test_a_config_that_the_schema_refuses_is_caught() -> None:
    doc = {"schema": export.SCHEMA_ID, "verdict": "pass", "seed": 0, "versions": {}, "rows": [],
           "config": {"tolerances": {"float16": {"rtol": "big"}}, "max_ulp": 1, "strict_zeros": False,
                      "policy": {}, "sources": []}}
    assert export.validate(doc, export.SCHEMA) != []


def test_the_api_report_records_its_gate_configuration() -> None:
    from conformance import api
    from conformance.judge.gate import GateConfig

    report = api.check("golden", dtypes=["float16"], alphas=[0.2], directions=["forward"], max_examples=5,
                       config=GateConfig(max_ulp=7))
    doc = report.to_dict()
    assert doc["config"]["max_ulp"] == 7 and export.validate(doc, export.SCHEMA) == []


def test_a_sweep_backend_that_writes_into_its_input_fails(tmp_path: Path, capsys, monkeypatch) -> None:
    from conformance.frameworks.golden_backend import GoldenBackend
    from conformance.reference import golden

    def right_but_writes(self, x, alpha, *, out_dtype=None):
        y = golden.forward(x, alpha, out_dtype=out_dtype)
        np.maximum(x, 0, out=x)
        return suite.BackendResult(y)

    monkeypatch.setattr(GoldenBackend, "forward", right_but_writes)
    out = tmp_path / "sweep.json"
    result = run_cli(["sweep", "--backend", "golden", "--dtype", "fp16", "--range", "0x8000:0x8100",
                      "--workers", "1", "--store", str(tmp_path / "s.sqlite"), "--json", str(out), "-q"], capsys)
    assert result.code == 1, result.text
    (row,) = json.loads(out.read_text())["rows"]
    assert row["verdict"] == "fail" and "input-modified" in {f["category"] for f in row["findings"]}

"""Every report says where its bits were made: the frameworks that ran, the CPU's floating-point
features, the flush-to-zero / denormals-are-zero state measured on the thread, and what a worker
said of its own machine and device."""
from __future__ import annotations

import json
import shlex
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conformance import machine
from conformance.render.export import SCHEMA, validate
from conformance.worker import hello as worker_hello
from conformance.worker import server
from tests.helpers import run_cli

X86 = """processor\t: 0
model name\t: Some CPU @ 3.0GHz
flags\t\t: fpu sse sse2 avx avx2 fma f16c avx512f avx512_bf16 amx_tile

processor\t: 1
flags\t\t: fpu
"""
ARM = "processor\t: 0\nFeatures\t: fp asimd fphp asimdhp bf16 sve\nCPU implementer\t: 0x41\n"
SELECTION = ["--backend", "golden", "--dtype", "fp16", "--direction", "forward", "--alpha", "0.2",
             "--max-examples", "2", "--seed", "3"]


def test_the_cpu_flags_that_change_floats_in_the_table_s_order(tmp_path: Path) -> None:
    (tmp_path / "x86").write_text(X86)
    (tmp_path / "arm").write_text(ARM)
    assert machine.cpu_flags(path=tmp_path / "x86") == ["sse2", "avx", "avx2", "fma", "f16c", "avx512f",
                                                         "avx512_bf16", "amx_tile"]
    assert machine.cpu_name(path=tmp_path / "x86") == "Some CPU @ 3.0GHz"
    assert machine.cpu_flags(path=tmp_path / "arm") == ["fphp", "asimdhp", "bf16", "sve"]


def test_off_linux_the_flags_are_unknown_and_the_rest_is_still_said(tmp_path: Path) -> None:
    found = machine.describe(path=tmp_path / "no-cpuinfo")
    assert found["cpu_flags"] is None and set(found) == set(machine.FIELDS)
    assert "cpu flags unknown" in machine.summary_line(found, versions={})


def test_ftz_and_daz_are_measured_on_the_thread() -> None:
    torch = pytest.importorskip("torch")
    assert (machine.flushes_results(), machine.zeroes_inputs()) == (False, False)
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU cannot flush denormals")
    try:
        assert (machine.flushes_results(), machine.zeroes_inputs()) == (True, True)
        assert "FTZ on, DAZ on" in machine.summary_line(machine.describe(), versions={})
    finally:
        torch.set_flush_denormal(False)
    assert not machine.flushes_results()


def test_a_run_reports_its_environment_in_json_junit_and_one_console_line(tmp_path: Path, capsys) -> None:
    result = run_cli(["run", *SELECTION, "--json", "r.json", "--junit", "r.xml"], capsys, cwd=tmp_path)
    assert result.code in (0, 1), result.text  # the verdict is not what this test is about
    doc = json.loads((tmp_path / "r.json").read_text())
    assert validate(doc["environment"], SCHEMA["properties"]["environment"]) == []
    assert doc["environment"]["flush_to_zero"] is False and doc["environment"]["machine"]
    words = " ".join(result.out.split())  # the line wraps at the console's width
    assert words.count("environment: ") == 1 and "FTZ off, DAZ off" in words.split("environment: ")[1]
    props = {p.get("name"): p.get("value") for p in ET.parse(tmp_path / "r.xml").iter("property")}
    assert props["environment"].startswith("environment: ") and "DAZ" in props["environment"]


def test_quiet_prints_no_environment_line(tmp_path: Path, capsys) -> None:
    result = run_cli(["run", *SELECTION, "-q"], capsys, cwd=tmp_path)
    assert result.code in (0, 1) and "environment:" not in result.out


def test_a_worker_says_what_it_runs_on_and_the_report_keeps_it(tmp_path: Path, capsys) -> None:
    worker = f"{shlex.quote(sys.executable)} -m conformance worker --backend golden"
    result = run_cli(["run", *SELECTION, "--worker", worker, "--json", "r.json"], capsys, cwd=tmp_path)
    assert result.code in (0, 1), result.text
    doc = json.loads((tmp_path / "r.json").read_text())
    assert validate(doc["environment"], SCHEMA["properties"]["environment"]) == []
    (own,) = doc["environment"]["workers"].values()
    assert set(machine.FIELDS) <= set(own) and own["flush_to_zero"] is False
    assert "worker golden: " in result.out


def test_a_worker_s_machine_is_cleaned_before_it_is_believed() -> None:
    said = {"platform": "Linux\x1b[31m", "machine": "x86_64", "cpu": None, "cpu_flags": ["avx2", 7] * 100,
            "flush_to_zero": "yes", "denormals_are_zero": True, "device": "npu:0", "secret": "x"}
    clean = worker_hello.clean_machine(said)
    assert "\x1b" not in clean["platform"] and "secret" not in clean
    assert clean["cpu_flags"] == ["avx2"] * 32 and clean["flush_to_zero"] is None
    assert clean["denormals_are_zero"] is True and clean["device"] == "npu:0"
    assert worker_hello.clean_machine("nothing") == {}


def test_the_hello_carries_the_worker_s_machine_and_device() -> None:
    class OnDevice:
        device = "npu:0"

    said = server.own_machine(OnDevice())  # type: ignore[arg-type]
    assert said["device"] == "npu:0" and set(machine.FIELDS) <= set(said)

"""`compare --msprobe DEVICE_DIR --reference-msprobe BENCHMARK_DIR`: msprobe's two-dump workflow on
a pair of real mindstudio-probe dumps (tests/fixtures/msprobe/make_dump.py made both).

``leaky3`` is the device run (its last call in fp16) and ``leaky3_fp32`` the benchmark run of the
same model and input, its last call kept in fp32: the first two forward calls have the same bits,
the last call's dtypes differ, and the backward calls before it get a different dy.  Defects,
missing partners and renumbered calls are seeded into copies.
"""
from __future__ import annotations

import csv
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conformance import interrupts
from conformance.commands import compare_msprobe
from conformance.render.csv_report import HEADER, INTERRUPTED
from conformance.render.export import SCHEMA, validate
from tests.helpers import assert_usage_error, run_cli

torch = pytest.importorskip("torch")

FIXTURES = Path(__file__).parents[1] / "fixtures" / "msprobe"
MSPROBE_COLUMNS = ("Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
                   "Five Thousandths Err Ratio")


@pytest.fixture
def device(tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURES / "leaky3", tmp_path / "device"))


@pytest.fixture
def benchmark(tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURES / "leaky3_fp32", tmp_path / "benchmark"))


def _proc(root: Path) -> Path:
    (found,) = root.glob("step*/proc*")
    return found


def _rewrite(root: Path, edit) -> None:
    file = _proc(root) / "dump.json"
    doc = json.loads(file.read_text())
    edit(doc)
    file.write_text(json.dumps(doc))


def _tensor(root: Path, name: str) -> torch.Tensor:
    return torch.load(_proc(root) / "dump_tensor_data" / name, weights_only=True)


def _save(root: Path, name: str, value: torch.Tensor) -> None:
    torch.save(value, _proc(root) / "dump_tensor_data" / name)


def _pairs(device: Path, benchmark: Path, tmp_path: Path, capsys, *extra: str):
    """Exit code and output, the CSV rows by (NPU or Bench name) and the JSON report."""
    out_csv, out_json = tmp_path / "out" / "calls.csv", tmp_path / "out" / "r.json"
    result = run_cli(["compare", "--msprobe", str(device), "--reference-msprobe", str(benchmark),
                      "--csv", str(out_csv), "--json", str(out_json), *extra], capsys)
    rows = list(csv.DictReader(out_csv.open(encoding="utf-8"))) if out_csv.exists() else []
    doc = json.loads(out_json.read_text()) if out_json.exists() else None
    return result, {r["NPU Name"] or r["Bench Name"]: r for r in rows}, doc


def test_the_calls_are_matched_by_name_forward_and_backward(device, benchmark, tmp_path, capsys):
    result, rows, doc = _pairs(device, benchmark, tmp_path, capsys)
    names = [n for n in json.loads((_proc(device) / "dump.json").read_text())["data"] if "leaky_relu" in n]
    assert result.code == 0, result.text
    assert list(rows) == names  # the device dump's order, every call and direction once
    assert all(r["Bench Name"] == r["NPU Name"] and r["matched"] == "by name" for r in rows.values())
    assert validate(doc, SCHEMA) == []
    assert [r["variant"] for r in doc["rows"]] == names  # the verdict rows are the device's
    assert {a["variant"] for a in doc["agreement"]} == {n for n in names if ".2." not in n}


def test_each_pair_says_same_bits_or_how_many_differ_and_why(device, benchmark, tmp_path, capsys):
    _, rows, _ = _pairs(device, benchmark, tmp_path, capsys)
    for name in ("Functional.leaky_relu.0.forward", "Functional.leaky_relu.1.forward"):
        assert (rows[name]["same bits"], rows[name]["differing"], rows[name]["why"]) == ("yes", "0", "same bits")
    for name in ("Functional.leaky_relu.2.forward", "Functional.leaky_relu.2.backward"):
        assert (rows[name]["same bits"], rows[name]["differing"]) == ("", "")  # fp16 against fp32
        assert rows[name]["why"] == "dtypes differ: device float16, benchmark float32"
    for name in ("Functional.leaky_relu.1.backward", "Functional.leaky_relu.0.backward"):
        row = rows[name]
        assert row["same bits"] == "no" and int(row["differing"]) == 69
        assert row["why"].startswith("dy differs in 69 of 148 elements (an earlier layer's output)")


def test_the_console_shows_cosine_and_the_thousandth_ratios_per_call(device, benchmark, tmp_path, capsys,
                                                                     monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    result, _, _ = _pairs(device, benchmark, tmp_path, capsys)
    lines = result.out.splitlines()
    (head,) = [line for line in lines if line.startswith("call ")]
    assert head.split() == ["call", "dir", "dtype", "device", "bench", "bits", "Cosine", "1‰", "5‰"]
    (line,) = [line for line in lines if line.startswith("Functional.leaky_relu.1  fwd")]
    assert line.split()[-5:] == ["✓", "same", "1.000000", "1.000000", "1.000000"]
    assert "6 calls × directions: 2 same bits, 2 differ, 2 not bit-comparable" in lines
    assert max(len(line) for line in lines) <= 100


def test_the_csv_has_msprobes_columns_beside_this_tools(device, benchmark, tmp_path, capsys):
    _, rows, _ = _pairs(device, benchmark, tmp_path, capsys)
    header = (tmp_path / "out" / "calls.csv").read_text(encoding="utf-8").splitlines()[0].split(",")
    assert tuple(header) == HEADER
    assert header[header.index("Cosine"):header.index("Cosine") + 6] == list(MSPROBE_COLUMNS)
    row = rows["Functional.leaky_relu.2.forward"]
    # msprobe 26.2.0's own compare of these two dumps printed exactly these for the output tensor
    assert [row[c] for c in MSPROBE_COLUMNS] == ["1.0", "0.0056605496740739815", "0.002866744995",
                                                 "0.000631643459", "1.0", "1.0"]
    assert (row["device verdict"], row["device mismatches"], row["device categories"]) == ("pass", "0", "")
    assert (row["benchmark verdict"], row["benchmark categories"]) == ("warn", "alpha-precision=10")
    assert row["device max ULP"] == "0" and row["benchmark max ULP"] == "1"


def test_identical_dumps_are_all_same_bits(device, tmp_path, capsys):
    result, rows, doc = _pairs(device, FIXTURES / "leaky3", tmp_path, capsys)
    assert result.code == 0, result.text
    assert len(rows) == 6 and {r["same bits"] for r in rows.values()} == {"yes"}
    assert {r["MaxAbsErr"] for r in rows.values()} == {"0.0"} and {r["Cosine"] for r in rows.values()} == {"1.0"}
    assert all(a["identical"] for a in doc["agreement"])
    assert "6 calls × directions: 6 same bits" in result.out


def test_a_call_without_partner_says_so_on_both_sides(device, benchmark, tmp_path, capsys):
    def drop(doc: dict) -> None:
        for direction in ("forward", "backward"):
            del doc["data"][f"Functional.leaky_relu.2.{direction}"]

    _rewrite(benchmark, drop)
    result, rows, _ = _pairs(device, benchmark, tmp_path, capsys)
    assert result.code == 0, result.text
    for direction in ("forward", "backward"):
        row = rows[f"Functional.leaky_relu.2.{direction}"]
        assert (row["Bench Name"], row["matched"], row["same bits"], row["Cosine"]) == ("", "none", "", "")
        assert row["why"] == "no partner in the benchmark dump" and row["device verdict"] == "pass"
    assert "Functional.leaky_relu.2 fwd: no partner in the benchmark dump" in result.out
    assert "2 without partner" in result.out


def test_a_benchmark_call_without_partner_is_listed_after_the_devices(device, benchmark, tmp_path, capsys):
    _rewrite(device, lambda doc: [doc["data"].pop(f"Functional.leaky_relu.0.{d}") for d in ("forward", "backward")])
    _, rows, doc = _pairs(device, benchmark, tmp_path, capsys)
    alone = [n for n, r in rows.items() if r["matched"] == "none"]
    assert alone == ["Functional.leaky_relu.0.forward", "Functional.leaky_relu.0.backward"]
    assert list(rows)[-2:] == alone  # after the device's calls
    assert all(rows[n]["NPU Name"] == "" and rows[n]["why"] == "no partner in the device dump" for n in alone)
    assert len(doc["rows"]) == 4  # the verdict rows are the device's calls


def test_calls_numbered_differently_are_matched_by_order(device, benchmark, tmp_path, capsys):
    def renumber(doc: dict) -> None:  # the benchmark run made three other LeakyReLU calls first
        doc["data"] = {k.replace(f".{n}.", f".{n + 3}."): v for k, v in doc["data"].items()
                       for n in [int(k.split(".")[2])]}

    _rewrite(benchmark, renumber)
    result, rows, _ = _pairs(device, benchmark, tmp_path, capsys)
    row = rows["Functional.leaky_relu.0.forward"]
    assert (row["Bench Name"], row["matched"]) == ("Functional.leaky_relu.3.forward", "by order (names differ)")
    assert row["same bits"] == "yes"
    assert rows["Functional.leaky_relu.0.backward"]["Bench Name"] == "Functional.leaky_relu.3.backward"
    assert ("Functional.leaky_relu.0 fwd: matched by order with the benchmark's Functional.leaky_relu.3.forward; "
            "same bits") in " ".join(result.out.split())


def test_a_defective_device_dump_names_the_category(device, benchmark, tmp_path, capsys):
    x = _tensor(device, "Functional.leaky_relu.1.forward.input.0.pt")
    _save(device, "Functional.leaky_relu.1.forward.output.0.pt", torch.where(x > 0, x, x * 0.3))
    result, rows, _ = _pairs(device, benchmark, tmp_path, capsys)
    row = rows["Functional.leaky_relu.1.forward"]
    assert result.code == 1, result.text
    assert (row["device verdict"], row["device categories"]) == ("fail", "alpha-mismatch=69")
    assert row["same bits"] == "no" and row["differing"] == "69"
    assert row["why"] == "device: alpha-mismatch ×69; benchmark: alpha-precision ×13"
    # msprobe's cosine rounds to 1.0 over a wrong slope; its thousandth ratio sees the 69 negatives
    assert row["Cosine"] == "1.0" and float(row["One Thousandth Err Ratio"]) == pytest.approx(1 - 69 / 148)


def test_a_benchmark_run_with_another_slope_says_the_slopes_differ(device, benchmark, tmp_path, capsys):
    x = _tensor(benchmark, "Functional.leaky_relu.1.forward.input.0.pt")
    _save(benchmark, "Functional.leaky_relu.1.forward.output.0.pt", torch.nn.functional.leaky_relu(x, 0.3))
    _rewrite(benchmark, lambda d: d["data"]["Functional.leaky_relu.1.forward"]["input_args"][1].update(value=0.3))
    result, rows, _ = _pairs(device, benchmark, tmp_path, capsys)
    row = rows["Functional.leaky_relu.1.forward"]
    assert result.code == 0, result.text  # both right for their own slope: the device is not at fault
    assert row["why"].startswith("slopes differ: device 0.2, benchmark 0.3; ")
    assert row["benchmark verdict"] != "fail" and row["same bits"] == "no"


@pytest.mark.parametrize("extra, mentions", [
    (["--reference-msprobe", "{benchmark}"], "--reference-msprobe {benchmark} needs --msprobe DEVICE_DIR"),
    (["--msprobe", "{device}", "--csv", "c.csv"], "--csv writes msprobe's two-dump table"),
    (["--msprobe", "{device}", "--reference-msprobe", "{tmp}"], "--reference-msprobe {tmp}: no dump.json under it"),
    (["--msprobe", "{device}", "--reference-msprobe", "{tmp}/none"], "no such directory"),
    (["--msprobe", "{device}", "--reference-msprobe", "{stats}"], "statistics only"),
    (["--msprobe", "{device}", "--reference-msprobe", "{benchmark}", "--csv", "{file}/c.csv"],
     "--csv {file}/c.csv: cannot write there"),
    (["--msprobe", "{device}", "--reference-msprobe", "{benchmark}", "--csv", "{tmp}"], "is not a file path"),
    (["--msprobe", "{device}", "--reference-msprobe", "{benchmark}", "--csv", "r.json", "--json", "r.json"],
     "are the same file"),
    (["--msprobe", "{device}", "--reference-y", "y.npy"], "--reference-msprobe BENCHMARK_DIR"),
])
def test_a_wrong_input_exits_2_with_one_line_saying_what_to_fix(device, benchmark, tmp_path, capsys, extra, mentions):
    (tmp_path / "file").write_text("")
    values = {"device": str(device), "benchmark": str(benchmark), "tmp": str(tmp_path),
              "stats": str(FIXTURES / "statistics"), "file": str(tmp_path / "file")}
    result = run_cli(["compare", *(e.format(**values) for e in extra)], capsys, cwd=tmp_path)
    assert_usage_error(result, mentions=mentions.format(**values))


def test_an_interrupted_run_keeps_the_pairs_it_finished(device, benchmark, tmp_path, capsys, monkeypatch):
    real, calls = compare_msprobe.evaluate_call, {"n": 0}

    def interrupted(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] > 4:  # two pairs done, each side judged
            raise interrupts.Interrupted()
        return real(*args, **kwargs)

    monkeypatch.setattr(compare_msprobe, "evaluate_call", interrupted)
    result, rows, doc = _pairs(device, benchmark, tmp_path, capsys)
    assert result.code == 130, result.text
    assert list(rows) == ["Functional.leaky_relu.0.forward", "Functional.leaky_relu.1.forward", "(interrupted)"]
    assert rows["(interrupted)"]["why"] == INTERRUPTED
    assert doc["partial"] is True and [r["variant"] for r in doc["rows"]] == list(rows)[:2]
    assert not list((tmp_path / "out").glob(".*.tmp"))  # written atomically: no temporary left


def test_the_generator_reproduces_the_benchmark_dump_when_msprobe_is_installed(tmp_path):
    """In a process of its own: msprobe's debugger is one per process, and its import stubs tensorflow."""
    if importlib.util.find_spec("msprobe") is None:
        pytest.skip("mindstudio-probe is not installed (pip install -e .[dev])")
    made = subprocess.run([sys.executable, str(FIXTURES / "make_dump.py"), str(tmp_path / "fresh"), "tensor",
                           "benchmark"], capture_output=True, text=True, timeout=600, check=False)
    assert made.returncode == 0, made.stderr[-2000:]
    fresh, kept = _proc(tmp_path / "fresh"), _proc(FIXTURES / "leaky3_fp32")
    assert list(json.loads((fresh / "dump.json").read_text())["data"]) == \
        list(json.loads((kept / "dump.json").read_text())["data"])
    for file in (fresh / "dump_tensor_data").iterdir():
        assert torch.equal(torch.load(file, weights_only=True),
                           torch.load(kept / "dump_tensor_data" / file.name, weights_only=True)), file.name

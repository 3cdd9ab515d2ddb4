"""The proof-of-no-change script: its normaliser, its JSON differ, its dumps and its worker wrapper."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import unchanged as u
from benchmarks import unchanged_dumps as dumps

PATHS = {"/tmp/unchanged-x": "<tmp>", "/work/checkout": "<checkout>"}


def test_time_fields_the_harness_version_and_paths_are_normalised() -> None:
    doc = {"versions": {"conformance": "0.1.0", "numpy": "2.4.6"}, "duration": 3.2, "rows": [
        {"elapsed_s": 1, "started": "12:00", "reproducer": "/tmp/unchanged-x/results/a.npz", "max_ulp": 4,
         "one_thousandth_ratio": 0.5, "timeline": "kept"}]}
    assert u.normalise(doc, paths=PATHS) == {
        "versions": {"conformance": "<harness version>", "numpy": "2.4.6"}, "duration": "<time>", "rows": [
            {"elapsed_s": "<time>", "started": "<time>", "reproducer": "<tmp>/results/a.npz", "max_ulp": 4,
             "one_thousandth_ratio": 0.5, "timeline": "kept"}]}


def test_a_version_outside_versions_and_a_time_holding_a_record_are_kept() -> None:
    doc = {"conformance": "0.1.0", "times": {"a": 1}}
    assert u.normalise(doc, paths=PATHS) == doc


def test_printed_durations_and_paths_are_normalised_but_counts_are_not() -> None:
    text = "/work/checkout/x: 2562 planted elements in 20 cases, took 3.5 s (12 ms each)"
    assert u.normalise_text(text, paths=PATHS) == ("<checkout>/x: 2562 planted elements in 20 cases, "
                                                   "took <time> (<time> each)")


@pytest.mark.parametrize(("old", "new", "path"), [
    ({"rows": [{"v": "pass"}, {"v": "pass"}]}, {"rows": [{"v": "pass"}, {"v": "fail"}]}, "$.rows[1].v"),
    ({"a": 1, "b": 2}, {"a": 1}, "$.b"),
    ({"a": 1}, {"a": 1, "c": 3}, "$.c"),
    ({"a": [1, 2]}, {"a": [1, 2, 3]}, "$.a[2]"),
    ({"a": 1}, {"a": 1.0}, "$.a"),
    ({"a": 0.0}, {"a": -0.0}, "$.a"),
    ({"a": True}, {"a": 1}, "$.a"),
    ({"a": 1, "b": 2}, {"b": 2, "a": 1}, "$ (key order)"),
])
def test_the_first_difference_is_named_by_its_json_path(old, new, path) -> None:
    assert u.first_difference(old, new) == path


def test_equal_documents_have_no_difference_nan_included() -> None:
    doc = {"rows": [{"x": float("nan"), "y": [1, "a", None]}]}
    assert u.first_difference(doc, json.loads(json.dumps(doc))) is None


def test_the_eleven_dumps_are_the_same_on_every_call(tmp_path: Path) -> None:
    first = dumps.write_dumps(dumps.defect_dumps(), tmp_path / "a")
    again = dumps.write_dumps(dumps.defect_dumps(), tmp_path / "b")
    assert first == again and len({name.split("/")[0] for name in first}) == 11


def _saved(directory: Path, records: dict) -> None:
    directory.mkdir()
    (directory / "meta.json").write_text(json.dumps({"outputs": list(records)}))
    (directory / "inputs.json").write_text(json.dumps({"d/x.npy": "abc"}))
    for name, record in records.items():
        (directory / f"{name}.json").write_text(json.dumps(record))


def test_check_names_each_output_and_the_first_difference(tmp_path: Path) -> None:
    _saved(tmp_path / "saved", {"one": {"exit": 0, "report": {"v": 1}}, "two": {"exit": 1, "stdout": ["a"]}})
    lines = u.compare_saved(tmp_path / "saved", {"d/x.npy": "abc"},
                            {"one": {"exit": 0, "report": {"v": 1}}, "two": {"exit": 1, "stdout": ["b"]}})
    assert lines == [("inputs", "identical"), ("one", "identical"), ("two", "differs: $.stdout[0]")]


def test_an_output_not_produced_or_other_inputs_differ(tmp_path: Path) -> None:
    _saved(tmp_path / "saved", {"one": {"exit": 0}})
    lines = u.compare_saved(tmp_path / "saved", {"d/x.npy": "def"}, {})
    assert lines == [("inputs", "differs: $.d/x.npy"), ("one", "differs: not produced")]


def test_the_worker_wrapper_runs_the_checkout_under_test(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    (checkout / "conformance").mkdir(parents=True)
    (checkout / "conformance" / "__init__.py").write_text("")
    (checkout / "conformance" / "__main__.py").write_text("import sys; print('fake', *sys.argv[1:])")
    ctx = u.make_context(checkout, seed=0, generated=1, pythons={n: sys.executable for n in u.OWN_ENVIRONMENTS})
    try:
        done = subprocess.run([ctx.env["CONFORMANCE_PADDLE_PYTHON"], "-m", "conformance", "worker", "--backend",
                               "paddle"], capture_output=True, text=True, cwd=tmp_path, env={},
                              stdin=subprocess.DEVNULL, timeout=60)
        logged = ctx.worker_log.read_text().split()
    finally:
        shutil.rmtree(ctx.tmp)
    assert done.stdout.strip() == "fake worker --backend paddle", done.stderr
    assert logged == [str(checkout / "conformance" / "__init__.py")]


def test_a_missing_environment_is_one_line_saying_how_to_make_it(tmp_path: Path) -> None:
    with pytest.raises(u.Failure, match="make setup-frameworks"):
        u.make_context(tmp_path, seed=0, generated=1, pythons={"paddle": str(tmp_path / "none"), "mindspore": None})


def test_diff_compares_two_saved_directories_settings_included(tmp_path: Path, capsys) -> None:
    _saved(tmp_path / "a", {"one": {"exit": 0, "report": {"v": 1}}})
    _saved(tmp_path / "b", {"one": {"exit": 0, "report": {"v": 2}}})
    assert u.main(["diff", str(tmp_path / "a"), str(tmp_path / "a")]) == 0
    assert u.main(["diff", str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    printed = capsys.readouterr().out.splitlines()
    assert printed[-3:] == ["settings: identical", "inputs: identical", "one: differs: $.report.v"]


def test_diff_without_a_second_directory_is_a_usage_error(tmp_path: Path, capsys) -> None:
    assert u.main(["diff", str(tmp_path)]) == 2
    assert "diff DIR OTHER" in capsys.readouterr().err


@pytest.mark.parametrize("local_constants", [True, False])
def test_without_local_constants_hypothesis_draws_no_literal_of_the_source(tmp_path: Path, local_constants) -> None:
    checkout = tmp_path / "checkout"
    (checkout / "conformance").mkdir(parents=True)
    (checkout / "conformance" / "__init__.py").write_text("LITERAL = 777777\n")
    ctx = u.make_context(checkout, seed=0, generated=1, local_constants=local_constants,
                         pythons={n: sys.executable for n in u.OWN_ENVIRONMENTS})
    probe = ("import conformance; from hypothesis.internal.conjecture import providers; "
             "print(777777 in providers._get_local_constants().integers)")
    try:
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ctx.tmp, env=ctx.env)
    finally:
        shutil.rmtree(ctx.tmp)
    assert done.stdout.strip() == str(local_constants), done.stderr

"""`compare --msprobe`: real mindstudio-probe dumps (made by tests/fixtures/msprobe/make_dump.py).

``leaky3`` is a tensor dump of a model with three LeakyReLU calls (no slope; fp32
``nn.LeakyReLU(0.2)``; fp16 ``F.leaky_relu(..., negative_slope=0.2)``), forward and
backward; ``statistics`` is the same model dumped with task ``statistics``.
Defects are seeded into copies of the real dump by rewriting one output tensor.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from conformance.render.export import SCHEMA, validate
from tests.helpers import assert_usage_error, keep_tensorflow_across_msprobe, keep_torch_across_msprobe, run_cli

torch = pytest.importorskip("torch")

FIXTURES = Path(__file__).parents[1] / "fixtures" / "msprobe"


@pytest.fixture
def dump(tmp_path: Path) -> Path:
    """A copy of the real dump in a place other than where it was made (dump_data_dir is stale)."""
    return Path(shutil.copytree(FIXTURES / "leaky3", tmp_path / "leaky3"))


def _proc(root: Path) -> Path:
    (found,) = root.glob("step*/proc*")
    return found


def _entries(root: Path) -> dict:
    return json.loads((_proc(root) / "dump.json").read_text())["data"]


def _tensor(root: Path, name: str) -> torch.Tensor:
    return torch.load(_proc(root) / "dump_tensor_data" / name, weights_only=True)


def _save(root: Path, name: str, value: object) -> None:
    torch.save(value, _proc(root) / "dump_tensor_data" / name)


def _report(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str):
    out = tmp_path / "report.json"
    result = run_cli(["compare", "--msprobe", str(root), "--json", str(out), *extra], capsys)
    doc = json.loads(out.read_text()) if out.exists() else None
    return result, doc


def _row(doc: dict, name: str) -> dict:
    (row,) = [r for r in doc["rows"] if r["variant"] == name]
    return row


def test_clean_dump_gives_one_row_per_call_named_after_msprobe(dump, tmp_path, capsys):
    result, doc = _report(dump, tmp_path, capsys)
    calls = [n for n in _entries(dump) if "leaky_relu" in n]
    assert result.code == 0, result.text
    assert validate(doc, SCHEMA) == []
    assert [r["variant"] for r in doc["rows"]] == calls
    assert {r["backend"] for r in doc["rows"]} == {"dump"}
    assert all(r["verdict"] != "fail" for r in doc["rows"])
    assert all(r["cosine_similarity"] is not None for r in doc["rows"])


@pytest.mark.parametrize("call, alpha, dtype", [
    ("Functional.leaky_relu.0", 0.01, "float32"),   # no slope: torch's default
    ("Functional.leaky_relu.1", 0.2, "float32"),    # nn.LeakyReLU(0.2): positional
    ("Functional.leaky_relu.2", 0.2, "float16"),    # negative_slope=0.2 keyword
])
def test_each_call_is_judged_at_its_own_slope_and_dtype(dump, tmp_path, capsys, call, alpha, dtype):
    _, doc = _report(dump, tmp_path, capsys)
    for direction in ("forward", "backward"):
        row = _row(doc, f"{call}.{direction}")
        assert float(row["alpha"]["decimal"]) == alpha
        assert (row["dtype"], row["out_dtype"], row["direction"]) == (dtype, dtype, direction)


def test_a_call_without_a_slope_says_the_default_was_used(dump, tmp_path, capsys):
    result, doc = _report(dump, tmp_path, capsys)
    note = "no slope passed: the framework default 0.01 was used"
    assert _row(doc, "Functional.leaky_relu.0.forward")["notes"][0] == note
    assert _row(doc, "Functional.leaky_relu.0.backward")["notes"][0] == note
    assert all(note not in n for n in _row(doc, "Functional.leaky_relu.1.forward")["notes"])
    assert f"Functional.leaky_relu.0.forward: {note}" in result.out


@pytest.mark.parametrize("call, line, code", [
    ("Functional.leaky_relu.0", 28, "a = F.leaky_relu(x)"),
    ("Functional.leaky_relu.1", 29, "b = self.act(a * 3)"),
    ("Functional.leaky_relu.2", 30, "return F.leaky_relu(b.half(), negative_slope=0.2)"),
])
def test_each_row_names_the_source_line_of_its_call_from_stack_json(dump, tmp_path, capsys, call, line, code):
    _, doc = _report(dump, tmp_path, capsys)
    for direction in ("forward", "backward"):  # a backward was made where its forward was
        (where,) = [n for n in _row(doc, f"{call}.{direction}")["notes"] if n.startswith("called at ")]
        assert f"make_dump.py:{line} in forward: {code}" in where


def test_a_call_through_nn_leaky_relu_names_the_module(dump, tmp_path, capsys):
    _, doc = _report(dump, tmp_path, capsys)
    notes = _row(doc, "Functional.leaky_relu.1.forward")["notes"]
    assert "through torch.nn.LeakyReLU (torch/nn/modules/activation.py:922)" in notes  # slope 0.2: no default
    assert not any(n.startswith("through") for n in _row(doc, "Functional.leaky_relu.2.forward")["notes"])


def test_a_module_whose_slope_is_its_default_says_so(dump, tmp_path, capsys):
    """nn.LeakyReLU() passes its default 0.01 positionally: the dump shows a slope, the row says whose default."""
    x = _tensor(dump, "Functional.leaky_relu.1.forward.input.0.pt")
    _save(dump, "Functional.leaky_relu.1.forward.output.0.pt", torch.nn.functional.leaky_relu(x, 0.01))
    _rewrite(dump, lambda d: d["data"]["Functional.leaky_relu.1.forward"]["input_args"][1].update(value=0.01))
    _, doc = _report(dump, tmp_path, capsys)
    row = _row(doc, "Functional.leaky_relu.1.forward")
    assert float(row["alpha"]["decimal"]) == 0.01 and row["verdict"] != "fail"
    assert ("through torch.nn.LeakyReLU (torch/nn/modules/activation.py:922); slope 0.01 is its torch default, "
            "as when the module is built without one") in row["notes"]


def test_construct_json_names_the_module_and_the_old_stack_layout_is_read(dump, tmp_path, capsys):
    proc = _proc(dump)
    (proc / "construct.json").write_text(json.dumps({"Functional.leaky_relu.2.forward": "Module.head.forward.0"}))
    frame = "File /home/me/net.py, line 7, in head, \n return F.leaky_relu(y, 0.2)"
    (proc / "stack.json").write_text(json.dumps({"Functional.leaky_relu.2.forward": [frame]}))
    _, doc = _report(dump, tmp_path, capsys)
    notes = _row(doc, "Functional.leaky_relu.2.backward")["notes"]
    assert notes == ["called at /home/me/net.py:7 in head: return F.leaky_relu(y, 0.2)",
                     "in module Module.head.forward.0"]


def test_a_missing_or_broken_stack_json_gives_rows_without_a_location(dump, tmp_path, capsys):
    (_proc(dump) / "stack.json").write_text("{not json")
    result, doc = _report(dump, tmp_path, capsys)
    assert result.code == 0, result.text
    assert not any(n.startswith("called at") for r in doc["rows"] for n in r.get("notes", []))


def test_an_output_computed_with_another_slope_is_alpha_mismatch(dump, tmp_path, capsys):
    x = _tensor(dump, "Functional.leaky_relu.1.forward.input.0.pt")
    _save(dump, "Functional.leaky_relu.1.forward.output.0.pt", torch.where(x > 0, x, x * 0.3))
    result, doc = _report(dump, tmp_path, capsys)
    row = _row(doc, "Functional.leaky_relu.1.forward")
    assert result.code == 1
    assert row["verdict"] == "fail"
    (finding,) = [f for f in row["findings"] if not f["allowed"]]
    assert finding["category"] == "alpha-mismatch"
    assert float(finding["detail"]["effective_alpha"]["decimal"]) == pytest.approx(0.3)
    others = [r for r in doc["rows"] if r["variant"] != "Functional.leaky_relu.1.forward"]
    assert all(r["verdict"] != "fail" for r in others)


def test_a_corrupted_tail_of_a_gradient_is_tail_block(dump, tmp_path, capsys):
    name = "Functional.leaky_relu.2.backward.output.0.pt"
    dx = _tensor(dump, name).clone()
    dx.view(-1)[-16:] = 7.0  # the last 32-byte block of fp16 garbled
    _save(dump, name, dx)
    result, doc = _report(dump, tmp_path, capsys, "--profile", "ascend910b1", "--cores", "1")
    row = _row(doc, "Functional.leaky_relu.2.backward")
    assert result.code == 1
    assert [f["category"] for f in row["findings"] if not f["allowed"]] == ["tail-block"]
    assert row["parts"] == [name]


def test_a_statistics_dump_asks_for_a_tensor_dump(capsys):
    result = run_cli(["compare", "--msprobe", str(FIXTURES / "statistics")], capsys)
    assert_usage_error(result, mentions='task "tensor"')
    assert "statistics only" in result.err


def test_a_missing_tensor_file_names_it(dump, capsys):
    missing = _proc(dump) / "dump_tensor_data" / "Functional.leaky_relu.2.forward.output.0.pt"
    missing.unlink()
    result = run_cli(["compare", "--msprobe", str(dump)], capsys)
    assert_usage_error(result, mentions="Functional.leaky_relu.2.forward.output.0.pt")
    assert "missing" in result.err


def _rewrite(root: Path, edit) -> None:
    file = _proc(root) / "dump.json"
    doc = json.loads(file.read_text())
    edit(doc)
    file.write_text(json.dumps(doc))


@pytest.mark.parametrize("edit, mentions", [
    (lambda d: d.pop("data"), "unknown dump.json layout"),
    (lambda d: d.update(framework="jax"), "framework 'jax'"),
    (lambda d: d["data"]["Functional.leaky_relu.1.forward"].pop("output"), "no output list"),
    (lambda d: d["data"]["Functional.leaky_relu.1.forward"]["output"][0].update(data_name="../x.pt"),
     "not a plain file name"),
])
def test_an_unknown_layout_exits_2_saying_what_to_redump(dump, capsys, edit, mentions):
    _rewrite(dump, edit)
    result = run_cli(["compare", "--msprobe", str(dump)], capsys)
    assert_usage_error(result, mentions=mentions)
    assert "re-dump" in result.err


class _Boom:
    def __reduce__(self):
        return (Path.touch, (Path(self.target),))


def test_a_pickle_that_is_not_a_tensor_is_never_run(dump, tmp_path, capsys):
    boom = _Boom()
    boom.target = str(tmp_path / "ran")
    _save(dump, "Functional.leaky_relu.0.forward.output.0.pt", {"a": boom})
    result = run_cli(["compare", "--msprobe", str(dump)], capsys)
    assert_usage_error(result, mentions="Functional.leaky_relu.0.forward output 0")
    assert not (tmp_path / "ran").exists()


def test_the_dump_json_file_or_its_directory_can_be_given(dump, tmp_path, capsys):
    for target in (_proc(dump), _proc(dump) / "dump.json"):
        result = run_cli(["compare", "--msprobe", str(target)], capsys)
        assert result.code == 0, result.text


def test_msprobe_and_arrays_are_not_mixed(dump, capsys):
    result = run_cli(["compare", "--msprobe", str(dump), "--alpha", "0.2"], capsys)
    assert_usage_error(result, mentions="--alpha cannot be combined")


def test_the_fixture_is_a_real_msprobe_dump():
    """Guards against replacing the fixture by a hand-written imitation."""
    doc = json.loads((_proc(FIXTURES / "leaky3") / "dump.json").read_text())
    assert (doc["task"], doc["level"], doc["framework"]) == ("tensor", "L1", "pytorch")
    assert (_proc(FIXTURES / "leaky3") / "stack.json").exists()
    assert np.isfinite(doc["data"]["Functional.leaky_relu.2.forward"]["output"][0]["Norm"])


def test_the_generator_reproduces_the_fixture_when_msprobe_is_installed(tmp_path, monkeypatch):
    keep_tensorflow_across_msprobe(monkeypatch)
    keep_torch_across_msprobe(monkeypatch)
    pytest.importorskip("msprobe.pytorch")
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_dump", FIXTURES / "make_dump.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.dump(tmp_path / "fresh")
    fresh = _entries(tmp_path / "fresh")
    assert list(fresh) == list(_entries(FIXTURES / "leaky3"))
    for name in (p.name for p in (_proc(tmp_path / "fresh") / "dump_tensor_data").iterdir()):
        assert torch.equal(_tensor(tmp_path / "fresh", name), _tensor(FIXTURES / "leaky3", name)), name


def test_several_processes_are_told_apart_by_step_and_proc(dump, tmp_path, capsys):
    proc, calls = _proc(dump), [n for n in _entries(dump) if "leaky_relu" in n]
    shutil.copytree(proc, proc.with_name("proc0"))
    result, doc = _report(dump, tmp_path, capsys)
    names = [r["variant"] for r in doc["rows"]]
    assert result.code == 0, result.text
    assert len(names) == len(set(names)) == 2 * len(calls)
    assert {n.rsplit("/", 1)[0] for n in names} == {f"step0/{proc.name}", "step0/proc0"}

"""`conformance audit`: every LeakyReLU of a model, on artefacts built here with the real frameworks.

A DCGAN-style discriminator is written three ways (torch, Keras, MindSpore
style), each with exactly one LeakyReLU that passes no slope; the torch one is
exported to ONNX and torch.export, the Keras one saved as ``.keras``.
Expected slopes come from the defaults table, never from numbers restated here.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from conformance.audit import audit
from conformance.audit.compare import pair
from conformance.audit.msprobe_stats import hazards
from conformance.audit.record import DEFAULT, DYNAMIC, PASSED, STORED, same_slope
from conformance.audit.source import scan
from conformance.reference.defaults import entry_for
from tests.helpers import assert_usage_error, run_cli

torch = pytest.importorskip("torch")
FIXTURES = Path(__file__).parent / "fixtures" / "msprobe"

TORCH_SOURCE = (Path(__file__).parents[1] / "examples" / "discriminator.py").read_text(encoding="utf-8")

KERAS_SOURCE = '''
import keras
from keras import layers


def make():
    return keras.Sequential([
        keras.Input((8, 8, 1)),
        layers.Conv2D(4, 4, strides=2, padding="same"),
        layers.LeakyReLU(negative_slope=0.2),
        layers.Conv2D(8, 4, strides=2, padding="same"),
        layers.LeakyReLU(),  # the implicit default
        layers.Conv2D(1, 2),
    ])
'''

MINDSPORE_SOURCE = '''
import mindspore.nn as msnn


class Discriminator(msnn.Cell):
    def __init__(self):
        super().__init__()
        self.body = msnn.SequentialCell([
            msnn.Conv2d(1, 4, 4, 2), msnn.LeakyReLU(alpha=0.2),
            msnn.Conv2d(4, 8, 4, 2), msnn.LeakyReLU(),  # the implicit default
        ])
'''

# framework source -> the table API its one implicit default belongs to
SOURCES = {"torch": (TORCH_SOURCE, "torch.nn.LeakyReLU"), "keras": (KERAS_SOURCE, "keras.layers.LeakyReLU"),
           "mindspore": (MINDSPORE_SOURCE, "mindspore.nn.LeakyReLU")}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three sources on disk, and the torch model's ONNX (as is, and with one slope changed)
    and torch.export files."""
    root = tmp_path_factory.mktemp("audit")
    made = {name: root / f"d_{name}.py" for name in SOURCES}
    for name, (text, _) in SOURCES.items():
        made[name].write_text(text, encoding="utf-8")
    module = _import(made["torch"])
    x = torch.randn(1, 1, 16, 16)
    for name, factory in (("onnx", module.make), ("changed.onnx", module.changed)):
        made[name] = root / f"d_{name.split('.')[0]}.onnx"
        torch.onnx.export(factory().eval(), (x,), str(made[name]), dynamo=False)
    made["pt2"] = root / "d.pt2"
    torch.export.save(torch.export.export(module.make().eval(), (x,)), str(made["pt2"]))
    return made


def _import(path: Path):
    spec = importlib.util.spec_from_file_location(f"audit_test_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _slopes(target: str) -> list:
    return [a.slope for a in audit(target).activations]


# ----------------------------------------------------------------------------- source

@pytest.mark.parametrize("framework", SOURCES)
def test_source_finds_the_one_implicit_default_and_whose_it_is(models: dict[str, Path], framework: str) -> None:
    found = audit(str(models[framework])).activations
    implicit = [a for a in found if a.implicit]
    api = SOURCES[framework][1]
    assert [(a.api, a.slope) for a in implicit] == [(api, entry_for(api).declared)]
    line = next(i for i, text in enumerate(SOURCES[framework][0].splitlines(), 1) if "# the implicit default" in text)
    assert implicit[0].where.startswith(f"{models[framework]}:{line}")
    passed = [a for a in found if a.origin == PASSED]
    assert passed and all(same_slope(a.slope, 0.2) for a in passed)


def test_source_reads_a_directory_and_a_slope_it_cannot_evaluate_is_dynamic(models: dict[str, Path]) -> None:
    found = audit(str(models["torch"].parent)).activations
    assert {a.framework for a in found if a.implicit} == {entry_for(api).framework for _, api in SOURCES.values()}
    dynamic = [a for a in found if a.origin == DYNAMIC]
    assert [(a.api, a.expression) for a in dynamic] == [("torch.nn.functional.leaky_relu", "self.slope")]


ALIASES = [
    ("import torch.nn as nn\nnn.LeakyReLU(0.1)", "torch.nn.LeakyReLU", PASSED, 0.1),
    ("from torch.nn import functional as F\nF.leaky_relu(x, 0.2)", "torch.nn.functional.leaky_relu", PASSED, 0.2),
    ("import torch.nn.functional as F\nF.leaky_relu(x, negative_slope=-1/3)", "torch.nn.functional.leaky_relu",
     PASSED, -1 / 3),
    ("from torch.nn import LeakyReLU\nLeakyReLU(inplace=True)", "torch.nn.LeakyReLU", DEFAULT, None),
    ("from keras import layers\nlayers.LeakyReLU(alpha=0.1)", "keras.layers.LeakyReLU", PASSED, 0.1),
    ("from tensorflow import keras\nkeras.layers.LeakyReLU()", "keras.layers.LeakyReLU", DEFAULT, None),
    ("import tensorflow as tf\ntf.keras.layers.LeakyReLU()", "keras.layers.LeakyReLU", DEFAULT, None),
    ("import tensorflow as tf\ntf.nn.leaky_relu(x, alpha=0.1)", "tf.nn.leaky_relu", PASSED, 0.1),
    ("from keras import ops\nops.leaky_relu(x)", "keras.ops.leaky_relu", DEFAULT, None),
    ("import mindspore.nn as msnn\nmsnn.LeakyReLU()", "mindspore.nn.LeakyReLU", DEFAULT, None),
    ("import mindspore.ops as ops\nops.leaky_relu(x, alpha=a)", "mindspore.ops.leaky_relu", DYNAMIC, None),
    ("import jax\njax.nn.leaky_relu(x)", "jax.nn.leaky_relu", DEFAULT, None),
    ("import paddle\npaddle.nn.LeakyReLU(**cfg)", "paddle.nn.LeakyReLU", DYNAMIC, None),
    ("import paddle.nn.functional as PF\nPF.leaky_relu(x, 0.2)", "paddle.nn.functional.leaky_relu", PASSED, 0.2),
]


@pytest.mark.parametrize(("text", "api", "origin", "value"), ALIASES, ids=[t.splitlines()[1] for t, *_ in ALIASES])
def test_source_follows_import_aliases(text: str, api: str, origin: str, value) -> None:
    (found,) = scan(text, filename="m.py")
    expected = entry_for(api).declared if origin == DEFAULT else value
    assert (found.api, found.origin) == (api, origin)
    assert found.slope == pytest.approx(expected) if expected is not None else found.slope is None


def test_source_ignores_names_that_are_not_a_framework_api() -> None:
    assert list(scan("import mylib\nmylib.LeakyReLU()\nleaky_relu(x)", filename="m.py")) == []


# ----------------------------------------------------------------------------- artefacts

def test_torch_factory_walks_modules_and_traces_functional_calls(models: dict[str, Path]) -> None:
    found = audit(f"{models['torch']}:make")
    assert [(a.where.split()[-1], a.origin) for a in found.activations] == [
        ("act1", PASSED), ("act2", DEFAULT), ("(Discriminator.forward)", PASSED)]
    assert [a.equals_default for a in found.activations] == [False, True, False]
    assert "torch.fx" in found.notes[0]


TWO_MODES_SOURCE = '''
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import LeakyReLU


def block(width):
    return nn.Sequential(nn.Linear(width, width), nn.LeakyReLU())


class Net(nn.Module):
    def __init__(self, slope=0.3):
        super().__init__()
        self.first = LeakyReLU(0.2)
        self.body = block(4)
        self.slope = slope

    def forward(self, x):
        x = self.body(self.first(x))
        x = F.leaky_relu(x)
        return F.leaky_relu(x, negative_slope=self.slope)


def make():
    return Net()
'''


def _line_and_implicit(found) -> list[tuple[str, bool]]:
    return sorted((a.where.split()[0], a.implicit) for a in found.activations)


def test_the_source_and_the_factory_audit_agree_on_implicit_defaults_and_lines(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "two_modes.py").write_text(TWO_MODES_SOURCE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    source, factory = audit("two_modes.py"), audit("two_modes.py:make")
    assert _line_and_implicit(source) == _line_and_implicit(factory) == [
        ("two_modes.py:14", False), ("two_modes.py:20", True), ("two_modes.py:21", False),
        ("two_modes.py:8", True)]
    assert [a.where for a in factory.activations if a.implicit] == [
        "two_modes.py:8 (block) body.1", "two_modes.py:20 (Net.forward)"]
    assert [a.slope for a in factory.activations][-1] == pytest.approx(0.3)  # the built model's slope


def test_onnx_export_lists_the_same_slopes_with_their_dtype(models: dict[str, Path]) -> None:
    onnx_audit = audit(str(models["onnx"]))
    assert all(a.api == "ONNX LeakyRelu" and a.dtype == "float32" for a in onnx_audit.activations)
    torch_audit = audit(f"{models['torch']}:make")
    assert not [p for p in pair(torch_audit, onnx_audit) if p.mismatch]


def test_onnx_node_without_alpha_is_the_onnx_default(tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT16, [4]) for n in ("x", "y")]
    graph = helper.make_graph([helper.make_node("LeakyRelu", ["x"], ["y"], name="act")], "g", io[:1], io[1:])
    onnx.save(helper.make_model(graph), str(tmp_path / "bare.onnx"))
    (found,) = audit(str(tmp_path / "bare.onnx")).activations
    api = "ONNX LeakyRelu"
    assert (found.where, found.origin, found.slope, found.dtype) == ("act", DEFAULT, entry_for(api).declared, "float16")


def test_torch_export_program_keeps_the_implicit_default_and_module_path(models: dict[str, Path]) -> None:
    found = audit(str(models["pt2"])).activations
    implicit = [a for a in found if a.implicit]
    assert [a.api for a in implicit] == ["torch.nn.functional.leaky_relu"]
    assert "act2" in implicit[0].where


def test_keras_save_is_read_from_its_config(models: dict[str, Path], tmp_path: Path) -> None:
    model = _import(models["keras"]).make()
    model.save(str(tmp_path / "d.keras"))
    found = audit(str(tmp_path / "d.keras")).activations
    assert [a.api for a in found] == ["keras.layers.LeakyReLU"] * 2
    assert [(a.origin, a.equals_default) for a in found] == [(STORED, False), (STORED, True)]
    assert {a.dtype for a in found} == {"float32"}


# ----------------------------------------------------------------------------- msprobe statistics

@pytest.mark.parametrize(("alpha", "dtype", "high", "low", "expect"), [
    (2.0, "float16", 1.0, -40000.0, "overflow"),
    (0.2, "float16", float("inf"), -1.0, "65504"),
    (0.01, "float32", 1e-6, -1e-6, "subnormal in float16"),
    (0.01, "float32", 1e-39, -1e-39, "subnormal in bfloat16"),
    (0.5, "float16", 1.0, -40000.0, None),
], ids=["slope>1 overflow", "fp16 inf", "fp16 subnormal", "bf16 subnormal", "safe"])
def test_stats_hazards(alpha: float, dtype: str, high: float, low: float, expect) -> None:
    found = hazards(alpha=alpha, dtype=dtype, high=high, low=low)
    assert any(expect in h for h in found) if expect else found == ()


def test_msprobe_statistics_dump_gives_slopes_extremes_and_hazards() -> None:
    """A real statistics dump (tests/fixtures/msprobe/make_stats_hazards.py): one hazard per call.

    Made offline: importing msprobe replaces ``sys.modules["tensorflow"]`` with a stub."""
    found = audit(str(FIXTURES / "stats_hazards")).activations
    assert [(a.origin, a.dtype) for a in found] == [(DEFAULT, "float16"), (PASSED, "float16"), (PASSED, "float16")]
    assert [a.api for a in found if a.implicit] == ["torch.nn.functional.leaky_relu"]
    assert [[h.split()[0] for h in a.hazards] for a in found] == [["subnormal"], ["overflow:"], ["fp16"]]
    assert found[2].stats["Max"] == float("inf")


def test_msprobe_statistics_dump_without_hazards() -> None:
    found = audit(str(FIXTURES / "statistics")).activations
    assert found and all(a.stats and not a.hazards for a in found)


# ----------------------------------------------------------------------------- CLI

def test_against_reports_exactly_the_changed_pair(models: dict[str, Path], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "audit.json"
    result = run_cli(["audit", f"{models['torch']}:make", "--against", str(models["changed.onnx"]),
                      "--json", str(report)], capsys)
    assert result.code == 1, result.text
    doc = json.loads(report.read_text())
    assert doc["schema"] == "leakyrelu-audit/1" and doc["verdict"] == "fail"
    assert [p["index"] for p in doc["pairs"] if p["mismatch"]] == [2]
    assert "0.25" in result.out and "1 of 3 pairs differ" in result.out


def test_against_names_both_defaults(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "t.py").write_text("import torch.nn as nn\nnn.LeakyReLU()\n")
    (tmp_path / "k.py").write_text("from keras import layers\nlayers.LeakyReLU()\n")
    result = run_cli(["audit", str(tmp_path / "t.py"), "--against", str(tmp_path / "k.py"),
                      "--json", str(tmp_path / "a.json")], capsys)
    assert result.code == 1
    (mismatch,) = json.loads((tmp_path / "a.json").read_text())["pairs"]
    assert "torch default of torch.nn.LeakyReLU" in mismatch["reason"]
    assert "Keras layer default of keras.layers.LeakyReLU" in mismatch["reason"]


def test_strict_fails_on_an_implicit_default(models: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["audit", str(models["mindspore"])], capsys).code == 0
    assert run_cli(["audit", str(models["mindspore"]), "--strict"], capsys).code == 1
    assert run_cli(["audit", str(models["onnx"]), "--strict"], capsys).code == 0  # ONNX stores every alpha


def test_unreadable_targets_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.onnx").write_bytes(b"not a protobuf at all \xff\xfe")
    assert_usage_error(run_cli(["audit", str(tmp_path / "bad.onnx")], capsys), mentions="not a readable ONNX")
    (tmp_path / "bad.keras").write_bytes(b"PK no zip")
    assert_usage_error(run_cli(["audit", str(tmp_path / "bad.keras")], capsys), mentions="not a readable .keras")
    assert_usage_error(run_cli(["audit", str(tmp_path / "missing.py")], capsys), mentions="no such file")
    (tmp_path / "broken.py").write_text("def f(:\n")
    assert_usage_error(run_cli(["audit", str(tmp_path / "broken.py")], capsys), mentions="not valid Python")


def test_json_report_may_not_overwrite_the_target(models: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(["audit", str(models["onnx"]), "--json", str(models["onnx"])], capsys)
    assert_usage_error(result, mentions="would overwrite")
    assert models["onnx"].stat().st_size > 0


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SavedModel with one tf.nn.leaky_relu at the default slope and one at 0.5."""
    tf = pytest.importorskip("tensorflow")

    class Model(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
        def __call__(self, x):
            return tf.nn.leaky_relu(x) + tf.nn.leaky_relu(x, alpha=0.5)

    directory = tmp_path_factory.mktemp("savedmodel") / "sm"
    tf.saved_model.save(Model(), str(directory))
    return directory


def test_saved_model_ops_with_a_stripped_alpha_are_the_tf_default(saved_model: Path) -> None:
    found = audit(str(saved_model)).activations
    api = "tf.nn.leaky_relu"
    assert [(a.api, a.origin, a.slope) for a in found] == [(api, DEFAULT, entry_for(api).declared), (api, STORED, 0.5)]
    assert {a.dtype for a in found} == {"float32"}


def test_the_audits_saved_model_schema_reads_every_node_tensorflows_own_reads(saved_model: Path) -> None:
    from tensorflow.core.protobuf import saved_model_pb2

    from conformance.audit.saved_model_schema import saved_model_class

    def nodes(saved) -> list[tuple]:
        graphs = [meta.graph_def for meta in saved.meta_graphs]
        functions = [(f.signature.name, f.node_def) for graph in graphs for f in graph.library.function]
        every = [("", node) for graph in graphs for node in graph.node] + \
                [(name, node) for name, defs in functions for node in defs]
        return [(where, node.name, node.op, sorted((key, value.f, value.type) for key, value in node.attr.items()))
                for where, node in every]

    data = (saved_model / "saved_model.pb").read_bytes()
    theirs, ours = nodes(saved_model_pb2.SavedModel.FromString(data)), nodes(saved_model_class().FromString(data))
    assert ours == theirs and sum(op == "LeakyRelu" for _, _, op, _ in ours) == 2


def test_a_directory_skips_a_broken_file_with_a_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "ok.py").write_text("import jax\njax.nn.leaky_relu(x)\n")
    (tmp_path / "broken.py").write_text("def f(:\n")
    found = audit(str(tmp_path))
    assert [a.api for a in found.activations] == ["jax.nn.leaky_relu"]
    assert len(found.notes) == 1 and "broken.py" in found.notes[0]


def test_a_failing_factory_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "f.py").write_text("def make():\n    raise RuntimeError('no weights here')\n")
    assert_usage_error(run_cli(["audit", f"{tmp_path / 'f.py'}:make"], capsys), mentions="no weights here")
    assert_usage_error(run_cli(["audit", "no_such_package_xyz.models:make"], capsys), mentions="cannot load")

"""``conformance audit`` of PReLU and RReLU: each layer or call with the arguments that shape it, and
for a built torch model where each PReLU weight stands (its initial value, or trained).

The defaults expected come from ``conformance.ops`` (each with its source), never restated here.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.audit import audit
from conformance.audit.record import DEFAULT, DYNAMIC, INITIAL, PASSED, STORED, TRAINED
from conformance.ops import OP_DEFAULTS, RRELU_EVAL_SLOPE, RRELU_LOWER, RRELU_UPPER
from tests.helpers import run_cli

torch = pytest.importorskip("torch")

TORCH_PRELU = next(d.slope for d in OP_DEFAULTS if d.whose == "torch's PReLU initial value")
KERAS_PRELU = next(d.slope for d in OP_DEFAULTS if d.whose == "Keras's PReLU initial value")

MODEL = (Path(__file__).parents[2] / "examples" / "prelu_net.py").read_text(encoding="utf-8")

KERAS_SOURCE = '''
from tensorflow import keras
from keras import layers, initializers


def make():
    return [layers.PReLU(), keras.layers.PReLU("ones", shared_axes=[1, 2]),
            layers.PReLU(alpha_initializer=initializers.Constant(0.25)), layers.PReLU(alpha_initializer=init)]
'''


@pytest.fixture()
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "prelu_net.py").write_text(MODEL, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return "prelu_net.py"


def _rows(target: str) -> list[tuple]:
    return [(a.where.split()[0], a.api, a.origin, a.slope, a.bounds, a.arguments) for a in audit(target).activations]


def test_a_sources_prelu_and_rrelu_calls_are_listed_with_their_arguments(model: str) -> None:
    assert _rows(model) == [
        ("prelu_net.py:17", "torch.nn.PReLU", DEFAULT, TORCH_PRELU, None, ("num_parameters=3",)),
        ("prelu_net.py:18", "torch.nn.RReLU", PASSED, pytest.approx(0.2), (0.1, 0.3), ()),
        ("prelu_net.py:23", "torch.nn.functional.rrelu", DEFAULT, RRELU_EVAL_SLOPE, (RRELU_LOWER, RRELU_UPPER),
         ("training=True",)),
        ("prelu_net.py:23", "torch.nn.functional.prelu", DYNAMIC, None, None, ()),
    ]


def test_keras_prelu_calls_are_listed_with_their_initializer_and_shared_axes(tmp_path: Path) -> None:
    (tmp_path / "k.py").write_text(KERAS_SOURCE, encoding="utf-8")
    found = audit(str(tmp_path / "k.py")).activations
    assert [(a.api, a.origin, a.slope, a.arguments) for a in found] == [
        ("keras.layers.PReLU", DEFAULT, KERAS_PRELU, ()),
        ("keras.layers.PReLU", PASSED, 1.0, ("shared_axes=[1, 2]",)),
        ("keras.layers.PReLU", PASSED, 0.25, ()),
        ("keras.layers.PReLU", DYNAMIC, None, ()),
    ]


def test_an_untouched_prelu_is_at_its_initial_value_and_a_modified_one_is_trained(model: str) -> None:
    untouched, modified = audit(f"{model}:make").activations[0], audit(f"{model}:trained").activations[0]
    assert (untouched.where, untouched.provenance, untouched.origin, untouched.weight) == (
        "prelu_net.py:17 (Net.__init__) act", INITIAL, DEFAULT, (TORCH_PRELU,) * 3)
    assert (modified.provenance, modified.origin, modified.slope) == (TRAINED, STORED, None)
    assert modified.weight == (TORCH_PRELU, pytest.approx(0.3), TORCH_PRELU)


def test_a_built_model_lists_its_rrelu_and_the_functional_calls_in_call_order(model: str) -> None:
    found = audit(f"{model}:make").activations
    assert [(a.api, a.origin) for a in found] == [
        ("torch.nn.PReLU", DEFAULT), ("torch.nn.RReLU", PASSED), ("torch.nn.functional.prelu", STORED),
        ("torch.nn.functional.rrelu", DEFAULT)]
    assert found[1].bounds == (0.1, 0.3) and found[1].slope == pytest.approx(0.2)
    assert found[2].weight == (pytest.approx(0.2),) * 3  # the parameter the call was given
    assert found[3].arguments == ("training=True",)


def test_the_command_prints_where_each_weight_stands_and_writes_it_to_json(
        model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(["audit", f"{model}:trained", "--json", str(tmp_path / "a.json")], capsys)
    assert result.code == 0, result.text
    assert "trained" in result.out and "0.25 to 0.3 stored" in result.out
    assert "RReLU [0.1, 0.3]" in result.out
    listed = json.loads((tmp_path / "a.json").read_text())["audit"]["activations"]
    assert [(a["op"], a["bounds"]) for a in listed[1:]] == [
        ("rrelu", [0.1, 0.3]), ("prelu", None), ("rrelu", [RRELU_LOWER, RRELU_UPPER])]
    first = listed[0]
    assert (first["op"], first["provenance"], len(first["weight"])) == ("prelu", TRAINED, 3)
    assert first["default"] == {"api": "torch.nn.PReLU", "framework": "torch", "slope": TORCH_PRELU}
    untouched = run_cli(["audit", f"{model}:make"], capsys)
    assert untouched.code == 0 and "initial value" in untouched.out


def test_strict_fails_on_an_implicit_initial_value_and_against_pairs_the_weights(
        model: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["audit", model, "--strict"], capsys).code == 1  # nn.PReLU() and F.rrelu() default
    assert run_cli(["audit", f"{model}:make", "--against", f"{model}:make"], capsys).code == 0
    differ = run_cli(["audit", f"{model}:make", "--against", f"{model}:trained"], capsys)
    assert differ.code == 1 and "1 of 4 pairs differ" in differ.out, differ.text


def test_a_saved_keras_prelu_is_read_from_its_config(tmp_path: Path) -> None:
    keras = pytest.importorskip("keras")
    model = keras.Sequential([keras.Input((4, 4, 2)), keras.layers.PReLU(shared_axes=[1, 2]),
                              keras.layers.PReLU(alpha_initializer=keras.initializers.Constant(0.25))])
    model.save(str(tmp_path / "m.keras"))
    found = audit(str(tmp_path / "m.keras")).activations
    assert [(a.api, a.origin, a.slope, a.arguments, a.dtype) for a in found] == [
        ("keras.layers.PReLU", STORED, KERAS_PRELU, ("shared_axes=[1, 2]",), "float32"),
        ("keras.layers.PReLU", STORED, 0.25, (), "float32")]

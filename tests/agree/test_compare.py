"""`compare --reference-y/--reference-dx`: a torch fp16 dump against a TensorFlow fp16 dump of
the same inputs, both made here by the real frameworks."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conformance.dtypes import all_patterns
from conformance.render.export import SCHEMA, validate
from tests.helpers import assert_usage_error, bits_differ, from_torch, run_cli, to_torch

ALPHA = 0.2


def _torch(x: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    torch = pytest.importorskip("torch")
    t = to_torch(x).requires_grad_(True)
    y = torch.nn.functional.leaky_relu(t, ALPHA)
    y.backward(to_torch(dy))
    return from_torch(y.detach(), "float16"), from_torch(t.grad, "float16")


def _tensorflow(x: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    tf = pytest.importorskip("tensorflow")
    t = tf.Variable(x)
    with tf.GradientTape() as tape:
        y = tf.nn.leaky_relu(t, alpha=ALPHA)
    dx = tape.gradient(y, t, output_gradients=tf.constant(dy))
    return y.numpy(), dx.numpy()


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, np.ndarray]]:
    where = tmp_path_factory.mktemp("dumps")
    x = all_patterns("float16")
    dy = x[np.random.default_rng(0).permutation(x.size)]
    arrays = {"x": x, "dy": dy}
    arrays["torch_y"], arrays["torch_dx"] = _torch(x, dy)
    arrays["tf_y"], arrays["tf_dx"] = _tensorflow(x, dy)
    for name, a in arrays.items():
        np.save(where / f"{name}.npy", a)
    return where, arrays


def test_torch_dump_against_tensorflow_dump(dumps, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    where, arrays = dumps
    report = tmp_path / "r.json"
    res = run_cli(["compare", "--x", str(where / "x.npy"), "--alpha", str(ALPHA),
                   "--y", str(where / "tf_y.npy"), "--reference-y", str(where / "torch_y.npy"),
                   "--dy", str(where / "dy.npy"), "--dx", str(where / "tf_dx.npy"),
                   "--reference-dx", str(where / "torch_dx.npy"), "--json", str(report)], capsys)
    assert res.code in (0, 1), res.text
    doc = json.loads(report.read_text())
    assert validate(doc, SCHEMA) == []
    found = {e["direction"]: e for e in doc["agreement"]}
    for direction, out in (("forward", "y"), ("backward", "dx")):
        entry = found[direction]
        expected = int(bits_differ(arrays[f"tf_{out}"], arrays[f"torch_{out}"]).sum())
        assert (entry["reference"], entry["backend"]) == (f"torch_{out}.npy", f"tf_{out}.npy")
        assert (entry["differing"], entry["elements"]) == (expected, arrays["x"].size)
        assert expected > 0 and not entry["identical"]
        assert entry["causes"][0] == "alpha-precision"  # TF rounds the slope to fp16; torch does not
        assert entry["why"].startswith(f"tf_{out}.npy: alpha-precision")
    assert "agreement with torch_y.npy" in res.out


def test_same_dump_twice_is_identical(dumps, capsys: pytest.CaptureFixture[str]) -> None:
    where, _ = dumps
    res = run_cli(["compare", "--x", str(where / "x.npy"), "--alpha", str(ALPHA), "--y",
                   str(where / "torch_y.npy"), "--reference-y", str(where / "torch_y.npy")], capsys)
    assert res.code in (0, 1), res.text
    assert "✓" in res.out


@pytest.mark.parametrize(("extra", "mentions"), [
    (["--reference-dx", "dx.npy"], "--reference-dx needs --dx"),
    (["--msprobe", "d", "--reference-y", "y.npy"], "--reference-y"),
])
def test_reference_flag_errors(extra: list[str], mentions: str, capsys: pytest.CaptureFixture[str]) -> None:
    base = [] if "--msprobe" in extra else ["--x", "x.npy", "--y", "y.npy", "--alpha", "0.2"]
    assert_usage_error(run_cli(["compare", *base, *extra], capsys), mentions=mentions)

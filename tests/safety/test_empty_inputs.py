"""Nothing to judge is no PASS on every compare source: an msprobe dump or an export-cases
manifest whose x holds no elements is exit 2 with one line, as plain ``--x`` is."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conformance.ingest.manifest import FORMAT
from conformance.reference import golden
from tests.helpers import assert_usage_error, run_cli

ALPHA = 0.25
FORWARD = "Functional.leaky_relu.0.forward"


def _tensor(name: str, a: np.ndarray) -> dict:
    return {"type": "torch.Tensor", "dtype": "torch.float16", "shape": list(a.shape), "data_name": name}


def _msprobe_dump(root: Path, x: np.ndarray) -> Path:
    """A one-call msprobe tensor dump (step0/proc0/dump.json) whose tensors are .npy files."""
    proc = root / "step0" / "proc0"
    (proc / "dump_tensor_data").mkdir(parents=True)
    y = golden.forward(x, ALPHA)
    for name, a in (("x.npy", x), ("y.npy", y)):
        np.save(proc / "dump_tensor_data" / name, a)
    entry = {"input_args": [_tensor("x.npy", x), {"type": "float", "value": ALPHA}],
             "input_kwargs": {}, "output": [_tensor("y.npy", y)]}
    doc = {"task": "tensor", "level": "L1", "framework": "pytorch",
           "dump_data_dir": str(proc / "dump_tensor_data"), "data": {FORWARD: entry}}
    (proc / "dump.json").write_text(json.dumps(doc))
    return root


def _manifest(root: Path, x: np.ndarray) -> Path:
    """An export-cases directory with one forward float16 case and the device's (exact) output."""
    for sub in ("inputs", "cases"):
        (root / sub).mkdir(parents=True)
    np.save(root / "inputs" / "x.npy", x)
    np.save(root / "cases" / "c00000.out.npy", golden.forward(x, ALPHA))
    alpha = float(ALPHA).hex()
    row = {"backend": "numpy", "profile": None, "variant": None, "dtype": "float16", "out_dtype": "float16",
           "direction": "forward", "alpha": alpha, "cases": ["c00000"]}
    case = {"id": "c00000", "label": "edges", "dtype": "float16", "out_dtype": "float16",
            "direction": "forward", "alpha": alpha, "x": "inputs/x.npy", "dy": None,
            "out": "cases/c00000.out.npy", "rejected": "cases/c00000.rejected.txt"}
    manifest = {"format": FORMAT, "seed": 0, "max_examples": 1, "alphas": [alpha], "rows": [row], "cases": [case]}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


SOURCES = [("--msprobe", _msprobe_dump), ("--manifest", _manifest)]


@pytest.mark.parametrize("flag, build", SOURCES)
def test_a_source_with_data_passes(tmp_path: Path, capsys, flag: str, build) -> None:
    root = build(tmp_path / "src", np.float16([-2, -0.5, 0, 1, 3, -1e-4, 7, -65504]))
    result = run_cli(["compare", flag, str(root)], capsys)
    assert result.code == 0, result.text


@pytest.mark.parametrize("shape", [(0,), (0, 37)])
@pytest.mark.parametrize("flag, build", SOURCES)
def test_a_source_whose_x_holds_no_elements_is_exit_2(tmp_path: Path, capsys, flag: str, build,
                                                       shape: tuple[int, ...]) -> None:
    root = build(tmp_path / "src", np.zeros(shape, np.float16))
    report = tmp_path / "r.json"
    result = run_cli(["compare", flag, str(root), "--json", str(report)], capsys)
    assert_usage_error(result, mentions="holds no elements")
    assert "proves nothing" in result.err
    assert not report.exists()  # exit 2 leaves no report, not even the placeholder of a run

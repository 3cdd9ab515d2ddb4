"""Hostile msprobe dumps, Keras files and sources: each is one line and exit 2 (or a skipped
note inside a directory), never a traceback, a hang, or a file outside the dump read."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from conformance.ingest import bounded
from tests.helpers import assert_usage_error, run_cli
from tests.safety.zips import patch_members, write_zip

FIXTURES = Path(__file__).parent.parent / "fixtures" / "msprobe"
FORWARD = "Functional.leaky_relu.1.forward"


@pytest.fixture
def dump(tmp_path: Path) -> Path:
    pytest.importorskip("torch")
    return Path(shutil.copytree(FIXTURES / "leaky3", tmp_path / "leaky3"))


def _proc(root: Path) -> Path:
    (found,) = root.glob("step*/proc*")
    return found


def _edit(root: Path, change) -> None:
    file = _proc(root) / "dump.json"
    doc = json.loads(file.read_text())
    change(doc)
    file.write_text(json.dumps(doc))


def _compare(root: Path, capsys):
    return run_cli(["compare", "--msprobe", str(root)], capsys)


def _set(path: tuple, value):
    def change(doc: dict) -> None:
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return change


SLOPE = ("data", FORWARD, "input_args", 1, "value")
DATA_NAME = ("data", FORWARD, "input_args", 0, "data_name")


@pytest.mark.parametrize("change, mentions", [
    (_set(("framework",), ["pytorch"]), "framework \"['pytorch']\" is not read"),
    (_set(DATA_NAME, 7), "no data_name string"),
    (_set(DATA_NAME, ["x.pt"]), "no data_name string"),
    (_set(("data", FORWARD, "input_args", 0, "shape"), [37, 4]), "says shape [37, 4]"),
    (_set(("data", FORWARD, "input_args", 0, "dtype"), "torch.float16"), "says float16"),
    (_set(SLOPE, float("nan")), "is not a finite number"),
    (_set(SLOPE, float("inf")), "is not a finite number"),
    (_set(SLOPE, 10 ** 400), "is not a finite number"),
])
def test_a_hostile_dump_json_is_one_line(dump: Path, capsys, change, mentions: str) -> None:
    _edit(dump, change)
    assert_usage_error(_compare(dump, capsys), mentions=mentions)


@pytest.mark.parametrize("text, mentions", [
    ('{"task": "tensor", "task": "statistics", "data": {}}', "appears twice"),
    ("[" * 50_000 + "]" * 50_000, "nested deeper than"),
])
def test_repeated_keys_and_deep_nesting_in_dump_json_are_one_line(dump: Path, capsys, text, mentions) -> None:
    (_proc(dump) / "dump.json").write_text(text)
    assert_usage_error(_compare(dump, capsys), mentions=mentions)


def test_a_slope_of_1e400_in_the_text_is_one_line(dump: Path, capsys) -> None:
    file = _proc(dump) / "dump.json"
    doc = json.loads(file.read_text())
    doc["data"][FORWARD]["input_args"][1]["value"] = 0.25
    file.write_text(json.dumps(doc).replace("0.25", "1e400"))
    assert_usage_error(_compare(dump, capsys), mentions="is not a finite number")


@pytest.mark.parametrize("make, mentions", [
    (lambda torch: torch.zeros(4, 37).to_sparse(), "holds a sparse_coo tensor"),
    (lambda torch: torch.zeros(4, 37, device="meta"), "holds a meta tensor"),
])
def test_sparse_and_meta_tensors_are_one_line(dump: Path, capsys, make, mentions: str) -> None:
    import torch

    torch.save(make(torch), _proc(dump) / "dump_tensor_data" / f"{FORWARD}.input.0.pt")
    assert_usage_error(_compare(dump, capsys), mentions=mentions)


def test_a_pt_zip_bomb_is_refused_before_torch_reads_it(dump: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(bounded, "TENSOR_HEADROOM", 4096)
    target = _proc(dump) / "dump_tensor_data" / f"{FORWARD}.input.0.pt"
    write_zip(target, {"archive/data/0": bytes(1 << 20), "archive/data.pkl": b"x"}, compress=True)
    assert target.stat().st_size < 8192
    assert_usage_error(_compare(dump, capsys), mentions="beyond the")


def test_a_link_out_of_the_dump_is_not_followed(dump: Path, tmp_path: Path, capsys) -> None:
    target = _proc(dump) / "dump_tensor_data" / f"{FORWARD}.input.0.pt"
    outside = tmp_path / "secret.pt"
    shutil.move(target, outside)
    os.symlink(outside, target)
    assert_usage_error(_compare(dump, capsys), mentions="link out of the dump directory")


# ----------------------------------------------------------------------------- keras

def _keras(tmp_path: Path, config: bytes, *, compress: bool = False) -> Path:
    return write_zip(tmp_path / "m.keras", {"config.json": config, "metadata.json": b"{}"}, compress=compress)


def test_a_keras_config_bomb_is_refused_by_its_declared_size(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(bounded, "MAX_CONFIG", 1 << 16)
    model = _keras(tmp_path, b'{"a": "' + b" " * (1 << 20) + b'"}', compress=True)
    assert model.stat().st_size < 8192
    assert_usage_error(run_cli(["audit", str(model)], capsys), mentions="bytes uncompressed, beyond the 65536")


@pytest.mark.parametrize("patch, mentions", [({"method": 99}, "compression method 99"),
                                             ({"encrypted": True}, "is encrypted")])
def test_keras_members_with_unknown_methods_or_encryption_are_one_line(tmp_path: Path, capsys, patch,
                                                                       mentions: str) -> None:
    model = patch_members(_keras(tmp_path, b'{"class_name": "LeakyReLU"}'), **patch)
    assert_usage_error(run_cli(["audit", str(model)], capsys), mentions=mentions)


def test_a_deep_keras_config_is_one_line(tmp_path: Path, capsys) -> None:
    model = _keras(tmp_path, b'{"config": ' * 5000 + b"1" + b"}" * 5000)
    assert_usage_error(run_cli(["audit", str(model)], capsys), mentions="nested deeper than")


def test_markup_in_a_keras_layer_name_is_shown_as_text(tmp_path: Path, capsys) -> None:
    layer = {"class_name": "LeakyReLU", "config": {"name": "[/x][bold]evil", "negative_slope": 0.2}}
    model = _keras(tmp_path, json.dumps(layer).encode())
    result = run_cli(["audit", str(model)], capsys)
    assert result.code == 0 and "Traceback" not in result.text, result.text
    assert "[/x][bold]evil" in result.out


# ----------------------------------------------------------------------------- sources

def test_a_fifo_named_like_a_source_is_refused_without_blocking(tmp_path: Path, capsys) -> None:
    os.mkfifo(tmp_path / "f.py")
    assert_usage_error(run_cli(["audit", str(tmp_path / "f.py")], capsys), mentions="not a regular file")


def test_a_fifo_in_a_source_directory_is_skipped_with_a_note(tmp_path: Path, capsys) -> None:
    os.mkfifo(tmp_path / "f.py")
    (tmp_path / "m.py").write_text("import torch\ntorch.nn.LeakyReLU(0.1)\n")
    result = run_cli(["audit", str(tmp_path)], capsys)
    assert result.code == 0, result.text
    assert "f.py: not a regular file" in result.out and "0.1" in result.out


@pytest.mark.parametrize("source, mentions", [
    ("import torch\ntorch.nn.LeakyReLU(" + "+".join(["1"] * 200_000) + ")\n", "nested too deeply"),
    ("import torch\ntorch.nn.LeakyReLU(" + "9" * 401 + ")\n", "too large for a float"),
    ("import torch\ntorch.nn.LeakyReLU(" + "9" * 5000 + ")\n", "not valid python"),
])
def test_sources_beyond_parser_and_float_limits_are_one_line(tmp_path: Path, capsys, source: str,
                                                              mentions: str) -> None:
    (tmp_path / "m.py").write_text(source)
    assert_usage_error(run_cli(["audit", str(tmp_path / "m.py")], capsys), mentions=mentions)


def test_markup_in_a_source_expression_is_shown_as_text(tmp_path: Path, capsys) -> None:
    (tmp_path / "m.py").write_text("import torch\ntorch.nn.LeakyReLU(slopes['[/x]'])\n")
    result = run_cli(["audit", str(tmp_path / "m.py")], capsys)
    assert result.code == 0 and "Traceback" not in result.text, result.text
    assert "slopes['[/x]']" in result.out


def test_an_npy_in_an_msprobe_dump_is_checked_against_its_metadata(dump: Path, capsys) -> None:
    data = _proc(dump) / "dump_tensor_data"
    np.save(data / "x.npy", np.zeros((37, 4), np.float32))
    _edit(dump, _set(DATA_NAME, "x.npy"))
    assert_usage_error(_compare(dump, capsys), mentions="says shape [4, 37]")


def test_a_fifo_named_dump_json_is_refused_without_blocking(tmp_path: Path, capsys) -> None:
    (tmp_path / "step0" / "proc0").mkdir(parents=True)
    os.mkfifo(tmp_path / "step0" / "proc0" / "dump.json")
    assert_usage_error(run_cli(["compare", "--msprobe", str(tmp_path)], capsys), mentions="not a regular file")

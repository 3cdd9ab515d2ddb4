"""The default-slope table: declarations, live probes and the command."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conformance.backends import load
from conformance.frameworks.default_probes import PROBES, has_probe, probe
from conformance.reference.defaults import DEFAULTS, frameworks_with_default
from tests.helpers import run_cli


def test_declared_defaults_are_the_documented_ones() -> None:
    declared = {d.framework: d.declared for d in DEFAULTS}
    assert declared == {"CANN": 0.0, "torch": 0.01, "tf.nn": 0.2, "Keras layer": 0.3, "Keras ops": 0.2,
                        "MindSpore": 0.2, "ONNX": 0.01, "JAX": 0.01, "Paddle": 0.01}


def test_every_entry_with_a_module_has_a_probe_and_every_probe_an_entry() -> None:
    assert set(PROBES) == {d.api for d in DEFAULTS if d.module is not None}


# Frameworks in environments of their own are probed through their worker: tests/frameworks/test_envs.py.
@pytest.mark.parametrize("entry", [d for d in DEFAULTS if has_probe(d) and d.environment is None],
                         ids=lambda d: d.api)
def test_live_probe_agrees_with_declaration(entry) -> None:
    pytest.importorskip(entry.module)
    result = probe(entry)
    assert result.probed is not None
    assert np.float32(result.probed) == np.float32(entry.declared), result.status
    assert result.status == "agrees"


def test_a_wrong_declaration_is_flagged() -> None:
    torch_entry = next(d for d in DEFAULTS if d.api == "torch.nn.LeakyReLU")
    from dataclasses import replace

    assert probe(replace(torch_entry, declared=0.2)).status == "DISAGREES"


def test_frameworks_with_default_names_each_family() -> None:
    assert frameworks_with_default(0.0) == ("CANN",)
    assert set(frameworks_with_default(0.01)) == {"torch", "ONNX", "JAX", "Paddle"}
    assert frameworks_with_default(0.123) == ()


def test_defaults_command_prints_the_table(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    # the frameworks of environments of their own as if not set up: their workers' probes (a framework's
    # import each) are tests/frameworks/test_envs.py's; here, the table of the in-process ones
    for entry in DEFAULTS:
        if entry.environment is not None:
            variable = load(entry.environment).environment.variable
            monkeypatch.setenv(variable, str(tmp_path / entry.environment / "bin" / "python"))
    done = run_cli(["defaults"], capsys)
    assert done.code == 0, done.err
    assert "keras.layers.LeakyReLU" in done.out and "agrees" in done.out
    assert "Traceback" not in done.err

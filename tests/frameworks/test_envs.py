"""Paddle and MindSpore in environments of their own: declarations, worker command, the missing-env
message, a real round trip (skipped when the environment is not set up), and the default-slope probes."""
from __future__ import annotations

import numpy as np
import pytest

from conformance import backends
from conformance.backends import default_worker, load
from conformance.errors import BackendUnavailable
from conformance.frameworks.default_probes import NOT_SET_UP, has_probe, probe, probe_message
from conformance.frameworks.environments import ROOT
from conformance.reference import golden
from conformance.reference.defaults import DEFAULTS
from conformance.worker.protocol import Message
from conformance.worker.server import answer
from tests.helpers import assert_same_bits, assert_usage_error, bare_backend, run_cli

OWN = {"paddle": ("float32", "float64"), "mindspore": ("float16", "float32")}


def _env_ready(name: str) -> bool:
    return load(name).environment.missing() is None


@pytest.fixture
def missing_envs(monkeypatch, tmp_path):
    """Point both frameworks at interpreters that do not exist."""
    for name in OWN:
        monkeypatch.setenv(load(name).environment.variable, str(tmp_path / name / "bin" / "python"))


@pytest.mark.parametrize("name", OWN)
def test_runs_exactly_the_dtypes_its_cpu_kernel_has(name: str) -> None:
    backend = bare_backend(name)
    for pair in backends.suite_pairs(backend):
        for direction in ("forward", "backward"):
            runs = backend.supports(*pair, direction)
            assert runs == (pair[0] == pair[1] and pair[0] in OWN[name]), (pair, direction)
            if not runs:
                assert name in backends.skip_reason(backend, *pair, direction)


@pytest.mark.parametrize("name", OWN)
def test_is_opt_in(name: str) -> None:
    assert name in backends.names()
    assert not load(name).default_suite


@pytest.mark.parametrize("name", OWN)
def test_default_worker_is_its_environments_python(name: str, monkeypatch, tmp_path) -> None:
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    monkeypatch.setenv(load(name).environment.variable, str(python))
    spec = default_worker(name)
    assert spec is not None
    assert spec.command == f"{python} -m conformance worker --backend {name}"


@pytest.mark.parametrize("name", OWN)
def test_default_environment_lives_in_the_repository(name: str, monkeypatch) -> None:
    env = load(name).environment
    monkeypatch.delenv(env.variable, raising=False)
    assert env.python() == ROOT / f".venv-{name}" / "bin" / "python"


@pytest.mark.parametrize("name", OWN)
def test_a_missing_environment_says_how_to_create_it(name: str, missing_envs) -> None:
    with pytest.raises(BackendUnavailable, match=rf"backend {name}: .*`make conformance-all` creates it"):
        default_worker(name)


@pytest.mark.parametrize("name", OWN)
def test_run_without_the_environment_is_a_one_line_usage_error(name: str, missing_envs, capsys) -> None:
    done = run_cli(["run", "--backend", name, "--dtype", "float32", "--alpha", "0.2"], capsys)
    assert_usage_error(done, mentions="make conformance-all")


# ----------------------------------------------------------------------------- real workers

_X = np.array([-2.0, -1.0, -0.5, 0.5, 1.0, 3.0, -4.0, 2.0], dtype=np.float32)  # products are exact


@pytest.mark.parametrize("name", OWN)
def test_round_trip_through_the_real_worker(name: str) -> None:
    if not _env_ready(name):
        pytest.skip(f"{name} environment not set up (make conformance-all)")
    from conformance.worker.client import connect

    backend = connect(default_worker(name))
    assert backend.name == name and backend.versions.get(load(name).packages[0]) not in (None, "not installed")
    forward = backend.forward(_X, 0.25)
    assert forward.rejected is None, forward.rejected
    assert_same_bits(forward.value, golden.forward(_X, 0.25), what=f"{name} forward")
    dy = np.linspace(-2, 2, _X.size).astype(np.float32)
    backward = backend.backward(dy, _X, 0.25)
    assert backward.rejected is None, backward.rejected
    assert_same_bits(backward.value, golden.backward(dy, _X, 0.25), what=f"{name} backward")


# ----------------------------------------------------------------------------- default slopes

def _entries(name: str):
    return [d for d in DEFAULTS if d.environment == name]


@pytest.mark.parametrize("name", OWN)
def test_each_own_environment_framework_has_probed_defaults(name: str) -> None:
    entries = _entries(name)
    assert entries and all(has_probe(d) for d in entries)


@pytest.mark.parametrize("name", OWN)
def test_a_missing_environment_is_reported_not_skipped(name: str, missing_envs) -> None:
    for entry in _entries(name):
        assert probe(entry).status == f"{NOT_SET_UP} (make conformance-all)"


@pytest.mark.parametrize("name", OWN)
def test_defaults_are_probed_in_the_frameworks_own_environment(name: str) -> None:
    if not _env_ready(name):
        pytest.skip(f"{name} environment not set up (make conformance-all)")
    for entry in _entries(name):
        result = probe(entry)
        assert result.status == "agrees", result
        assert result.version is not None and result.version.startswith(entry.packages[0])


def test_the_worker_answers_a_probe_in_its_own_process() -> None:
    entry = next(d for d in DEFAULTS if d.api == "torch.nn.LeakyReLU")
    reply = answer(bare_backend("golden"), Message({"type": "probe", "api": entry.api}), probe=probe_message)
    assert reply.type == "probed", reply.header
    assert reply.header["slope"] == pytest.approx(0.01) and reply.header["version"].startswith("torch ")


def test_a_probe_of_an_unknown_api_is_an_error_reply() -> None:
    reply = answer(bare_backend("golden"), Message({"type": "probe", "api": "nope.leaky_relu"}),
                   probe=probe_message)
    assert reply.type == "error" and "no default-slope entry" in reply.header["message"]


def test_defaults_command_names_the_missing_environments(missing_envs, capsys) -> None:
    done = run_cli(["defaults"], capsys)
    assert done.code == 0, done.err
    text = " ".join(done.out.split())
    assert "not set up" in text and "make conformance-all" in text
    assert "version" in text


def test_an_in_process_probe_reports_the_version_it_ran() -> None:
    entry = next(d for d in DEFAULTS if d.api == "torch.nn.functional.leaky_relu")
    result = probe(entry)
    assert result.status == "agrees" and result.version is not None and result.version.startswith("torch 2.")


@pytest.mark.parametrize("name", OWN)
def test_a_pip_install_is_told_which_variable_to_set(name: str, missing_envs, monkeypatch) -> None:
    from conformance.frameworks import default_probes, environments

    monkeypatch.setattr(default_probes, "in_checkout", lambda: False)
    monkeypatch.setattr(environments, "in_checkout", lambda: False)
    variable = f"CONFORMANCE_{name.upper()}_PYTHON"
    for entry in _entries(name):
        assert probe(entry).status == f"{NOT_SET_UP} (set {variable})"
    assert "make" not in environments.Environment(name, f".venv-{name}").missing()

"""The backend registry (entry points, with the built-in table as fallback) and the facts backends own."""
from __future__ import annotations

import ast
import inspect
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from conformance import backends, suite
from conformance.errors import BackendUnavailable, UsageError
from tests import plugin_backend
from tests.helpers import assert_usage_error, run_cli

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = metadata.EntryPoint("plugin", "tests.plugin_backend:PluginBackend", backends.GROUP)


def _forget() -> None:
    backends.registry.cache_clear()
    backends.load.cache_clear()
    suite.backend_for.cache_clear()


@pytest.fixture
def installed(monkeypatch):
    """Pretend the installed metadata holds these entry points (None: it lacks the group)."""
    real = metadata.entry_points

    def install(*points: metadata.EntryPoint) -> None:
        def entry_points(**selection):  # other groups (numba's, when it compiles) as installed
            if selection.get("group") != backends.GROUP:
                return real(**selection)
            return [p for p in points if p.group == backends.GROUP]
        monkeypatch.setattr(backends.metadata, "entry_points", entry_points)
        _forget()
    yield install
    monkeypatch.undo()
    _forget()


def test_pyproject_registers_every_builtin_backend() -> None:
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][backends.GROUP]
    assert table == backends.BUILTIN


def test_metadata_without_the_group_falls_back_to_the_builtin_table(installed) -> None:
    installed()
    assert backends.names() == tuple(backends.BUILTIN)
    assert backends.default_backends() == ("golden", "torch", "tensorflow", "cann", "jax", "onnxruntime",
                                           "keras")
    assert type(backends.get_backend("golden")).__name__ == "GoldenBackend"


def test_entry_points_add_a_users_backend_and_override_builtins(installed) -> None:
    other = metadata.EntryPoint("golden", "tests.plugin_backend:PluginBackend", backends.GROUP)
    installed(PLUGIN, other, metadata.EntryPoint("x", "nowhere:X", "another.group"))
    assert "plugin" in backends.names() and "x" not in backends.names()
    assert isinstance(backends.get_backend("plugin"), plugin_backend.PluginBackend)
    assert isinstance(backends.get_backend("golden"), plugin_backend.PluginBackend)
    assert "plugin" in backends.default_backends()  # it declares default_suite


def test_a_broken_plugin_is_named_and_left_out_of_the_default_suite(installed, capsys) -> None:
    installed(metadata.EntryPoint("broken", "tests.no_such_module:Backend", backends.GROUP))
    with pytest.raises(BackendUnavailable, match="backend broken: cannot load tests.no_such_module"):
        backends.load("broken")
    assert "broken" not in backends.default_backends()
    assert "cannot load" in capsys.readouterr().err


def test_a_plugin_declares_its_pairs_skips_and_boundary_sizes(installed) -> None:
    installed(PLUGIN)
    rows, skipped = suite.plan(suite.Selection(backends=("plugin",), alphas=(0.2,), directions=("forward",)))
    assert {(r.dtype, r.out_dtype) for r in rows} == {("float32", "float32"), ("float32", "float16")}
    assert {why for _, why in skipped} == {"the plugin has no float16", "the plugin has no bfloat16",
                                           "the plugin has no float64"}
    inputs = suite.Inputs(seed=0, max_examples=2, alphas=(0.2,))
    shapes = [b.x.size for b in inputs.batches(rows[0]) if b.own]  # its own, beyond the shared sizes
    assert tuple(shapes) == plugin_backend.BOUNDARY


def test_a_plugin_runs_from_the_command_line(installed, tmp_path, capsys) -> None:
    installed(PLUGIN)
    result = run_cli(["run", "--backend", "plugin", "--alpha", "0.2", "--max-examples", "2"], capsys, cwd=tmp_path)
    assert result.code == 0, result.text
    assert "fp32→fp16" in result.out  # its extra pair ran
    assert "plugin bf16 forward alpha=0.2: the plugin has no bfloat16" in result.out  # skips say why


def test_cann_declares_the_facts_the_suite_used_to_hold() -> None:
    cann = suite.backend_for("cann", None, None)
    assert ("float32", "float16") in backends.suite_pairs(cann)
    assert max(backends.boundary_sizes(cann, "float16", "float16", "forward")) > 100_000
    torch = suite.backend_for("torch", None, None)
    assert max(backends.boundary_sizes(torch, "float16", "float16", "forward")) < 10_000
    assert backends.profiles_of("cann")[0] and backends.profiles_of("torch") == ((), ())


def test_suite_names_no_backend() -> None:
    literals = {node.value for node in ast.walk(ast.parse(inspect.getsource(suite)))
                if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    assert not literals & set(backends.BUILTIN)


def test_backends_without_profiles_refuse_one() -> None:
    with pytest.raises(UsageError, match="backend torch takes no profile"):
        backends.get_backend("torch", profile="ascend910b1")


@pytest.mark.parametrize("flag, value, owner", [("--profile", "ascend910a", "cann"), ("--variant", "layer", "keras")])
def test_profile_flags_name_the_backend_they_belong_to(flag: str, value: str, owner: str, capsys) -> None:
    assert_usage_error(run_cli(["run", "--backend", "golden", flag, value], capsys),
                       mentions=f"apply to the {owner} backend; add --backend {owner}")


def test_torch_npu_without_torch_npu_is_one_clear_line(capsys) -> None:
    import importlib.util

    if importlib.util.find_spec("torch_npu") is not None:
        pytest.skip("torch_npu is installed here")
    with pytest.raises(BackendUnavailable, match="torch_npu is not installed"):
        backends.get_backend("torch_npu")
    assert_usage_error(run_cli(["run", "--backend", "torch_npu"], capsys), mentions="torch_npu is not installed")


def test_the_same_relative_file_in_another_directory_is_another_backend(tmp_path, monkeypatch) -> None:
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "kernel.py").write_text(f"def make():\n    return {name!r}\n")
    found = []
    for name in ("one", "two"):
        monkeypatch.chdir(tmp_path / name)
        found.append(backends.load("kernel.py:make")())
    assert found == ["one", "two"]

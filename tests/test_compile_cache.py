"""``python -m conformance.compile_cache``: what ``make setup`` runs to fill numba's cache."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conformance import compile_cache, npu_impl
from conformance.npu_impl.chips import PROFILES
from conformance.npu_impl.variants import VARIANTS


def test_off_it_compiles_nothing_and_says_so():
    env = {**os.environ, "CONFORMANCE_COMPILED": "0"}
    done = subprocess.run([sys.executable, "-m", "conformance.compile_cache"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0
    assert "compiled paths off: nothing to cache" in done.stderr


def test_the_emulator_is_warmed_on_every_profile_and_variant(monkeypatch: pytest.MonkeyPatch):
    seen: set[tuple[str, str]] = set()

    def record(x, alpha, *, profile, variant, out_dtype):
        seen.add((profile, variant))

    monkeypatch.setattr(npu_impl, "leaky_relu", record)
    monkeypatch.setattr(npu_impl, "leaky_relu_backward", lambda dy, x, alpha, **kw: None)
    compile_cache.warm_emulator()
    assert seen == {(p, v) for p in PROFILES for v in VARIANTS}


def test_a_full_warm_up_leaves_a_stamp_and_a_changed_source_voids_it(tmp_path, monkeypatch: pytest.MonkeyPatch):
    if not compile_cache.jit.enabled():
        pytest.skip("the compiled paths are off: nothing is cached")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compile_cache, "warm", lambda **kw: 0.0)
    assert not compile_cache.cached()
    assert compile_cache.main() == 0
    assert compile_cache.cached()
    prints = compile_cache._fingerprint()
    monkeypatch.setattr(compile_cache, "_fingerprint", lambda: prints + "-a source changed")
    assert not compile_cache.cached()


class _Second:
    """A stand-in for the second process: its slopes line is read when the parent asks for it."""

    def __init__(self, calls: list[str], *, exit_code: int = 0):
        self.calls, self.returncode = calls, exit_code
        self.stdout = self

    def readline(self) -> str:
        self.calls.append("slopes line read")
        return "slope passes compiled\n"

    def wait(self) -> int:
        return self.returncode

    def kill(self) -> None:
        self.calls.append("killed")


def _steps(monkeypatch: pytest.MonkeyPatch, calls: list[str]) -> None:
    monkeypatch.setattr(compile_cache.jit, "enabled", lambda: True)
    for name in ("warm_golden", "warm_metrics", "warm_triage", "warm_emulator"):
        monkeypatch.setattr(compile_cache, name, lambda name=name: calls.append(name))


def test_side_by_side_the_metrics_wait_for_the_second_process_slope_passes(monkeypatch: pytest.MonkeyPatch):
    calls: list[str] = []
    _steps(monkeypatch, calls)
    started: list[str] = []
    monkeypatch.setattr(compile_cache, "_in_a_process", lambda step: started.append(step.__name__) or _Second(calls))
    compile_cache.warm(side_by_side=True)
    assert started == ["warm_second_share"]
    assert calls == ["warm_golden", "slopes line read", "warm_metrics", "warm_triage"]


def test_in_one_process_every_step_runs_in_turn(monkeypatch: pytest.MonkeyPatch):
    calls: list[str] = []
    _steps(monkeypatch, calls)
    compile_cache.warm()
    assert calls == ["warm_golden", "warm_metrics", "warm_triage", "warm_emulator"]


def test_a_failing_second_process_fails_the_warm_up(monkeypatch: pytest.MonkeyPatch):
    calls: list[str] = []
    _steps(monkeypatch, calls)
    monkeypatch.setattr(compile_cache, "_in_a_process", lambda step: _Second(calls, exit_code=3))
    with pytest.raises(RuntimeError, match=r"emulator's loops failed \(exit 3\)"):
        compile_cache.warm(side_by_side=True)


def test_the_triage_passes_warm_on_every_width_in_order_and_at_positions():
    compile_cache.warm_triage()  # a call the passes refuse (a dtype, a signature) fails here


def _cached_loop_files(folder) -> list:
    return sorted(p.name for p in folder.rglob("*.nb[ic]"))


def test_a_changed_module_of_loops_deletes_every_cached_loop_once(tmp_path, monkeypatch: pytest.MonkeyPatch):
    """numba keys a loop's cache on its own file only: a helper edited in another module voids them all."""
    if not compile_cache.jit.enabled():
        pytest.skip("the compiled paths are off: nothing is cached")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compile_cache, "warm", lambda **kw: 0.0)
    loops = compile_cache._loop_modules()
    assert {p.name for p in loops} >= {"scan_loops.py", "compiled_rounding.py", "ulp_loops.py"}
    planted = []
    for source in loops:
        folder = compile_cache._cache_dirs(source)[0]
        folder.mkdir(parents=True, exist_ok=True)
        planted += [folder / f"{source.stem}.loop-1.py311.nbi", folder / f"{source.stem}.loop-1.py311.1.nbc"]
    other = tmp_path / "elsewhere_0" / "other.loop-1.py311.nbi"  # another package's cache is left alone
    other.parent.mkdir()
    for path in (*planted, other):
        path.write_bytes(b"cached")
    assert compile_cache.main() == 0  # no stamp on record: nothing says the loops are current
    assert _cached_loop_files(tmp_path) == ["other.loop-1.py311.nbi"]
    assert compile_cache.cached()
    for path in planted:
        path.write_bytes(b"cached")
    assert compile_cache.clear_stale() == 0  # the stamp records the loops as they are
    line = compile_cache._loops_line()
    monkeypatch.setattr(compile_cache, "_loops_line", lambda: line + "-a helper changed")
    assert not compile_cache.cached()
    assert compile_cache.clear_stale() == len(planted)
    assert _cached_loop_files(tmp_path) == ["other.loop-1.py311.nbi"]
    assert compile_cache.clear_stale() == 0  # the stamp records the changed loops


def test_the_stamp_covers_the_modules_whose_constants_the_loops_compile_in():
    sources = {str(p.relative_to(compile_cache._ROOT)) for p in compile_cache._loop_sources()}
    assert {"dtypes.py", "reference/exact.py", "reference/compiled_rounding.py", "ulp_loops.py"} <= sources
    assert "cli.py" not in sources and "compile_cache.py" not in sources

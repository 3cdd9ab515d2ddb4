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

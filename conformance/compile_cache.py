"""Fill numba's cache with every compiled loop the commands call, so the first run does not compile.

``python -m conformance.compile_cache`` (``make setup`` runs it) calls the golden for each dtype
pair, the ULP and metric passes, and the emulated kernel of every chip profile and seeded
variant on small inputs, and throws the results away.  numba compiles a loop per argument
signature on its first call and keeps it in the cache (:mod:`conformance.jit` says where); a
later process loads it in milliseconds instead of compiling for tens of seconds.  The command
compiles in two processes: the golden's, the metrics' and triage's loops in one, the slope
passes and the emulator's loops in a second.
Without numba, or with ``CONFORMANCE_COMPILED=0``, it does nothing.

numba keys a loop's cache entry on the loop's own source file only, so a loop that calls a
helper in another module would go on running the helper it was compiled with.  The stamp
therefore also records the modules holding compiled loops, and when one of them changed,
:func:`clear_stale` deletes every cached loop of the package before the next warm-up.
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Optional

import numpy as np

from conformance import jit
from conformance.dtypes import info, ulp_distance
from conformance.errors import ConformanceError

__all__ = ["cached", "clear_stale", "fill", "warm"]

_ROOT = Path(__file__).resolve().parent  # the package
_STAMP = "compile-cache.stamp"  # the fingerprint of the sources and numba a full warm-up compiled

#: The golden's (input, output) dtype pairs: each is a numba signature of its own.
GOLDEN_PAIRS = (("float16", "float16"), ("bfloat16", "bfloat16"), ("float32", "float32"),
                ("float64", "float64"), ("float32", "float16"), ("float16", "float32"))
#: Sizes that reach one tile, several tiles and a short last block on every chip's plan.
_EMULATOR_SIZES = (31, 4097)


def _sample(name: str, numel: int = 8) -> np.ndarray:
    return np.linspace(-3, 3, numel).astype(info(name).dtype)


def warm_golden() -> None:
    """The golden forward and backward for each pair, on writable and read-only inputs, in the
    lean select loops (the exact golden) and the general ones (every variant triage computes)."""
    from conformance.reference import golden as ref
    from conformance.reference.semantics import Semantics

    for (name, out), writable in ((pair, w) for pair in GOLDEN_PAIRS for w in (True, False)):
        x = _sample(name)
        x.setflags(write=writable)
        for semantics in (ref.EXACT, Semantics(saturate=True)):
            ref.compute("forward", x, 0.2, out_dtype=out, semantics=semantics)
            ref.compute("backward", x, 0.2, dy=x, out_dtype=out, semantics=semantics)
        if info(name).bits > 16:  # a wide operand narrowed to a 16-bit input dtype in one pass
            ref.compute("forward", x, 0.2, out_dtype=out, semantics=Semantics(input_dtype="float16"))
        if info(name).bits == 16:  # large 16-bit calls: the forward gathered, the backward from tables
            big = _sample(name, ref.TABLE_MIN)
            big.setflags(write=writable)  # a read-only dump or batch is a signature of its own
            ref.compute("forward", big, 0.2, out_dtype=out)
            ref.compute("backward", big, 0.2, dy=big, out_dtype=out)


def warm_metrics() -> None:
    """The ULP distance and the metric pass for 16-, 32- and 64-bit data, other tools' checks of a
    batch, and compare's chunk scan."""
    from conformance.judge import chunked, other_checks
    from conformance.metrics.exact import compare
    from conformance.records import Tolerance

    chunked.warm()

    for name in ("float16", "float32", "float64"):
        a = _sample(name)
        ulp_distance(a, a[::-1].copy())
        compare(a, a[::-1].copy(), tolerance=Tolerance(rtol=0.0, atol=0.0))
        if name in other_checks.LOOP_DTYPES:  # other tools' checks of a batch's mismatches
            other_checks.loop_counts(a, a[::-1].copy())


def warm_triage() -> None:
    """The passes triage and the HTML report's plots make over a batch's mismatches: in order and
    at positions (the passes read their inputs read-only, whatever they were given); and the
    split of a large batch's other elements (its scope)."""
    from conformance.dtypes import to_bits
    from conformance.metrics._compiled import metric_loops
    from conformance.triage._compiled import scope_loops

    for name, index in ((n, i) for n in ("float16", "float32", "float64") for i in (None, np.arange(0, 8, 2))):
        rec, golden = info(name), _sample(name)
        actual = golden[::-1].copy()
        metric_loops.within_rounding(to_bits(actual), to_bits(golden), index, bits=rec.bits,
                                     mant_bits=rec.mant_bits)
        metric_loops.ulp_bin_counts(to_bits(actual), to_bits(golden), bits=rec.bits, mant_bits=rec.mant_bits)
        metric_loops.class_counts(to_bits(golden), mant_bits=rec.mant_bits, exp_mask=rec.exp_mask,
                                  sign_mask=rec.sign_mask)
        if name != "float16":  # the slopes pass takes float32 and float64
            metric_loops.slopes(actual, golden, golden, golden, index, smallest_normal=rec.smallest_normal,
                                forward=True)
    scope_loops.warm()


def warm_emulator() -> None:
    """Every profile's kernel and seeded variant, forward and backward, for each dtype pair it runs."""
    from conformance import npu_impl
    from conformance.npu_impl.chips import PROFILES, supported_pairs
    from conformance.npu_impl.variants import VARIANTS

    for profile, variant in ((p, v) for p in PROFILES for v in VARIANTS):
        for (name, out), numel in ((pair, n) for pair in sorted(supported_pairs(PROFILES[profile]))
                                   for n in _EMULATOR_SIZES):
            x = _sample(name, numel)
            try:
                npu_impl.leaky_relu(x, 0.2, profile=profile, variant=variant, out_dtype=out)
                npu_impl.leaky_relu_backward(x, x, 0.2, profile=profile, variant=variant, out_dtype=out)
            except ConformanceError:
                continue  # a build this chip or variant refuses compiles nothing


_SLOPES_DONE = "slope passes compiled"


def warm_second_share() -> None:
    """The second process's share: the slope passes, then the emulator.  The metrics' chunk scan
    calls the slope passes too, so the first process waits for the line this prints before it
    (two processes compiling one function would both write its cache index)."""
    from conformance.triage._compiled import slope_loops

    slope_loops.warm()
    print(_SLOPES_DONE, flush=True)
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nobody reads the pipe from here on
    warm_emulator()


def _wait_for(child: subprocess.Popen, line: str) -> None:
    """Read ``child``'s output until ``line`` (the slope passes are cached) or its end (it ended:
    nothing compiles them)."""
    for said in iter(child.stdout.readline, ""):
        if said.rstrip("\n") == line:
            return


def warm(*, side_by_side: bool = False) -> float:
    """Compile (or load) every loop; the seconds it took.  Nothing when the compiled paths are off.

    ``side_by_side``: :func:`warm_second_share` runs in a second process while this one compiles
    the golden's, the metrics' and triage's loops (the two never compile one function at the same time, so
    they never write one cache index; on two cores a fresh cache fills in two thirds of the time)."""
    start = time.perf_counter()
    if not jit.enabled():
        return 0.0
    second = _in_a_process(warm_second_share) if side_by_side else None
    try:
        warm_golden()
        if second is not None:
            _wait_for(second, _SLOPES_DONE)
        warm_metrics()
        warm_triage()  # after the metrics: both compile the slope and rounding passes over all elements
        if second is None:
            warm_emulator()
    except BaseException:  # an error or Ctrl-C here: the child does not go on compiling alone
        if second is not None:
            second.kill()
            second.wait()
        raise
    if second is not None and second.wait() != 0:
        raise RuntimeError(f"compiling the slope passes and the emulator's loops failed (exit {second.returncode})")
    return time.perf_counter() - start


def _in_a_process(step: Callable[[], None]) -> subprocess.Popen:
    """``step`` (a function of this module) run by a new interpreter, in the directory holding
    this package (so it imports this copy also when the package is not installed); its output
    is read through a pipe."""
    return subprocess.Popen([sys.executable, "-c", f"from conformance.compile_cache import {step.__name__}; "
                             f"{step.__name__}()"], cwd=Path(__file__).resolve().parents[1],
                            stdout=subprocess.PIPE, text=True)


def _fingerprint() -> str:
    """The package's sources (names, sizes, modification times), numba's version and where its
    cache lives: what numba's cache is valid for; first, on a line of its own, the modules
    holding compiled loops (:func:`_loops_line`)."""
    import numba

    parts = [sys.version, numba.__version__, os.environ.get("NUMBA_CACHE_DIR", "")]
    for path in sorted(_ROOT.rglob("*.py")):
        st = path.stat()
        parts.append(f"{path.relative_to(_ROOT)}:{st.st_size}:{st.st_mtime_ns}")
    every = hashlib.sha256("\n".join(parts).encode()).hexdigest()
    return f"{_loops_line()}\nall {every}"


def _loop_modules() -> list[Path]:
    """The package's modules that hold compiled loops: those that import numba (this one aside)."""
    return [path for path in sorted(_ROOT.rglob("*.py"))
            if path.resolve() != Path(__file__).resolve() and "import numba" in path.read_text(encoding="utf-8")]


_IMPORT = re.compile(r"^from conformance((?:\.\w+)*) import ([\w, ]+)", re.MULTILINE)


def _read_by_loops(module: Path) -> set[Path]:
    """The package's modules ``module`` imports from at its top (their constants are compiled
    into its loops as they were when the loops were compiled)."""
    found = set()
    for dotted, names in _IMPORT.findall(module.read_text(encoding="utf-8")):
        base = _ROOT.joinpath(*dotted.strip(".").split(".")) if dotted else _ROOT
        candidates = [base.with_suffix(".py"), *(base / f"{n.strip()}.py" for n in names.split(","))]
        found.update(c for c in candidates if c.is_file())
    return found


def _loop_sources() -> list[Path]:
    """The modules holding compiled loops and the package's modules they import from."""
    loops = _loop_modules()
    return sorted(set(loops).union(*(_read_by_loops(m) for m in loops)))


def _loops_line() -> str:
    """The stamp's first line: the names and contents of :func:`_loop_sources`."""
    digest = hashlib.sha256()
    for path in _loop_sources():
        digest.update(f"{path.relative_to(_ROOT)}\n".encode())
        digest.update(path.read_bytes())
    return f"loops {digest.hexdigest()}"


def _cache_dirs(source: Path) -> list[Path]:
    """Where numba keeps the cached loops of ``source``: under ``NUMBA_CACHE_DIR`` when that is
    set, else beside the source or, when that is read-only, in numba's per-user directory."""
    base = os.environ.get("NUMBA_CACHE_DIR")
    try:  # numba's own rules, by internal names; a numba without them: its naming, the per-user one left out
        from numba.core.caching import _CacheLocator
        from numba.misc.appdirs import AppDirs
    except ImportError:
        return sorted(Path(base).glob(f"{source.parent.name}_*")) if base else [source.parent / "__pycache__"]
    sub = _CacheLocator.get_suitable_cache_subpath(str(source))
    if base:
        return [Path(base) / sub]
    return [source.parent / "__pycache__", Path(AppDirs(appname="numba", appauthor=False).user_cache_dir) / sub]


def clear_stale() -> int:
    """Delete the package's cached loops unless the stamp records the modules holding compiled
    loops as they are; how many files that was.  The stamp then records them, with no full
    warm-up yet, so a second call deletes nothing.  Call it only while no other process of this
    package compiles or loads loops."""
    if not jit.enabled():
        return 0
    loops = _loops_line()
    if _recorded()[:1] == [loops]:
        return 0
    gone = 0
    for source in _loop_modules():
        for folder in _cache_dirs(source):
            for entry in (*folder.glob(f"{source.stem}.*.nbi"), *folder.glob(f"{source.stem}.*.nbc")):
                entry.unlink(missing_ok=True)
                gone += 1
    _write_stamp(f"{loops}\nall none")
    return gone


def _stamp_path() -> Path:
    base = os.environ.get("NUMBA_CACHE_DIR")
    return Path(base) / _STAMP if base else _ROOT / "__pycache__" / _STAMP


def _recorded() -> list[str]:
    """The stamp's lines; none when there is no stamp."""
    try:
        return _stamp_path().read_text().splitlines()
    except OSError:
        return []


def cached() -> bool:
    """True when a full warm-up already filled numba's cache for these sources and this numba
    (the stamp it leaves), so warming again would only load the loops."""
    return jit.enabled() and _recorded() == _fingerprint().splitlines()


def _write_stamp(text: Optional[str] = None) -> None:
    """Write ``text`` (the sources' fingerprint by default) as the stamp."""
    try:
        _stamp_path().parent.mkdir(parents=True, exist_ok=True)
        _stamp_path().write_text(_fingerprint() if text is None else text)
    except OSError:
        pass  # a read-only package: the next warm-up loads the loops again, no more


def fill(*, side_by_side: bool = False) -> float:
    """Stale loops deleted (:func:`clear_stale`), every loop compiled or loaded (:func:`warm`),
    and the stamp written; the seconds the warm-up took."""
    clear_stale()
    seconds = warm(side_by_side=side_by_side)
    if jit.enabled():
        _write_stamp()
    return seconds


def main() -> int:
    if cached():
        print("conformance: compiled loops already cached", file=sys.stderr)
        return 0
    seconds = fill(side_by_side=True)
    what = "compiled loops cached" if jit.enabled() else "compiled paths off: nothing to cache"
    print(f"conformance: {what} in {seconds:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Shared test helpers: one bit-equality assertion, one torch bit conversion, one CLI runner,
one judge of a backend's output.

Every test module imports these instead of writing its own.  ``run_cli`` runs a
command in-process through ``cli.main(argv)`` (fast, and usage errors are
checked without a subprocess); ``cli_subprocess`` is kept for the few smoke
tests that must see a real process (signals, ``python -m conformance``).
"""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

from conformance.config import default_config
from conformance.dtypes import all_patterns, info, is_nan, to_bits
from conformance.judge.evaluate import evaluate
from conformance.judge.gate import GateConfig
from conformance.records import BackendResult, Row
from conformance.render.messages import failure_message

F16 = all_patterns("float16")  # every float16 bit pattern
CONFIG = default_config()


SMALL_BATCH = 5000  # elements per suite batch at most, under keep_small_batches


def keep_small_batches(mp: pytest.MonkeyPatch, *, elements: int = SMALL_BATCH) -> None:
    """The suite's rows run only their batches of at most ``elements`` elements (edges, drawn
    examples, the one- and two-core boundary sizes), which still hold every edge value and a
    short last block; a forked ``--jobs`` process inherits it."""
    from conformance.suite import Inputs

    every = Inputs.batches
    mp.setattr(Inputs, "batches", lambda self, spec: [b for b in every(self, spec) if b.x.size <= elements])


def keep_tensorflow_across_msprobe(mp: pytest.MonkeyPatch) -> None:
    """Importing msprobe puts a stub in ``sys.modules["tensorflow"]``: the later tests get theirs back."""
    for name in ("tensorflow", "tensorflow.python"):
        if name in sys.modules:
            mp.setitem(sys.modules, name, sys.modules[name])
        else:
            mp.delitem(sys.modules, name, raising=False)
            mp.setitem(sys.modules, name, None)


@pytest.fixture(autouse=True)
def fresh_workers() -> Iterator[None]:
    """No worker and no backend left from another test, before and after: a module that imports this
    fixture gets it for each of its tests."""
    from conformance import suite
    from conformance.worker import client

    client.close_all()
    suite.backend_for.cache_clear()
    yield
    client.close_all()
    suite.backend_for.cache_clear()


def keep_torch_across_msprobe(mp: pytest.MonkeyPatch) -> None:
    """msprobe's dump wraps torch's functions in its hooks and leaves them so: the later tests get
    the functions back (a trace of ``F.prelu`` must see ``F.prelu``)."""
    import torch

    for owner in (torch, torch.nn.functional, torch.Tensor, torch._C._nn):
        for name, value in list(vars(owner).items()):
            if callable(value) and not name.startswith("__"):
                try:
                    mp.setattr(owner, name, value)
                except (AttributeError, TypeError):  # a read-only slot msprobe cannot have wrapped either
                    continue


def sampled(cases: Iterable[tuple], *, default: Callable[..., bool]) -> list:
    """``cases`` as parameter sets: those ``default(*case)`` keeps run in every run, the others
    carry the ``exhaustive`` marker (``make test-exhaustive``); together they are the whole proof."""
    return [pytest.param(*case, marks=() if default(*case) else pytest.mark.exhaustive) for case in cases]


def rotation(names: Sequence[str], others: Sequence[str], *,
             fits: Callable[[str, str], bool] = lambda other, name: True) -> Callable[[str, str], bool]:
    """Keeps each of ``names`` with one of ``others``: of those it fits (``fits(other, name)``;
    all when none does) the one with the fewest names so far, in turn from the n-th on a tie;
    every name once in the sample, and every other with a share when enough names fit it."""
    load, chosen = dict.fromkeys(others, 0), {}
    for n, name in enumerate(names):
        turn = [others[(n + k) % len(others)] for k in range(len(others))]
        pick = min([o for o in turn if fits(o, name)] or turn, key=load.__getitem__)
        load[pick] += 1
        chosen[name] = pick

    return lambda other, name: chosen.get(name) == other


def seeds_on(profile: str, variant: str) -> bool:
    """Whether the emulated kernel's ``variant`` differs from the reference on chip ``profile``."""
    from conformance.npu_impl import PROFILES
    from conformance.npu_impl.variants import not_applicable

    return not not_applicable(variant, PROFILES[profile])


def variants_in_turn() -> Callable[[str, str], bool]:
    """Keeps every seeded variant on one chip profile where it seeds a defect, the profiles in turn."""
    from conformance.npu_impl import PROFILES, VARIANTS

    return rotation([v for v in VARIANTS if v != "reference"], list(PROFILES), fits=seeds_on)


def bits_differ(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise mask: not the same bits (any NaN equals any NaN)."""
    nan_a, nan_b = is_nan(a), is_nan(b)
    return (nan_a != nan_b) | (~nan_a & ~nan_b & (to_bits(a) != to_bits(b)))


def differing(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Flat indices where the bits differ (any NaN equals any NaN)."""
    return np.flatnonzero(bits_differ(a, b))


def assert_same_bits(actual: np.ndarray, expected: np.ndarray, *, what: str = "") -> None:
    """Bit equality, any NaN equal to any NaN; the message names the first offenders."""
    __tracebackhide__ = True
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    bad = bits_differ(actual, expected)
    idx = np.flatnonzero(bad)
    detail = ", ".join(f"[{i}] {actual.flat[i]!r} != {expected.flat[i]!r}" for i in idx[:5])
    assert idx.size == 0, f"{what}: Mismatched elements: {idx.size} / {bad.size}; first: {detail}"


def to_torch(a: np.ndarray):  # -> torch.Tensor; torch is imported only by the tests that use it
    """A numpy array (bfloat16 included) as a torch tensor with the same bits."""
    import torch

    rec = info(a.dtype)
    kinds = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
             "float64": torch.float64}
    return torch.from_numpy(np.ascontiguousarray(to_bits(a)).astype(rec.sint)).view(kinds[rec.name])


def from_torch(t, dtype: str) -> np.ndarray:
    """A torch tensor back to numpy ``dtype`` through its bits."""
    import torch

    rec = info(dtype)
    sint = {2: torch.int16, 4: torch.int32, 8: torch.int64}[rec.bits // 8]
    return t.detach().contiguous().view(sint).numpy().view(rec.uint).view(rec.dtype)


@dataclass(frozen=True)
class CliResult:
    """Exit code and captured streams of one CLI invocation."""

    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


def run_cli(argv: Sequence[str], capsys: pytest.CaptureFixture[str], *,
            cwd: Optional[Path] = None) -> CliResult:
    """``conformance ARGV`` in-process; ``cwd`` is entered for the call and left after it."""
    from conformance import cli

    here = Path.cwd()
    capsys.readouterr()
    try:
        if cwd is not None:
            os.chdir(cwd)
        code = cli.main(list(argv))
    finally:
        os.chdir(here)
    captured = capsys.readouterr()
    return CliResult(int(code), captured.out, captured.err)


#: ``conformance ARGS`` in a process of its own under :func:`keep_small_batches`.
_SMALL_MAIN = ("import sys; sys.path.insert(0, {root!r}); import pytest; "
               "from tests.helpers import keep_small_batches; from conformance import cli; "
               "keep_small_batches(pytest.MonkeyPatch()); sys.exit(cli.main(sys.argv[1:]))")


def cli_command(*args: str, small_batches: bool = False) -> list[str]:
    """The argv of ``python -m conformance ARGS``; ``small_batches``: the suite's rows keep only
    their small batches (:func:`keep_small_batches`)."""
    root = str(Path(__file__).resolve().parents[1])
    entry = ["-c", _SMALL_MAIN.format(root=root)] if small_batches else ["-m", "conformance"]
    return [sys.executable, *entry, *args]


def cli_subprocess(*args: str, cwd: Path, timeout: float = 300,
                   small_batches: bool = False) -> subprocess.CompletedProcess:
    """:func:`cli_command` as a real process (smoke tests only)."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run(cli_command(*args, small_batches=small_batches), cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


#: The environment of a process started by a test whose property is a process's (a signal, an exit, a
#: pipe), not a compiled loop's: golden and the emulator take their numpy paths, the reference
#: implementations, and the process skips importing numba and loading its cached loops (~0.7 s CPU).
NUMPY_PATH = {"CONFORMANCE_COMPILED": "0"}


def children_on_the_numpy_path(mp: pytest.MonkeyPatch) -> None:
    """The processes this test starts (``cli_subprocess`` and the like) get :data:`NUMPY_PATH`."""
    for name, value in NUMPY_PATH.items():
        mp.setenv(name, value)


def error_lines(err: str) -> list[str]:
    """The non-blank lines of stderr but the progress lines a run prints when not on a terminal."""
    return [line for line in err.splitlines() if line.strip() and " progress: " not in line]


def assert_usage_error(result: CliResult, *, mentions: str) -> None:
    """Exit 2, one line on stderr that names what to fix, never a traceback."""
    __tracebackhide__ = True
    assert result.code == 2, f"exit {result.code}, expected 2:\n{result.text}"
    lines = error_lines(result.err)
    assert len(lines) == 1, f"expected one error line, got:\n{result.err}"
    assert "Traceback" not in result.text
    assert mentions.lower() in lines[0].lower(), f"{mentions!r} not in {lines[0]!r}"


def judge(x: np.ndarray, actual: np.ndarray, alpha: float, *, direction: str = "forward",
          dy: Optional[np.ndarray] = None, out_dtype: Optional[str] = None, backend: str = "cann",
          config: GateConfig = CONFIG, **extra) -> Row:
    """``actual`` (with ``extra`` BackendResult fields) judged as ``backend``'s output on ``x``."""
    return evaluate(x, alpha, BackendResult(actual, **extra), direction=direction, dy=dy,
                    out_dtype=out_dtype, backend=backend, config=config)


def judge_dump(x: np.ndarray, actual: np.ndarray, alpha: float, *, direction: str = "forward",
               dy: Optional[np.ndarray] = None, out_dtype: Optional[str] = None) -> Row:
    """``actual`` judged as external arrays (``conformance compare``), the default policy."""
    return judge(x, actual, alpha, direction=direction, dy=dy, out_dtype=out_dtype, backend="dump",
                 config=default_config())


def judge_named(x: np.ndarray, actual: np.ndarray, alpha: float, *, dy: Optional[np.ndarray] = None) -> Row:
    """``actual`` judged as external arrays, asserting that every mismatch gets one category
    and none is ``unexplained``."""
    __tracebackhide__ = True
    from conformance.reference import golden as ref

    direction = "forward" if dy is None else "backward"
    row = judge(x, actual, alpha, direction=direction, dy=dy, backend="dump")
    exact = ref.forward(x, alpha) if dy is None else ref.backward(dy, x, alpha)
    assert row.metrics.mismatches == differs(actual, exact)
    assert "unexplained" not in counts(row), failure_message(row)
    assert sum(counts(row).values()) == row.metrics.mismatches
    return row


def counts(row: Row) -> dict[str, int]:
    """Elements per category of a judged row."""
    return {f.category: f.count for f in row.findings}


def differs(a: np.ndarray, b: np.ndarray) -> int:
    """Independent count of elements whose bits differ (NaN equals NaN): the test helper, not metrics."""
    return int(bits_differ(a, b).sum())


def assert_named(row: Row, category: str, says: str) -> None:
    """The row has one ``category`` finding, and its summary says ``says``."""
    __tracebackhide__ = True
    (finding,) = [f for f in row.findings if f.category == category]
    assert says in finding.summary, finding.summary


def f32_specials() -> np.ndarray:
    """20,000 random float32 bit patterns, then zeros, infinities, NaN, subnormals and values
    near the float16 limits."""
    bits = np.random.default_rng(7).integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32)
    extra = np.float32([0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 7e4, -7e4, 1e5, 65519, -65520])
    return np.concatenate([bits.view(np.float32), extra])


def edit_at(exact: np.ndarray, index: np.ndarray, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """A copy of ``exact`` with ``fn`` applied at ``index``: a hand-built defect."""
    out = exact.copy()
    out[index] = fn(out[index])
    return out


def finite_normal_indices(a: np.ndarray) -> np.ndarray:
    """Flat indices of the finite, nonzero, normal elements of ``a``."""
    w = a.astype(np.float64)
    return np.flatnonzero(np.isfinite(w) & (np.abs(w) >= info(a.dtype).smallest_normal) & (w != 0))


def small_batches_entry() -> list[str]:
    """The interpreter arguments that run ``conformance ARGS`` in a process of its own under
    :func:`keep_small_batches` (``[sys.executable, *small_batches_entry(), *args]``)."""
    return ["-c", _SMALL_MAIN.format(root=str(Path(__file__).resolve().parents[1]))]


def slopes_in_turn(combos: Sequence[tuple], slopes: Sequence[float], *, always: Sequence[float]) -> list:
    """``(*combo, slope)`` parameter sets for every combo and slope: the default run keeps the
    ``always`` slopes and one other slope per combo, the others in turn (each of them on some
    combo); the rest carry the ``exhaustive`` marker."""
    others = [a for a in slopes if a not in always]
    turn = {combo: others[k % len(others)] for k, combo in enumerate(combos)}
    return sampled([(*combo, a) for combo in combos for a in slopes],
                   default=lambda *case: case[-1] in always or case[-1] == turn[case[:-1]])


def bare_backend(name: str, **declared: object) -> object:
    """A registered backend's instance without ``__init__`` (which imports its framework): its
    declarations only, with ``declared`` set on it (a profile, a variant)."""
    from conformance.backends import load

    cls = load(name)
    found = cls.__new__(cls)
    for key, value in declared.items():
        setattr(found, key, value)
    return found


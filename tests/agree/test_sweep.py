"""`sweep`: per pair of backends, the patterns whose bits differ, against a direct comparison."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from conformance.backends import call, get_backend
from conformance.config import default_config
from conformance.dtypes import all_patterns
from conformance.sweep import run as sweeping
from conformance.sweep.spec import SweepSpec, x_class
from conformance.sweep.store import _SCHEMA, Store
from tests.helpers import bits_differ, run_cli

CONFIG = default_config()
CHUNK = 1 << 14
NAMES = ("golden", "torch", "cann")
NEGATIVE = 0xC000  # the chunk of negative fp16 patterns from -2.0 down, where the slopes show


def _specs(direction: str = "forward", x: str | None = None) -> list[SweepSpec]:
    pytest.importorskip("torch")
    profile = {"cann": ("ascend910b1", "reference")}
    return [SweepSpec(n, "float16", "float16", direction, 0.3, *profile.get(n, (None, None)), x_class=x)
            for n in NAMES]


def _direct(a: SweepSpec, b: SweepSpec) -> int:
    """Patterns whose bits differ, calling both backends on every fp16 pattern at once."""
    p = all_patterns("float16")
    x, dy = (p, None) if a.direction == "forward" else (np.repeat(x_class(a.x_class).value("float16"), p.size), p)
    outs = [call(get_backend(s.backend, profile=s.profile, variant=s.variant), s.direction, x.copy(), 0.3,  # type: ignore[arg-type]
                 dy=None if dy is None else dy.copy()).value for s in (a, b)]
    return int(bits_differ(np.asarray(outs[0]).reshape(-1), np.asarray(outs[1]).reshape(-1)).sum())


def _swept(store: Store, specs: list[SweepSpec]) -> tuple[sweeping.Plan, dict]:
    plan = sweeping.make_plan(specs, store, start=0, stop=None, chunk=CHUNK, config=CONFIG)
    sweeping.run_plan(plan, store, sweeping.serial)
    totals = {(t.first.backend, t.second.backend): t for t in sweeping.pair_totals(plan, store)}
    return plan, totals


@pytest.mark.parametrize(("direction", "x"), [("forward", None), ("backward", "-1")])
def test_pair_counts_are_direct_bit_comparisons(tmp_path: Path, direction: str, x: str | None) -> None:
    specs = _specs(direction, x)
    with Store(tmp_path / "s.sqlite") as store:
        _, totals = _swept(store, specs)
    assert set(totals) == {("golden", "torch"), ("golden", "cann"), ("torch", "cann")}
    by_name = {s.backend: s for s in specs}
    for (a, b), total in totals.items():
        assert (total.differing, total.swept) == (_direct(by_name[a], by_name[b]), 1 << 16), (a, b)
    assert totals[("golden", "torch")].differing > 0  # torch takes fp32(0.3): 1-ULP double roundings


def test_resumed_sweep_reads_the_counts_and_a_damaged_count_is_recomputed(tmp_path: Path) -> None:
    specs = _specs()
    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        _, first = _swept(store, specs)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE pairs SET differing = differing + 1 WHERE lo = ?", (NEGATIVE,))
    with Store(path) as store:
        again = sweeping.make_plan(specs, store, start=0, stop=None, chunk=CHUNK, config=CONFIG)
        assert [(t.lo, t.hi) for t in again.tasks] == [(NEGATIVE, NEGATIVE + CHUNK)]  # only the damaged chunk
        _, second = _swept(store, specs)
        untouched = sweeping.make_plan(specs, store, start=0, stop=None, chunk=CHUNK, config=CONFIG)
    assert not untouched.tasks
    assert {k: t.differing for k, t in first.items()} == {k: t.differing for k, t in second.items()}


def test_a_store_without_pair_counts_is_upgraded_and_recomputed(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.execute(_SCHEMA)
        db.execute("PRAGMA user_version = 2")
    specs = _specs()
    with Store(path) as store:
        plan = sweeping.make_plan(specs, store, start=0, stop=None, chunk=CHUNK, config=CONFIG)
        assert len(plan.tasks) == 4
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 3


def test_cli_prints_a_line_per_pair(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    res = run_cli(["sweep", "--backend", "torch,cann", "--profile", "ascend950", "--dtype", "fp16", "--alpha", "0.2",
                   "--workers", "1",
                   "--chunk", str(CHUNK), "--store", str(tmp_path / "s.sqlite")], capsys)
    assert res.code == 0, res.text
    assert ("torch vs cann[ascend950/reference] fp16 forward alpha=0.2: 0 of 65,536 patterns "
            "differ (bit-identical)") in res.out

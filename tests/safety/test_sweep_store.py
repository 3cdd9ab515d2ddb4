"""The sweep store is a verified cache: tampered, stale, damaged, foreign or full stores,
and the sweep's resource and scheduler bounds."""
from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from conformance import cli
from conformance.config import default_config
from conformance.errors import UsageError
from conformance.records import Row
from conformance.sweep import fingerprint as fp
from conformance.sweep import run as sweeping
from conformance.sweep import store as stores
from conformance.sweep.store import checksum, row_from_text, row_text
from tests.helpers import assert_usage_error, run_cli

# cann with torch's default slope (0.01 for 0.2) fails every negative fp16 x: 4 chunks of 2^14,
# the two of negative x fail
FAILING = ("--backend", "cann", "--variant", "torch-default-slope", "--dtype", "fp16", "--chunk", "0x4000",
           "--workers", "1")
CHUNKS, FAILING_CHUNKS = 4, 2


def _sweep(tmp_path: Path, capsys, *extra: str, quiet: bool = True, name: str = "r.json"):
    argv = ["sweep", "--store", str(tmp_path / "s.sqlite"), "--json", str(tmp_path / name), *extra]
    result = run_cli(argv + (["-q"] if quiet else []), capsys)
    doc = json.loads((tmp_path / name).read_text()) if (tmp_path / name).exists() else None
    return result, doc


def _rewrite(path: Path, edit: Callable[[Row], Row], *, forge: bool) -> int:
    """Edit every stored row; ``forge`` recomputes the checksum as a forger would.  Rows changed."""
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        rows = db.execute("SELECT sweep, lo, hi, row, fingerprint FROM chunks").fetchall()
        changed = 0
        for key, lo, hi, text, printed in rows:
            new = row_text(edit(row_from_text(text)))
            changed += new != text
            summed = checksum(key, lo, hi, printed, new) if forge else db.execute(
                "SELECT checksum FROM chunks WHERE sweep = ? AND lo = ?", (key, lo)).fetchone()[0]
            db.execute("UPDATE chunks SET row = ?, checksum = ? WHERE sweep = ? AND lo = ? AND hi = ?",
                       (new, summed, key, lo, hi))
    return changed


def _clean(row: Row) -> Row:
    metrics = replace(row.metrics, mismatches=0, violations=0, max_abs=0.0, max_rel=0.0, max_ulp=0,
                      max_abs_at=None, max_rel_at=None, max_ulp_at=None)
    return replace(row, metrics=metrics, findings=(), verdict="pass")


@pytest.fixture(scope="module")
def failed_once(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The failing sweep, run once for the module: its store's directory and its report's text."""
    where = tmp_path_factory.mktemp("failed-sweep")
    argv = ["sweep", "--store", str(where / "s.sqlite"), "--json", str(where / "first.json"), "-q", *FAILING]
    with pytest.MonkeyPatch.context() as mp:  # the env the autouse fixture clears for each test
        for name in ("COLUMNS", "LINES", "GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY"):
            mp.delenv(name, raising=False)
        assert cli.main(argv) == 1
    return where, (where / "first.json").read_text()


@pytest.fixture
def failed(tmp_path, failed_once):
    """A store holding the failing sweep (a copy of the module's, for this test to tamper with), and
    its report."""
    where, report = failed_once
    for stored in where.glob("s.sqlite*"):  # the database and any WAL files beside it
        shutil.copyfile(stored, tmp_path / stored.name)
    return json.loads(report)


def _mismatches(doc: dict) -> int:
    return doc["rows"][0]["mismatches"]


# ----------------------------------------------------------------------------- tampered rows

def _console(result) -> str:
    return " ".join(result.out.split())


def test_rows_rewritten_as_clean_are_recomputed_and_still_fail(tmp_path, capsys, failed):
    assert _rewrite(tmp_path / "s.sqlite", _clean, forge=False) == FAILING_CHUNKS
    result, doc = _sweep(tmp_path, capsys, *FAILING, quiet=False)
    assert result.code == 1, result.text
    said = f"{FAILING_CHUNKS} chunk row(s) recomputed: checksum mismatch {FAILING_CHUNKS}"
    assert f"{FAILING_CHUNKS} chunk(s) to compute; {said}" in _console(result)
    assert _mismatches(doc) == _mismatches(failed) > 0
    assert said in doc["rows"][0]["notes"]


def test_counts_outside_the_chunk_are_recomputed_even_with_a_valid_checksum(tmp_path, capsys, failed):
    def more_than_the_chunk(row: Row) -> Row:
        return replace(row, metrics=replace(row.metrics, elements=row.metrics.elements + 1))

    _rewrite(tmp_path / "s.sqlite", more_than_the_chunk, forge=True)
    result, doc = _sweep(tmp_path, capsys, *FAILING)
    assert result.code == 1, result.text
    assert doc["rows"][0]["elements"] == 1 << 16 and _mismatches(doc) == _mismatches(failed)
    assert f"{CHUNKS} chunk row(s) recomputed: counts out of range {CHUNKS}" in doc["rows"][0]["notes"]


@pytest.mark.parametrize("field, value", [("mismatches", -1), ("above", (1 << 14) + 1), ("max_ulp", -3)])
def test_each_count_is_bounded_by_the_chunk(tmp_path, capsys, failed, field, value):
    _rewrite(tmp_path / "s.sqlite", lambda r: replace(r, metrics=replace(r.metrics, **{field: value})), forge=True)
    result, doc = _sweep(tmp_path, capsys, *FAILING)
    assert result.code == 1 and _mismatches(doc) == _mismatches(failed)
    assert any("counts out of range" in n for n in doc["rows"][0]["notes"])


@pytest.mark.parametrize("change", [{"backend": "golden"}, {"alpha": 0.01}, {"direction": "backward"}])
def test_a_row_of_another_spec_is_recomputed(tmp_path, capsys, failed, change):
    _rewrite(tmp_path / "s.sqlite", lambda r: replace(_clean(r), **change), forge=True)
    result, doc = _sweep(tmp_path, capsys, *FAILING)
    assert result.code == 1 and doc["rows"][0]["backend"] == "cann"
    assert f"{CHUNKS} chunk row(s) recomputed: spec mismatch {CHUNKS}" in doc["rows"][0]["notes"]


def test_an_unreadable_row_is_recomputed(tmp_path, capsys, failed):
    with contextlib.closing(sqlite3.connect(tmp_path / "s.sqlite")) as db, db:
        key, lo, hi, printed = db.execute("SELECT sweep, lo, hi, fingerprint FROM chunks LIMIT 1").fetchone()
        db.execute("UPDATE chunks SET row = '{\"d\": 5}', checksum = ? WHERE lo = ?",
                   (checksum(key, lo, hi, printed, '{"d": 5}'), lo))
        db.execute("UPDATE chunks SET row = X'00ff', checksum = 'x' WHERE lo = ?", (lo + (1 << 14),))
    result, doc = _sweep(tmp_path, capsys, *FAILING)
    assert result.code == 1 and _mismatches(doc) == _mismatches(failed)
    assert "2 chunk row(s) recomputed: checksum mismatch 1, unreadable row 1" in doc["rows"][0]["notes"]


def test_fresh_recomputes_a_forged_clean_store(tmp_path, capsys, failed):
    """A forger who recomputes the checksum is beyond any unkeyed check: --fresh is the way out."""
    _rewrite(tmp_path / "s.sqlite", _clean, forge=True)
    result, doc = _sweep(tmp_path, capsys, *FAILING, "--fresh")
    assert result.code == 1 and _mismatches(doc) == _mismatches(failed)


def _stored_plots(path: Path) -> list[bool]:
    """Whether each stored chunk row (in range order) holds plot data."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        return [row_from_text(text).plots is not None for (text,) in db.execute("SELECT row FROM chunks ORDER BY lo")]


def test_a_sweep_keeps_plot_data_only_for_an_html_report(tmp_path, capsys, failed):
    """Without ``--html`` the chunk rows keep no plot data (nothing draws it); a later sweep with
    ``--html`` computes again the rows of mismatches, which the page draws, and only those."""
    assert _stored_plots(tmp_path / "s.sqlite") == [False] * CHUNKS
    result, doc = _sweep(tmp_path, capsys, *FAILING, "--html", str(tmp_path / "r.html"), quiet=False)
    assert result.code == 1 and _mismatches(doc) == _mismatches(failed)
    said = f"{FAILING_CHUNKS} chunk row(s) recomputed: {stores.NO_PLOTS} {FAILING_CHUNKS}"
    assert f"{FAILING_CHUNKS} chunk(s) to compute; {said}" in _console(result)
    assert sum(_stored_plots(tmp_path / "s.sqlite")) == FAILING_CHUNKS
    again, _ = _sweep(tmp_path, capsys, *FAILING, "--html", str(tmp_path / "again.html"), quiet=False,
                      name="again.json")
    assert "0 chunk(s) to compute" in _console(again)
    figures = [(tmp_path / page).read_text().count("<svg") for page in ("r.html", "again.html")]
    assert figures[0] == figures[1] > 0


# ----------------------------------------------------------------------------- stale code

def test_rows_of_other_code_are_recomputed(tmp_path, capsys, failed, monkeypatch):
    monkeypatch.setattr(sweeping, "fingerprint", lambda backend: "edited code")
    result, doc = _sweep(tmp_path, capsys, *FAILING, quiet=False)
    assert result.code == 1 and _mismatches(doc) == _mismatches(failed)
    assert f"{CHUNKS} chunk row(s) recomputed: fingerprint changed {CHUNKS}" in _console(result)
    again, _ = _sweep(tmp_path, capsys, *FAILING, quiet=False, name="again.json")
    assert f"{CHUNKS} chunk row(s) from" in _console(again) and "0 chunk(s) to compute" in _console(again)


def test_a_remote_worker_with_other_code_is_a_usage_error(tmp_path, monkeypatch):
    spec = sweeping.SweepSpec("golden", "float16", "float16", "forward", 0.2)
    with stores.Store(tmp_path / "s.sqlite") as store:
        plan = sweeping.make_plan([spec], store, start=0, stop=1 << 16, chunk=1 << 14, config=default_config())
        monkeypatch.setattr(sweeping, "fingerprint", lambda backend: "the cluster's code")
        with pytest.raises(UsageError, match="other code than this process"):
            sweeping.run_plan(plan, store, sweeping.serial)
        assert store.count(spec.key) == 0


def _plugin(tmp_path: Path, body: str, monkeypatch) -> object:
    import importlib.util

    path = tmp_path / "my_kernel_backend.py"
    path.write_text(f"class MyBackend:\n    packages = ('numpy',)\n    {body}\n")
    module_spec = importlib.util.spec_from_file_location("my_kernel_backend", path)
    module = importlib.util.module_from_spec(module_spec)
    monkeypatch.setitem(sys.modules, "my_kernel_backend", module)
    module_spec.loader.exec_module(module)
    return module.MyBackend()


def test_editing_a_plugin_backend_module_changes_its_fingerprint(tmp_path, monkeypatch):
    backend = _plugin(tmp_path, "slope = 0.2", monkeypatch)
    before = fp.fingerprint(backend)
    assert fp.fingerprint(backend) == before
    (tmp_path / "my_kernel_backend.py").write_text("class MyBackend:\n    slope = 0.01\n")
    assert fp.fingerprint(backend) != before


def test_editing_a_package_module_changes_the_package_digest(tmp_path, monkeypatch):
    (tmp_path / "golden.py").write_text("SLOPE = 0.2\n")
    monkeypatch.setattr(fp, "PACKAGE_DIR", tmp_path)
    before = fp.package_digest.__wrapped__()
    (tmp_path / "golden.py").write_text("SLOPE = 0.02\n")
    assert fp.package_digest.__wrapped__() != before


def test_a_worker_backend_is_fingerprinted_by_its_hello():
    class Worker:
        def __init__(self, versions: dict):
            self.hello = {"backend": "torch_npu", "versions": versions}

    assert fp.fingerprint(Worker({"torch": "2.1"})) != fp.fingerprint(Worker({"torch": "2.2"}))
    assert fp.fingerprint(Worker({"torch": "2.1"})) == fp.fingerprint(Worker({"torch": "2.1"}))


# ----------------------------------------------------------------------------- files SQLite cannot serve

def _sqlite(path: Path, *statements: str) -> None:
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        for statement in statements:
            db.execute(statement)


@pytest.mark.parametrize("statements, mentions", [
    (("CREATE TABLE chunks (sweep TEXT, lo INTEGER, hi INTEGER, row TEXT, seconds REAL)",), "older conformance"),
    (("CREATE TABLE photos (name TEXT)",), "another schema"),
    (("CREATE TABLE chunks (x)", "PRAGMA user_version = 2"), "another schema"),
    (("PRAGMA user_version = 7",), "another schema"),
])
def test_a_store_of_another_schema_is_refused_with_one_line(tmp_path, capsys, statements, mentions):
    _sqlite(tmp_path / "s.sqlite", *statements)
    result, _ = _sweep(tmp_path, capsys, *FAILING)
    assert_usage_error(result, mentions=mentions)
    assert "delete it or pass a new --store" in result.err


def test_a_file_that_is_not_a_database_is_refused(tmp_path, capsys):
    (tmp_path / "s.sqlite").write_bytes(b"not a database, " * 512)
    assert_usage_error(_sweep(tmp_path, capsys, *FAILING)[0], mentions="damaged or not a sweep store")


@pytest.mark.parametrize("make", [os.mkfifo, os.mkdir])
def test_a_store_that_is_not_a_regular_file_is_refused(tmp_path, capsys, make):
    make(tmp_path / "s.sqlite")
    began = time.monotonic()
    assert_usage_error(_sweep(tmp_path, capsys, *FAILING)[0], mentions="is not a regular file")
    assert time.monotonic() - began < 30


def test_a_damaged_page_is_refused_with_one_line(tmp_path, capsys, failed):
    path = tmp_path / "s.sqlite"
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big") or 65536
    assert len(data) > page, "the store has one page only"
    data[page:] = b"\xa5" * (len(data) - page)  # every page but the first (the schema's)
    path.write_bytes(bytes(data))
    assert_usage_error(_sweep(tmp_path, capsys, *FAILING)[0], mentions="damaged")


def test_a_full_disk_is_a_usage_error(tmp_path, capsys, monkeypatch):
    real = sqlite3.connect

    def tiny(*args, **kwargs):  # SQLite's own SQLITE_FULL, as from a full file system
        db = real(*args, **kwargs)
        db.execute("PRAGMA max_page_count = 4")
        return db

    monkeypatch.setattr(stores.sqlite3, "connect", tiny)
    assert_usage_error(_sweep(tmp_path, capsys, *FAILING)[0], mentions="the disk is full")


def test_no_space_from_the_file_system_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="disk is full"), stores._guarded(tmp_path / "s.sqlite"):
        raise OSError(errno.ENOSPC, "No space left on device")


# ----------------------------------------------------------------------------- chunk and scheduler bounds

@pytest.mark.parametrize("argv, mentions", [
    (["--chunk", "1"], "--chunk must be between 256"),
    (["--chunk", "0x100000000"], "--chunk must be between 256"),
    (["--chunk", "0x100"], "more than 65,536 chunks"),  # the whole fp32 space
])
def test_chunk_sizes_out_of_bounds_exit_2(tmp_path, capsys, argv, mentions):
    result, _ = _sweep(tmp_path, capsys, "--backend", "golden", "--workers", "1", *argv)
    assert_usage_error(result, mentions=mentions)


@pytest.mark.parametrize("address", ["foo", "tcp://", "tcp://host", "tcp://host:0", "tcp://host:99999",
                                     "http://127.0.0.1:8786", "tcp://a b:1"])
def test_a_malformed_scheduler_exits_2_at_once(tmp_path, capsys, address):
    began = time.monotonic()
    result, _ = _sweep(tmp_path, capsys, *FAILING, "--scheduler", address)
    assert_usage_error(result, mentions="tcp://HOST:PORT")
    assert time.monotonic() - began < 10


def test_a_scheduler_that_does_not_answer_exits_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sweeping, "CONNECT_TIMEOUT", 0.5)  # a refused port: nothing to wait for but the timeout
    began = time.monotonic()
    result, _ = _sweep(tmp_path, capsys, *FAILING, "--scheduler", "tcp://127.0.0.1:1")
    assert_usage_error(result, mentions="no Dask scheduler answered within 0.5 s")
    assert time.monotonic() - began < 30


@pytest.mark.parametrize("argv", [
    ("--dtype", "fp16", "--sweep-alpha", "--range", "0x10000:0x20000"),
    ("--dtype", "bf16", "--direction", "backward", "--x-class=-1,nan"),
    ("--dtype", "fp16->fp32",),
])
def test_an_untouched_store_is_reused_without_recomputing(tmp_path, capsys, argv):
    args = ("--backend", "golden,torch", "--chunk", "0x8000", "--workers", "1", *argv)
    first, _ = _sweep(tmp_path, capsys, *args, quiet=False, name="first.json")
    assert first.code == 0, first.text
    again, _ = _sweep(tmp_path, capsys, *args, quiet=False, name="again.json")
    assert "0 chunk(s) to compute" in _console(again) and "recomputed" not in again.out, again.out

"""The checkpoint store: one SQLite row per (sweep key, chunk), written when the chunk is done.

A chunk's judged :class:`Row` is kept as JSON text in a small explicit encoding that
round-trips exactly (the report's JSON export does not read back): floats as
``float.hex``, numpy scalars as (dtype, bits), tuples tagged.  Merging the stored rows
with ``merge_rows`` gives the same totals as judging every chunk again.

The database runs in WAL mode and each finished chunk (all backends of it) is one
transaction, so a kill -9 loses only the chunks in flight.

The store is a cache, never a witness.  Each row carries the fingerprint of the code that
computed it (:mod:`conformance.sweep.fingerprint`) and a checksum of its fields; a row
whose checksum, fingerprint, spec or counts do not hold is recomputed, never reported.
A file SQLite cannot read, a schema of another program and a full disk are usage errors.
"""
from __future__ import annotations

import errno
import hashlib
import json
import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Optional

import numpy as np

from conformance.dtypes import from_bits, info, to_bits
from conformance.errors import UsageError
from conformance.judge import plots
from conformance.metrics import exact as met
from conformance.records import Finding, Offender, OtherCheck, Row
from conformance.sweep.spec import SweepSpec

DEFAULT_STORE = Path("results") / "sweeps.sqlite"
SCHEMA_VERSION = 3  # PRAGMA user_version of a sweep store; 3 added the pairs table
_COLUMNS = ("sweep", "lo", "hi", "row", "seconds", "fingerprint", "checksum")
_PAIR_COLUMNS = ("pair", "lo", "hi", "differing", "fingerprint", "checksum")
_SCHEMA = """
CREATE TABLE chunks (
    sweep TEXT NOT NULL,
    lo INTEGER NOT NULL,
    hi INTEGER NOT NULL,
    row TEXT NOT NULL,
    seconds REAL NOT NULL,
    fingerprint TEXT NOT NULL,
    checksum TEXT NOT NULL,
    PRIMARY KEY (sweep, lo, hi)
)"""
_PAIR_SCHEMA = """
CREATE TABLE pairs (
    pair TEXT NOT NULL,
    lo INTEGER NOT NULL,
    hi INTEGER NOT NULL,
    differing INTEGER NOT NULL,
    fingerprint TEXT NOT NULL,
    checksum TEXT NOT NULL,
    PRIMARY KEY (pair, lo, hi)
)"""


# ----------------------------------------------------------------------------- codec

def encode(value: Any) -> Any:
    """A value of a row as JSON-safe data that :func:`decode` turns back exactly."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, float):
        return {"f": value.hex()}
    if isinstance(value, np.generic):  # a numpy float scalar of any table dtype
        return {"n": info(value.dtype).name, "b": int(to_bits(np.asarray(value)))}
    if isinstance(value, tuple):
        return {"t": [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {"d": [[encode(k), encode(v)] for k, v in value.items()]}
    raise TypeError(f"cannot store a {type(value).__name__} in a sweep chunk")


def decode(data: Any) -> Any:
    if isinstance(data, list):
        return [decode(v) for v in data]
    if not isinstance(data, dict):
        return data
    if "f" in data:
        return float.fromhex(data["f"])
    if "n" in data:
        return from_bits(np.array(data["b"]), data["n"])[()]
    if "t" in data:
        return tuple(decode(v) for v in data["t"])
    return {decode(k): decode(v) for k, v in data["d"]}


def _flat(obj: Any) -> dict:
    return {f.name: getattr(obj, f.name) for f in fields(obj)}


def row_text(row: Row) -> str:
    """A judged row as the stored JSON text."""
    doc = _flat(row)
    doc["metrics"] = _flat(row.metrics)
    doc["findings"] = [{**_flat(f), "examples": [_flat(e) for e in f.examples]} for f in row.findings]
    doc["plots"] = None if row.plots is None else plots.to_state(row.plots)
    doc["other_checks"] = [_flat(c) for c in row.other_checks]
    return json.dumps(encode(doc), separators=(",", ":"), allow_nan=False)


def row_from_text(text: str) -> Row:
    doc = decode(json.loads(text))
    doc["metrics"] = met.Metrics(**doc["metrics"])
    doc["findings"] = tuple(Finding(**{**f, "examples": tuple(Offender(**e) for e in f["examples"])})
                            for f in doc["findings"])
    doc["plots"] = None if doc.get("plots") is None else plots.from_state(doc["plots"])
    doc["other_checks"] = tuple(OtherCheck(**c) for c in doc.get("other_checks", ()))
    return Row(**doc)


# ----------------------------------------------------------------------------- verification

FINGERPRINT_CHANGED = "fingerprint changed"
CHECKSUM_MISMATCH = "checksum mismatch"
SPEC_MISMATCH = "spec mismatch"
UNREADABLE = "unreadable row"
OUT_OF_RANGE = "counts out of range"
NO_PLOTS = "no plot data (stored by a sweep without --html)"
_BOUNDED = ("mismatches", "violations", "nan_positions", "inf_positions", "zero_signs", "within_1e3",
            "within_5e3", "above", "below")


def checksum(key: str, lo: int, hi: int, fingerprint: str, text: str) -> str:
    """sha256 of a stored chunk's fields: it detects a damaged or hand-edited row, not a forger
    (anyone can recompute it), which is why the store is a cache and never a witness."""
    h = hashlib.sha256()
    for part in (key, str(lo), str(hi), fingerprint, text):
        h.update(part.encode("utf-8", "surrogatepass") + b"\x1f")
    return h.hexdigest()


def counts_problem(row: Row, *, lo: int, hi: int) -> Optional[str]:
    """Why the counts of a chunk row of ``[lo, hi)`` cannot be true (None: they can)."""
    m, size = row.metrics, hi - lo
    if m.elements != size:
        return f"{m.elements} elements in a chunk of {size}"
    wrong = [n for n in _BOUNDED if not 0 <= getattr(m, n) <= size]
    if wrong or m.max_ulp < 0:
        return f"{', '.join(wrong) or 'max_ulp'} outside [0, {size}]"
    if any(f.count < 0 for f in row.findings) or sum(f.count for f in row.findings) > size:
        return f"finding counts do not add up to at most {size}"
    if any(not lo <= e.index < hi for f in row.findings for e in f.examples):
        return f"an example outside [{lo}, {hi})"
    return None


def _spec_matches(row: Row, spec: SweepSpec) -> bool:
    same_alpha = spec.sweep_alpha or (isinstance(row.alpha, float) and row.alpha == float(spec.alpha))
    return same_alpha and (row.backend, row.profile, row.variant, row.dtype, row.out_dtype, row.direction) == \
        (spec.backend, spec.profile, spec.variant, spec.dtype, spec.out_dtype, spec.direction)


def verified_row(spec: SweepSpec, stored: tuple, *, fingerprint: str,
                 plots: bool = False) -> tuple[Optional[Row], str]:
    """The row of one stored (lo, hi, row, fingerprint, checksum), or None and why it is rejected;
    ``plots``: a row of mismatches must hold its plot data (a sweep without ``--html`` stores none)."""
    lo, hi, text, printed, sum_ = stored
    if not isinstance(text, str) or not isinstance(printed, str) or \
            sum_ != checksum(spec.key, lo, hi, printed, text):
        return None, CHECKSUM_MISMATCH
    if printed != fingerprint:
        return None, FINGERPRINT_CHANGED
    try:
        row = row_from_text(text)
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError, RecursionError):
        return None, UNREADABLE
    if not _spec_matches(row, spec):
        return None, SPEC_MISMATCH
    try:
        problem = counts_problem(row, lo=lo, hi=hi)
    except TypeError:  # a count that is not a number
        problem = "a count is not a number"
    if problem:
        return None, OUT_OF_RANGE
    return (None, NO_PLOTS) if plots and row.plots is None and row.metrics.mismatches else (row, "")


@dataclass(frozen=True)
class Verified:
    """The stored chunk rows of one spec that passed every check, and why the others did not."""

    rows: dict[tuple[int, int], Row]
    rejected: Counter

    def describe(self) -> str:
        """``3 chunk rows recomputed: fingerprint changed 2, checksum mismatch 1`` ('' when none)."""
        return describe_rejected(self.rejected)


def describe_rejected(rejected: Counter) -> str:
    total = sum(rejected.values())
    if not total:
        return ""
    why = ", ".join(f"{reason} {n:,}" for reason, n in sorted(rejected.items()))
    return f"{total:,} chunk row(s) recomputed: {why}"


# ----------------------------------------------------------------------------- store

def _refusal(path: Path, exc: BaseException) -> UsageError:
    """The one line for a store that SQLite or the disk cannot serve."""
    text = str(exc)
    if "full" in text or getattr(exc, "errno", None) == errno.ENOSPC:
        return UsageError(f"--store {str(path)!r}: the disk is full ({text}); free some space or pass a "
                          "--store on another disk")
    if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
        return UsageError(f"--store {str(path)!r} is damaged or not a sweep store ({text}); delete it or "
                          "pass a new --store")
    return UsageError(f"--store {str(path)!r} cannot be used as a sweep store ({text}); pass another path")


@contextmanager
def _guarded(path: Path) -> Iterator[None]:
    try:
        yield
    except (OSError, sqlite3.Error) as exc:
        raise _refusal(path, exc) from None


def _check_schema(db: sqlite3.Connection, path: Path) -> None:
    """Create the table in an empty file; refuse a file that holds anything else."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables and version == 0:
        with db:
            db.execute(_SCHEMA)
            db.execute(_PAIR_SCHEMA)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        return
    columns = [r[1] for r in db.execute("PRAGMA table_info(chunks)")] if "chunks" in tables else []
    pair_columns = [r[1] for r in db.execute("PRAGMA table_info(pairs)")] if "pairs" in tables else []
    if version == SCHEMA_VERSION and tuple(columns) == _COLUMNS and tuple(pair_columns) == _PAIR_COLUMNS:
        return
    if version == 2 and tuple(columns) == _COLUMNS and tables == {"chunks"}:
        with db:  # a store without pair counts: add the table; every chunk lacking them is recomputed
            db.execute(_PAIR_SCHEMA)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        return
    if version == 0 and "chunks" in tables and "checksum" not in columns:
        raise UsageError(f"--store {str(path)!r} comes from an older conformance (no fingerprints or "
                         "checksums); delete it or pass a new --store")
    raise UsageError(f"--store {str(path)!r} holds another schema (user_version {version}, tables "
                     f"{', '.join(sorted(tables))[:80]}), not a sweep store; delete it or pass a new --store")


class Store:
    """Finished chunks of every sweep run against one SQLite file."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        with _guarded(self.path):
            if self.path.exists() and not self.path.is_file():  # a FIFO would block SQLite's first read
                raise UsageError(f"--store {str(path)!r} is not a regular file; pass a file path")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=60)
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                _check_schema(self._db, self.path)
            except BaseException:
                self._db.close()
                raise

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def put(self, results: Iterable[tuple[str, int, int, str, str]], *, seconds: float,
            pairs: Iterable[tuple[str, int, int, str, int]] = ()) -> None:
        """Store (key, lo, hi, fingerprint, row text) of one finished chunk, and (pair key, lo, hi,
        fingerprint, differing) of its pairs of backends, in one transaction."""
        values = [(k, lo, hi, text, seconds, fp, checksum(k, lo, hi, fp, text)) for k, lo, hi, fp, text in results]
        counted = [(k, lo, hi, n, fp, checksum(k, lo, hi, fp, str(n))) for k, lo, hi, fp, n in pairs]
        with _guarded(self.path), self._db:
            self._db.executemany("INSERT OR REPLACE INTO chunks (sweep, lo, hi, row, seconds, fingerprint, "
                                 "checksum) VALUES (?, ?, ?, ?, ?, ?, ?)", values)
            self._db.executemany("INSERT OR REPLACE INTO pairs (pair, lo, hi, differing, fingerprint, "
                                 "checksum) VALUES (?, ?, ?, ?, ?, ?)", counted)

    def pair_counts(self, key: str, chunks: Sequence[tuple[int, int]], *,
                    fingerprint: str) -> dict[tuple[int, int], int]:
        """The stored differing counts of ``chunks`` of one pair whose checksum, fingerprint and
        range hold (the others are missing: recomputed)."""
        wanted, found = set(chunks), {}
        with _guarded(self.path):
            stored = self._db.execute("SELECT lo, hi, differing, fingerprint, checksum FROM pairs WHERE pair = ?",
                                      (key,)).fetchall()
        for lo, hi, n, printed, sum_ in stored:
            if (lo, hi) in wanted and printed == fingerprint and isinstance(n, int) and 0 <= n <= hi - lo \
                    and sum_ == checksum(key, lo, hi, printed, str(n)):
                found[(lo, hi)] = n
        return found

    def verified(self, spec: SweepSpec, chunks: Sequence[tuple[int, int]], *, fingerprint: str,
                 plots: bool = False) -> Verified:
        """The stored rows of ``chunks`` of ``spec`` that pass every check (:func:`verified_row`)."""
        wanted, rows, rejected = set(chunks), {}, Counter()
        with _guarded(self.path):
            stored = self._db.execute("SELECT lo, hi, row, fingerprint, checksum FROM chunks WHERE sweep = ? "
                                      "ORDER BY lo", (spec.key,)).fetchall()
        for entry in stored:
            if (entry[0], entry[1]) not in wanted:
                continue
            row, why = verified_row(spec, entry, fingerprint=fingerprint, plots=plots)
            if row is None:
                rejected[why] += 1
            else:
                rows[(entry[0], entry[1])] = row
        return Verified(rows, rejected)

    def count(self, key: str) -> int:
        """How many chunk rows of ``key`` the store holds, checked or not."""
        with _guarded(self.path):
            return self._db.execute("SELECT COUNT(*) FROM chunks WHERE sweep = ?", (key,)).fetchone()[0]

    def forget(self, key: str, chunks: Sequence[tuple[int, int]]) -> None:
        """Drop ``chunks`` of ``key``, a sweep's or a pair's (``--fresh``)."""
        with _guarded(self.path), self._db:
            for table, column in (("chunks", "sweep"), ("pairs", "pair")):
                self._db.executemany(f"DELETE FROM {table} WHERE {column} = ? AND lo = ? AND hi = ?",
                                     [(key, lo, hi) for lo, hi in chunks])

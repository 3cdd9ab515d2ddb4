"""The checkpoint store: one SQLite row per (sweep key, chunk), written when the chunk is done.

A chunk's judged :class:`Row` is kept as JSON text in a small explicit encoding that
round-trips exactly (the report's JSON export does not read back): floats as
``float.hex``, numpy scalars as (dtype, bits), tuples tagged.  Merging the stored rows
with ``merge_rows`` gives the same totals as judging every chunk again.

The database runs in WAL mode and each finished chunk (all backends of it) is one
transaction, so a kill -9 loses only the chunks in flight.
"""
from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from conformance.dtypes import from_bits, info, to_bits
from conformance.errors import UsageError
from conformance.report import metrics as met
from conformance.report.evaluate import Finding, Row
from conformance.report.messages import Offender

DEFAULT_STORE = Path("results") / "sweeps.sqlite"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS chunks (
    sweep TEXT NOT NULL,
    lo INTEGER NOT NULL,
    hi INTEGER NOT NULL,
    row TEXT NOT NULL,
    seconds REAL NOT NULL,
    PRIMARY KEY (sweep, lo, hi)
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
    return json.dumps(encode(doc), separators=(",", ":"), allow_nan=False)


def row_from_text(text: str) -> Row:
    doc = decode(json.loads(text))
    doc["metrics"] = met.Metrics(**doc["metrics"])
    doc["findings"] = tuple(Finding(**{**f, "examples": tuple(Offender(**e) for e in f["examples"])})
                            for f in doc["findings"])
    return Row(**doc)


# ----------------------------------------------------------------------------- store

class Store:
    """Finished chunks of every sweep run against one SQLite file."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=60)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
            self._db.commit()
        except (OSError, sqlite3.DatabaseError) as exc:
            raise UsageError(f"--store {str(path)!r} cannot be used as a sweep store ({exc}); "
                             "pass another path") from None

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def done(self, key: str) -> set[tuple[int, int]]:
        """The (lo, hi) chunks of sweep ``key`` already stored."""
        cur = self._db.execute("SELECT lo, hi FROM chunks WHERE sweep = ?", (key,))
        return {(lo, hi) for lo, hi in cur}

    def put(self, results: Iterable[tuple[str, int, int, str]], *, seconds: float) -> None:
        """Store (key, lo, hi, row text) of one finished chunk in one transaction."""
        with self._db:
            self._db.executemany("INSERT OR REPLACE INTO chunks (sweep, lo, hi, row, seconds) "
                                 "VALUES (?, ?, ?, ?, ?)",
                                 [(k, lo, hi, text, seconds) for k, lo, hi, text in results])

    def rows(self, key: str, chunks: Sequence[tuple[int, int]]) -> list[Row]:
        """The stored rows of ``chunks`` of sweep ``key``, in plan order (missing ones left out)."""
        wanted = set(chunks)
        cur = self._db.execute("SELECT lo, hi, row FROM chunks WHERE sweep = ? ORDER BY lo", (key,))
        return [row_from_text(text) for lo, hi, text in cur if (lo, hi) in wanted]

    def forget(self, key: str, chunks: Sequence[tuple[int, int]]) -> None:
        """Drop ``chunks`` of ``key`` (``--fresh``)."""
        with self._db:
            self._db.executemany("DELETE FROM chunks WHERE sweep = ? AND lo = ? AND hi = ?",
                                 [(key, lo, hi) for lo, hi in chunks])

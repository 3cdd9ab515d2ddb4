"""Offline device round trip: the suite's inputs as files, and the device's outputs read back.

``export-cases DIR`` writes, for the rows ``run`` would plan, the very batches
``run`` would feed the backend (``suite.plan`` and ``suite.Inputs``):

- ``inputs/<digest>.npy``: each distinct x or dy once (bfloat16 as raw uint16 bits);
- ``manifest.json``: format, seed, the rows (backend, profile, variant, dtype pair,
  direction, alpha as ``float.hex``) and the cases (one per row and batch: its label,
  input files, and where the device writes ``cases/<id>.out.npy`` or, when torch refuses
  the call, ``cases/<id>.rejected.txt``);
- ``run_cases.py``: the runner template (``ingest/device_runner.py``, numpy + torch only).

``compare --manifest DIR`` judges each case's output against its inputs exactly
as ``run`` judges a backend's result, and merges a row's batches as ``run`` does,
so the rows are ``run``'s rows.  Reproducers need the backend, so none are made.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import numpy as np

from conformance.dtypes import info
from conformance.errors import UsageError
from conformance.ingest import bounded
from conformance.ingest.arrays import load_array
from conformance.ingest.dumps import check_elements
from conformance.judge.evaluate import merge_rows
from conformance.judge.gate import GateConfig
from conformance.records import BackendResult, Row
from conformance.suite import InputBatch, Inputs, RowSpec, judge_batch

FORMAT = "leakyrelu-conformance-cases/1"
RUNNER = "run_cases.py"
_TEMPLATE = Path(__file__).with_name("device_runner.py")
_MAX_REASON = 4096  # bytes of a rejected.txt read


# ----------------------------------------------------------------------------- export

class _Store:
    """Writes each distinct input array once, named by its digest."""

    def __init__(self, root: Path):
        self.root, self.written = root, set()

    def put(self, a: Optional[np.ndarray]) -> Optional[str]:
        if a is None:
            return None
        stored = a.view(np.uint16) if info(a.dtype).name == "bfloat16" else a
        digest = hashlib.sha256(stored.dtype.str.encode() + stored.tobytes()).hexdigest()[:20]
        name = f"inputs/{digest}.npy"
        if name not in self.written:
            np.save(self.root / name, stored, allow_pickle=False)
            self.written.add(name)
        return name


def _row_entry(spec: RowSpec, ids: list[str]) -> dict:
    return {"backend": spec.backend, "profile": spec.profile, "variant": spec.variant,
            "dtype": spec.dtype, "out_dtype": spec.out_dtype, "direction": spec.direction,
            "alpha": float(spec.alpha).hex(), "cases": ids}


def _case_entry(case_id: str, spec: RowSpec, batch: InputBatch, store: _Store) -> dict:
    return {"id": case_id, "label": batch.label, "dtype": spec.dtype, "out_dtype": spec.out_dtype,
            "direction": spec.direction, "alpha": float(spec.alpha).hex(),
            "x": store.put(batch.x), "dy": store.put(batch.dy),
            "out": f"cases/{case_id}.out.npy", "rejected": f"cases/{case_id}.rejected.txt"}


def export(specs: Sequence[RowSpec], root: Path, *, seed: int, max_examples: int,
           alphas: Sequence[float]) -> dict:
    """Write the inputs, the manifest and the runner under ``root`` (which must be empty)."""
    if root.exists() and any(root.iterdir()):
        raise UsageError(f"{root} is not empty; pass a new directory for export-cases")
    for sub in ("inputs", "cases"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    inputs, store = Inputs(seed=seed, max_examples=max_examples, alphas=alphas), _Store(root)
    rows, cases = [], []
    for spec in specs:
        ids = []
        for batch in inputs.batches(spec):
            ids.append(f"c{len(cases):05d}")
            cases.append(_case_entry(ids[-1], spec, batch, store))
        rows.append(_row_entry(spec, ids))
    manifest = {"format": FORMAT, "seed": seed, "max_examples": max_examples,
                "alphas": [float(a).hex() for a in alphas], "rows": rows, "cases": cases}
    (root / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    shutil.copyfile(_TEMPLATE, root / RUNNER)
    return manifest


# ----------------------------------------------------------------------------- compare

def read_manifest(root: Path) -> dict:
    file = root / "manifest.json"
    if not file.is_file():
        raise UsageError(f"--manifest {root}: no manifest.json; pass a directory written by export-cases")
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{file}: not readable JSON ({exc.__class__.__name__}); export the cases again") from None
    manifest = bounded.parse_json(text, where=str(file), fix="export the cases again")
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise UsageError(f"{file}: not a {FORMAT} manifest; export the cases again with this conformance")
    return manifest


def _inside(root: Path, name: str) -> str:
    """A manifest path, checked to stay inside the directory."""
    path = (root / name).resolve()
    if root.resolve() not in path.parents:
        raise UsageError(f"{root}/manifest.json: path {name!r} leaves the directory; export the cases again")
    return str(path)


def _array(root: Path, name: Optional[str], *, dtype: str, what: str) -> Optional[np.ndarray]:
    if name is None:
        return None
    return load_array(_inside(root, name), flag=what, bits_dtype=dtype if dtype == "bfloat16" else None)


def _result(root: Path, case: dict, x: np.ndarray) -> BackendResult:
    """The device's output for a case, or its refusal; a missing output is an input error."""
    rejected = Path(_inside(root, case["rejected"]))
    if rejected.is_file():
        with open(rejected, "rb") as handle:  # the device's reason: its first line, bounded
            reason = handle.read(_MAX_REASON).decode("utf-8", errors="replace").strip()
        return BackendResult(None, rejected=(reason.splitlines() or ["(no reason given)"])[0])
    if not Path(_inside(root, case["out"])).is_file():
        raise UsageError(f"{root / case['out']} is missing: run {root / RUNNER} on the device first "
                         "(it writes every case's output)")
    out = _array(root, case["out"], dtype=case["out_dtype"], what=f"case {case['id']} output")
    assert out is not None
    if out.shape != x.shape or info(out.dtype).name != case["out_dtype"]:
        raise UsageError(f"{root / case['out']} is {out.dtype}{list(out.shape)}, expected "
                         f"{case['out_dtype']}{list(x.shape)}; run {RUNNER} again")
    return BackendResult(out)


def _judge_case(root: Path, spec: RowSpec, case: dict, *, config: GateConfig) -> Row:
    x = _array(root, case["x"], dtype=spec.dtype, what=f"case {case['id']} x")
    dy = _array(root, case["dy"], dtype=spec.dtype, what=f"case {case['id']} dy")
    assert x is not None
    check_elements(x.shape, what=f"{root / case['x']} (case {case['id']} x)", fix="export the cases again")
    batch = InputBatch(case["label"], x, dy)
    return judge_batch(spec, batch, _result(root, case, x), config=config)


def _spec(entry: dict) -> RowSpec:
    return RowSpec(entry["backend"], entry["profile"], entry["variant"], entry["dtype"], entry["out_dtype"],
                   entry["direction"], float.fromhex(entry["alpha"]))


def _plan(manifest: dict, *, file: Path) -> list[tuple[RowSpec, list[dict]]]:
    """Each row's spec and its cases, read from the manifest."""
    try:
        cases = {c["id"]: c for c in manifest["cases"]}
        return [(_spec(entry), [cases[i] for i in entry["cases"]]) for entry in manifest["rows"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{file}: malformed ({exc.__class__.__name__}: {exc}); export the cases again") from None


def rows(path: str, *, config: GateConfig) -> list[Row]:
    """``run``'s rows, from the inputs and the device's outputs under ``path``."""
    root = Path(path)
    planned = _plan(read_manifest(root), file=root / "manifest.json")
    return [merge_rows([_judge_case(root, spec, case, config=config) for case in cases], config=config)
            for spec, cases in planned]

"""Triage cost per judged batch, for the rows that have mismatches.

Run: ``.venv/bin/python -m benchmarks.bench_triage``.  Each line times ``evaluate``
(golden, metrics, triage, gate) of one batch whose output differs from golden the
way a real framework's does, best of 3, next to the same batch with a correct output
(golden only: the cost without triage).  Most rows of `make conformance` have no
mismatch, so this per-batch ratio bounds triage's share of the suite's time from above.

Triage's calls in a real run, replayed on two checkouts (the claims must be the same):

- ``record DIR -- COMMAND...`` runs COMMAND (``conformance run --seed 0``, ``python -m pytest
  ...``) with every ``triage.triage`` call pickled into DIR (batch fields, mismatches, hazards,
  layout);
- ``replay DIR OUT.json`` replays them on the checkout whose ``conformance`` is imported
  (``PYTHONPATH=<checkout>`` picks one), writing each call's claims digest and CPU seconds;
- ``compare OLD.json NEW.json`` prints the calls whose claims differ and the CPU of both.
  Run the two replays at once, so both see the same load.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks.timing import best_time
from conformance.config import default_config
from conformance.dtypes import all_patterns
from conformance.judge.evaluate import evaluate
from conformance.records import BackendResult
from conformance.reference import golden as ref
from conformance.reference.semantics import Semantics


def _cases() -> list[tuple[str, np.ndarray, np.ndarray, float]]:
    f16, bf16 = all_patterns("float16"), all_patterns("bfloat16")
    bits = np.random.default_rng(0).integers(0, 2 ** 32, 1 << 20, dtype=np.uint64).astype(np.uint32)
    f32 = bits.view(np.float32)
    return [
        ("tf fp16 alpha 0.2 (slope in fp16)", f16,
         ref.forward(f16, 0.2, semantics=Semantics(slope_dtype="float16")), 0.2),
        ("tf bf16 alpha 0.2 (slope + flush)", bf16,
         ref.forward(bf16, 0.2, semantics=Semantics(slope_dtype="bfloat16", daz=True, ftz=True)), 0.2),
        ("jax fp32 1M alpha 0.3 (DAZ, FTZ, x >= 0)", f32,
         ref.forward(f32, 0.3, semantics=Semantics(slope_dtype="float32", daz=True, ftz=True, predicate="ge")), 0.3),
        ("torch fp16 alpha 0.01 (1-ULP rounding)", f16,
         ref.forward(f16, 0.01, semantics=Semantics(opmath="float32")), 0.01),
    ]


#: Put first on ``sys.path`` by ``record``: wraps ``triage.triage`` to pickle each call.
_RECORDER = '''import itertools, os, pickle, sys
import conformance.triage as _triage
_real, _count = _triage.triage, itertools.count()
_FIELDS = ("x", "dy", "alpha", "direction", "out_dtype", "golden", "actual", "where", "numel", "weight", "shape")

def triage(batch, *, mismatches, hazards=(), layout=None):
    path = os.path.join(os.environ["TRIAGE_RECORD"], f"{os.getpid()}-{next(_count):06d}.pkl")
    with open(path, "wb") as f:
        pickle.dump(({k: getattr(batch, k) for k in _FIELDS}, mismatches, tuple(hazards), layout), f, protocol=5)
    return _real(batch, mismatches=mismatches, hazards=hazards, layout=layout)

_triage.triage = triage
for _module in list(sys.modules.values()):  # modules the package imports bound the function already
    if getattr(_module, "triage", None) is _real and (_module.__name__ or "").startswith("conformance."):
        _module.triage = triage
'''


def record(directory: Path, command: Sequence[str]) -> int:
    """Run ``command`` with every triage call pickled into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as site:
        Path(site, "sitecustomize.py").write_text(_RECORDER)
        path = os.pathsep.join([site, *filter(None, [os.environ.get("PYTHONPATH")])])
        env = {**os.environ, "PYTHONPATH": path, "TRIAGE_RECORD": str(directory.resolve()), "PYTHONHASHSEED": "0"}
        return subprocess.call(list(command), env=env)


def _digest(claims: Sequence) -> str:
    """Every claim's category, count, elements, summary, detail and place, hashed."""
    h = hashlib.sha256()
    for c in claims:
        h.update(repr((c.category, c.count, c.summary, c.detail, c.in_tensor)).encode())
        h.update(np.ascontiguousarray(c.index).tobytes())
    return h.hexdigest()


def replay(directory: Path, out: Path) -> None:
    """Replay every recorded call; write its claims digest and CPU seconds to ``out``."""
    from conformance.triage import Batch, triage

    calls = {}
    for path in sorted(directory.glob("*.pkl")):
        with path.open("rb") as f:
            fields, mismatches, hazards, layout = pickle.load(f)
        start = time.process_time()
        claims = triage(Batch(**fields), mismatches=mismatches, hazards=hazards, layout=layout)
        calls[path.name] = {"cpu": time.process_time() - start, "claims": _digest(claims)}
    out.write_text(json.dumps(calls, indent=0))
    print(f"{len(calls)} calls: {sum(c['cpu'] for c in calls.values()):.2f} s CPU in triage")


def compare(old: Path, new: Path) -> int:
    """The calls whose claims differ (exit 1 on any), and both replays' CPU."""
    a, b = json.loads(old.read_text()), json.loads(new.read_text())
    differ = sorted(k for k in a if a[k]["claims"] != b.get(k, {}).get("claims"))
    for name in differ:
        print(f"claims differ: {name}")
    cpu_a, cpu_b = (sum(c["cpu"] for c in d.values()) for d in (a, b))
    print(f"{len(a)} calls, {len(differ)} differ; CPU in triage {cpu_a:.2f} s -> {cpu_b:.2f} s "
          f"({cpu_b / cpu_a:.2f}x)")
    return 1 if differ else 0


def main(argv: Sequence[str] = ()) -> int:
    """The per-batch figures; with arguments, ``record``, ``replay`` or ``compare``."""
    if argv and argv[0] == "record" and len(argv) > 3 and argv[2] == "--":
        return record(Path(argv[1]), argv[3:])
    if argv and argv[0] == "replay" and len(argv) == 3:
        replay(Path(argv[1]), Path(argv[2]))
        return 0
    if argv and argv[0] == "compare" and len(argv) == 3:
        return compare(Path(argv[1]), Path(argv[2]))
    if argv:
        print("usage: bench_triage [record DIR -- COMMAND... | replay DIR OUT.json | compare OLD.json NEW.json]",
              file=sys.stderr)
        return 2
    figures()
    return 0


def figures() -> None:
    config = default_config()
    for name, x, actual, alpha in _cases():
        def judged(y: np.ndarray = actual, x: np.ndarray = x, alpha: float = alpha) -> object:
            return evaluate(x, alpha, BackendResult(y), direction="forward", backend="dump", config=config)

        with_triage = best_time(judged, repeat=3)
        clean = best_time(lambda judged=judged, x=x, alpha=alpha: judged(ref.forward(x, alpha)), repeat=3)
        print(f"{name}: {with_triage:.3f} s judged with triage, {clean:.3f} s clean "
              f"({with_triage / clean:.1f}x)")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

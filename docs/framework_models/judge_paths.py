"""Probe real framework code paths and triage their outputs.

    PYTHONPATH=. python docs/framework_models/judge_paths.py collect torch.where ort.opt_off ...
    KERAS_BACKEND=torch PYTHONPATH=. python docs/framework_models/judge_paths.py collect kerastorch.layer
    PYTHONPATH=. V=1 python docs/framework_models/judge_paths.py judge [PATH...]

``collect`` runs each path (probe_paths.PATHS) on every fp16 and bf16 pattern and N32 (default
2^20) random fp32 patterns, alpha in {0, 0.01, 0.2, 0.3, 1.5}, forward and backward, and saves
the outputs under $PROBE_OUT (default /tmp/probe/out); ``judge`` triages them with
``evaluate`` and prints one line per row: mismatches, unexplained, categories."""
from __future__ import annotations

import json
import os
import sys
import time
import traceback

import ml_dtypes
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
OUT = os.environ.get("PROBE_OUT", "/tmp/probe/out")
ALPHAS = tuple(float(a) for a in os.environ.get("ALPHAS", "0,0.01,0.2,0.3,1.5").split(","))
N32 = int(os.environ.get("N32", 1 << 20))
BF16 = np.dtype(ml_dtypes.bfloat16)


def inputs(dtype: str):
    from conformance.cases.exhaustive import random_bits, shuffled16, exhaustive16
    if dtype in ("float16", "bfloat16"):
        return exhaustive16(dtype), shuffled16(dtype, seed=7)
    x = random_bits("float32", N32, seed=5)
    dy = random_bits("float32", N32, seed=6)
    # plus zeros, so grad-at-zero behaviour is visible
    x[:64] = 0.0
    x[64:128] = -0.0
    return x, dy


def collect(names):
    from probe_paths import PATHS, Skip
    os.makedirs(OUT, exist_ok=True)
    only_dt = os.environ.get("DTYPES", "float16,bfloat16,float32").split(",")
    for name in names:
        fn = PATHS[name]
        for dtype in only_dt:
            x, dy = inputs(dtype)
            for direction in ("forward", "backward"):
                for a in ALPHAS:
                    key = f"{name}__{dtype}__{direction}__{a}"
                    path = f"{OUT}/{key}.npz"
                    if os.path.exists(path):
                        continue
                    t0 = time.time()
                    try:
                        res = fn(x, a, None if direction == "forward" else dy)
                    except Skip as e:
                        print(key, "skip", e, flush=True)
                        break
                    except Exception as e:  # noqa
                        print(key, "ERROR", type(e).__name__, str(e)[:300], flush=True)
                        break
                    extra, xin = None, None
                    if isinstance(res, tuple):
                        res, extra = res
                    if isinstance(extra, np.ndarray):
                        xin, extra = extra, "x is the op's own input"
                    res = np.asarray(res)
                    uint = {2: np.uint16, 4: np.uint32, 8: np.uint64}
                    bits = res.view(uint[res.dtype.itemsize])
                    kw = {} if xin is None else {"xbits": xin.view(uint[xin.dtype.itemsize])}
                    np.savez(path, bits=bits, dtype=str(res.dtype), extra=json.dumps(str(extra)), **kw)
                    print(key, "ok", res.dtype, f"{time.time()-t0:.1f}s", extra or "", flush=True)


def judge(names):
    from conformance.records import BackendResult
    from conformance.judge.evaluate import evaluate
    from conformance.config import default_config
    files = sorted(f for f in os.listdir(OUT) if f.endswith(".npz"))
    cache = {}
    results = {}
    for f in files:
        name, dtype, direction, a = f[:-4].split("__")
        if names and name not in names:
            continue
        a = float(a)
        d = np.load(f"{OUT}/{f}")
        odt = str(d["dtype"])
        actual = d["bits"].view(BF16 if odt == "bfloat16" else np.dtype(odt))
        if dtype not in cache:
            cache[dtype] = inputs(dtype)
        x, dy = cache[dtype]
        if "xbits" in d.files:
            x = d["xbits"].view(x.dtype)
        t0 = time.time()
        try:
            row = evaluate(x, a, BackendResult(actual), direction=direction,
                           dy=None if direction == "forward" else dy,
                           out_dtype=odt if odt != dtype else None, backend="dump", config=default_config())
        except Exception as e:
            print(f"{name:20s} {dtype:8s}->{odt:8s} {direction:8s} a={a:<5} JUDGE-ERROR {e}", flush=True)
            traceback.print_exc()
            continue
        found = {fd.category: fd.count for fd in row.findings}
        summ = {fd.category: fd.summary for fd in row.findings}
        un = found.get("unexplained", 0)
        print(f"{name:20s} {dtype:8s}->{odt:8s} {direction:8s} a={a:<5} mism={row.metrics.mismatches:<7d} "
              f"{'UNEXPL=' + str(un) if un else 'ok':12s} {found}  [{time.time()-t0:.1f}s]", flush=True)
        if os.environ.get("V"):
            for c, s in summ.items():
                print("      ", c, ":", s)
        results[f[:-4]] = found
    return results


if __name__ == "__main__":
    cmd, *rest = sys.argv[1:]
    if cmd == "collect":
        collect(rest)
    else:
        judge(rest)

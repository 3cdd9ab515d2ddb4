# Run in the MindSpore environment with this repository on the path:
#   PYTHONPATH=. .venv-mindspore/bin/python docs/framework_models/probe_mindspore.py /tmp/ms.npz
# Real MindSpore outputs through the backend (FZ/DAZ pinned), each call made twice.
import sys, numpy as np
from conformance.frameworks.mindspore_backend import MindSporeBackend
from conformance.cases.exhaustive import random_bits, exhaustive16
b = MindSporeBackend()
ALPHAS = [0.0, 0.01, 0.1, 0.2, 0.3, 1/3, 1.0, 1.5]
def specials(dt):
    fi = np.finfo(dt)
    v = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, fi.tiny, -fi.tiny, fi.smallest_subnormal, -fi.smallest_subnormal,
         fi.tiny / 2, -fi.tiny / 2, fi.tiny * 0.75, -fi.tiny * 0.75, fi.tiny * 1.25, -fi.tiny*1.25, fi.tiny * 3, -fi.tiny*3,
         1.0, -1.0, 3.0, -3.0, fi.max, -fi.max, 1e-3, -1e-3]
    return np.array(v, dtype=dt)
sets = {}
for dt in ("float16", "float32"):
    x = exhaustive16(dt) if dt == "float16" else random_bits(dt, 1 << 20, seed=1)
    sets[dt] = (x, random_bits(dt, x.size, seed=2))
    s = specials(dt)
    gx, gdy = np.meshgrid(s, s)
    sets["grid" + dt] = (gx.ravel(), gdy.ravel())
out = {}
for name, (x, dy) in sets.items():
    out[f"{name}_x"], out[f"{name}_dy"] = x, dy
    for a in ALPHAS:
        for rep in range(2):
            out[f"{name}_f_{a!r}_{rep}"] = b.forward(x, a).value
            out[f"{name}_b_{a!r}_{rep}"] = b.backward(dy, x, a).value
np.savez(sys.argv[1], **out)
print("done")

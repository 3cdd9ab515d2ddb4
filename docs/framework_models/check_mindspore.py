# Run in the project venv: PYTHONPATH=. python docs/framework_models/check_mindspore.py /tmp/ms.npz
# Bit mismatches of the golden MindSpore model against probe_mindspore.py's outputs (NaN payloads aside).
import sys, numpy as np
from conformance.reference import golden
from conformance.reference.semantics import Semantics
from conformance.dtypes import is_nan
A = np.load(sys.argv[1])
ALPHAS = [0.0, 0.01, 0.1, 0.2, 0.3, 1/3, 1.0, 1.5]
def same(a, b):
    u = np.uint32 if a.itemsize == 4 else np.uint16
    return (a.view(u) == b.view(u)) | (is_nan(a) & is_nan(b))
h = lambda v: format(int(np.asarray(v).view(np.uint32 if v.itemsize==4 else np.uint16)), '08x')
tot = 0
for name in ("float32", "float16", "gridfloat32", "gridfloat16"):
    x, dy = A[f"{name}_x"], A[f"{name}_dy"]; dt = x.dtype.name
    fl = dt == "float32"
    for a in ALPHAS:
        f, b = A[f"{name}_f_{a!r}_0"], A[f"{name}_b_{a!r}_0"]
        rep = (~same(f, A[f"{name}_f_{a!r}_1"])).sum() + (~same(b, A[f"{name}_b_{a!r}_1"])).sum()
        held = Semantics(slope_dtype=dt, daz=fl, ftz=fl)
        mf = golden.forward(x, a, semantics=held.combined(Semantics(formulation="max_or_min", nan_operand="x")))
        mb = golden.backward(dy, x, a, semantics=held.combined(Semantics(grad_rule="max", grad_form="sum")))
        nf, nb = ~same(f, mf), ~same(b, mb)
        tot += nf.sum() + nb.sum() + rep
        print(name, round(a, 4), "fwd", nf.sum(), "bwd", nb.sum(), "repeat-diffs", rep)
        for i in np.flatnonzero(nb)[:4]: print("   B x", h(x[i]), x[i], "dy", h(dy[i]), dy[i], "act", h(b[i]), b[i], "model", h(mb[i]), mb[i])
        for i in np.flatnonzero(nf)[:4]: print("   F x", h(x[i]), x[i], "act", h(f[i]), f[i], "model", h(mf[i]), mf[i])
print("TOTAL", tot)

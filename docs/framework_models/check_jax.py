import itertools
import sys

import ml_dtypes
import numpy as np

from conformance.reference import golden as ref
from conformance.reference.semantics import Semantics
from conformance.metrics.exact import match_mask

d = np.load("/tmp/jaxdata/jax.npz")
def arr(k, name):
    v = d[k]
    return v.view(ml_dtypes.bfloat16) if name == "bfloat16" else v
ALPHAS = (0.0, 0.01, 0.2, 0.3, 1.5, -0.5)
for name in ("float16", "bfloat16", "float32"):
    x, dy = arr(f"{name}_x", name), arr(f"{name}_dy", name)
    sd = name
    for a in ALPHAS:
        fw, bw = arr(f"{name}_fwd_{a}", name), arr(f"{name}_bwd_{a}", name)
        res = []
        for daz, ftz in itertools.product((False, True), repeat=2):
            held = Semantics(slope_dtype=sd, daz=daz, ftz=ftz)
            m = ref.forward(x, a, semantics=held.combined(Semantics(predicate="ge")))
            mb = ref.backward(dy, x, a, semantics=held.combined(Semantics(grad_rule="ge", grad_form="sum")))
            res.append(f"daz={int(daz)}ftz={int(ftz)}: f{int((~match_mask(m, fw)).sum())} b{int((~match_mask(mb, bw)).sum())}")
        print(name, a, " | ".join(res)); sys.stdout.flush()

import ml_dtypes
import numpy as np

from conformance.reference import golden as ref
from conformance.reference.semantics import Semantics
from conformance.metrics.exact import match_mask

d = np.load("/tmp/jaxdata/jax.npz")
for name in ("float16", "float32"):
    x = d[f"{name}_x"]
    x = x.view(ml_dtypes.bfloat16) if name == "bfloat16" else x
    for a in (0.0, 0.01, 0.2, 0.3, 1.5, -0.5):
        with np.errstate(all="ignore"):
            k = np.maximum(x, a * x)   # keras/src/backend/numpy/nn.py leaky_relu
        assert k.dtype == x.dtype
        m = ref.forward(x, a, semantics=Semantics(slope_dtype=name, formulation="max"))
        print(name, a, int((~match_mask(k, m)).sum()), "vs golden", int((~match_mask(k, ref.forward(x, a))).sum()))

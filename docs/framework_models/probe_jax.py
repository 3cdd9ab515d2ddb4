import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

ALPHAS = (0.0, 0.01, 0.2, 0.3, 1.5, -0.5)
def inputs():
    f16 = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    rng = np.random.default_rng(1)
    f32 = rng.integers(0, 2**32, 1_000_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    specials = np.float32([0, -0., np.inf, -np.inf, np.nan, 1e-40, -1e-40, 1e-45, -1e-45, 1.17e-38, -1.17e-38])
    f32 = np.concatenate([specials, f32])
    return {"float16": f16.view(np.float16), "bfloat16": f16.view(ml_dtypes.bfloat16), "float32": f32}
out = {}
for name, x in inputs().items():
    dy = np.random.default_rng(2).permutation(x)
    out[f"{name}_x"] = x; out[f"{name}_dy"] = dy
    for a in ALPHAS:
        f = jax.jit(lambda v, a=a: jax.nn.leaky_relu(v, a))
        out[f"{name}_fwd_{a}"] = np.asarray(f(jnp.asarray(x)))
        g = jax.jit(lambda v, d, a=a: jax.vjp(lambda t: jax.nn.leaky_relu(t, a), v)[1](d)[0])
        out[f"{name}_bwd_{a}"] = np.asarray(g(jnp.asarray(x), jnp.asarray(dy)))
        assert out[f"{name}_fwd_{a}"].dtype == x.dtype
np.savez("/tmp/jaxdata/jax.npz", **{k: (v.view(np.uint16) if v.dtype == ml_dtypes.bfloat16 else v) for k, v in out.items()})
print("ok", jax.__version__)

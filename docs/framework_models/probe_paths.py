"""Real framework code paths no backend runs: each maps (x, alpha, dy or None) to the
framework's output as a numpy array (or a tuple (output, note); a tuple (output, array) gives
the op's own input when it is not x), or raises Skip.  Used by judge_paths.py; see README.md."""
from __future__ import annotations

import os

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)


class Skip(Exception):
    pass


# ------------------------------------------------------------------ torch
def _t():
    import torch
    return torch


def to_t(a):
    torch = _t()
    if a.dtype == BF16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


def from_t(t):
    torch = _t()
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(BF16)
    return t.numpy()


def torch_compile_fwd(x, a, dy):
    torch = _t()
    import torch.nn.functional as F
    f = torch.compile(lambda t: F.leaky_relu(t, a), dynamic=False)
    if dy is None:
        return from_t(f(to_t(x)))
    xt = to_t(x).requires_grad_(True)
    y = f(xt)
    y.backward(to_t(dy))
    return from_t(xt.grad)


def torch_where(x, a, dy):
    torch = _t()
    xt = to_t(x).requires_grad_(dy is not None)
    y = torch.where(xt > 0, xt, xt * a)
    if dy is None:
        return from_t(y)
    y.backward(to_t(dy))
    return from_t(xt.grad)


def torch_channels_last(x, a, dy):
    torch = _t()
    import torch.nn.functional as F
    n = x.size
    # shape (N, C, H, W) with a size that divides: pad handled by requiring n % 64 == 0
    if n % 64:
        raise Skip("size")
    t = to_t(x).reshape(n // 64, 4, 4, 4).to(memory_format=torch.channels_last).requires_grad_(dy is not None)
    y = F.leaky_relu(t, a)
    if dy is None:
        return from_t(y.contiguous()).reshape(-1)
    y.backward(to_t(dy).reshape(n // 64, 4, 4, 4))
    return from_t(t.grad.contiguous()).reshape(-1)


def torch_noncontig(x, a, dy):
    torch = _t()
    import torch.nn.functional as F
    n = x.size
    base = torch.zeros(2 * n, dtype=to_t(x[:1]).dtype)
    view = base[::2]
    view.copy_(to_t(x))
    view.requires_grad_(False)
    if dy is None:
        return from_t(F.leaky_relu(view, a))
    leaf = torch.zeros(2 * n, dtype=base.dtype)
    leaf[::2] = to_t(x)
    leaf.requires_grad_(True)
    y = F.leaky_relu(leaf[::2], a)
    y.backward(to_t(dy))
    return from_t(leaf.grad[::2])


def torch_0d(x, a, dy):
    _t()
    import torch.nn.functional as F
    if x.size > 70000:
        raise Skip("slow")
    out = np.empty_like(x)
    xs = to_t(x)
    ds = to_t(dy) if dy is not None else None
    for i in range(x.size):
        t = xs[i].clone()
        if dy is None:
            out[i:i + 1] = from_t(F.leaky_relu(t, a).reshape(1))
        else:
            t.requires_grad_(True)
            F.leaky_relu(t, a).backward(ds[i].clone())
            out[i:i + 1] = from_t(t.grad.reshape(1))
    return out


def torch_autocast_linear(x, a, dy):
    """bf16 autocast around Linear(1,1, weight 1) + LeakyReLU; x bf16 values given as fp32."""
    torch = _t()
    if x.dtype != BF16:
        raise Skip("bf16 only")
    lin = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        lin.weight.fill_(1.0)
    act = torch.nn.LeakyReLU(a)
    xin = to_t(x).float().reshape(-1, 1).requires_grad_(dy is not None)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = lin(xin)
        h.retain_grad()
        y = act(h)
    assert y.dtype == torch.bfloat16, y.dtype
    hx = from_t(h).reshape(-1)  # oneDNN's bf16 matmul flushes subnormals: h is not x
    if dy is None:
        return from_t(y).reshape(-1), hx
    y.backward(to_t(dy).reshape(-1, 1))
    return from_t(h.grad).reshape(-1), hx


def torch_func_grad(x, a, dy):
    torch = _t()
    import torch.nn.functional as F
    if dy is None:
        raise Skip("backward only")
    _, vjp = torch.func.vjp(lambda t: F.leaky_relu(t, a), to_t(x))
    return from_t(vjp(to_t(dy))[0])


def torch_inplace_bwd(x, a, dy):
    _t()
    import torch.nn.functional as F
    if dy is None:
        t = to_t(x)
        F.leaky_relu_(t, a)
        return from_t(t)
    if a < 0:
        raise Skip("negative slope")
    leaf = to_t(x).requires_grad_(True)
    t = leaf * 1  # same bits
    F.leaky_relu_(t, a)
    t.backward(to_t(dy))
    return from_t(leaf.grad)


def torch_onnx_ort(x, a, dy):
    import tempfile
    torch = _t()
    import onnxruntime as ort
    if dy is not None or x.dtype == BF16:
        raise Skip("fwd, no bf16")
    dtype = to_t(x[:1]).dtype
    m = torch.nn.LeakyReLU(a)
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "m.onnx")
        torch.onnx.export(m, (torch.zeros(8, dtype=dtype),), p, dynamo=False,
                          input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "n"}})
        import onnx
        model = onnx.load(p)
        alphas = [att.f for n in model.graph.node for att in n.attribute if att.name == "alpha"]
        sess = ort.InferenceSession(p, providers=["CPUExecutionProvider"])
        return sess.run(None, {"x": x})[0], alphas


# ------------------------------------------------------------------ numpy
def np_where(x, a, dy):
    if dy is not None:
        raise Skip("fwd")
    with np.errstate(all="ignore"):
        return np.where(x > 0, x, a * x)


def np_mask(x, a, dy):
    if dy is not None:
        raise Skip("fwd")
    with np.errstate(all="ignore"):
        return x * (x > 0) + a * x * (x <= 0)


# ------------------------------------------------------------------ TF
def _tf():
    import tensorflow as tf
    return tf


def _tfdt(x):
    tf = _tf()
    return {np.dtype(np.float16): tf.float16, BF16: tf.bfloat16, np.dtype(np.float32): tf.float32}[x.dtype]


def to_tf(x):
    tf = _tf()
    if x.dtype == BF16:
        return tf.cast(tf.bitcast(tf.constant(x.view(np.uint16)), tf.bfloat16), tf.bfloat16)
    return tf.constant(x)


def from_tf(t):
    tf = _tf()
    if t.dtype == tf.bfloat16:
        return tf.bitcast(t, tf.uint16).numpy().view(BF16)
    return t.numpy()


def tf_xla(x, a, dy):
    tf = _tf()

    @tf.function(jit_compile=True)
    def fwd(t):
        return tf.nn.leaky_relu(t, alpha=a)

    @tf.function(jit_compile=True)
    def bwd(t, d):
        with tf.GradientTape() as g:
            g.watch(t)
            y = tf.nn.leaky_relu(t, alpha=a)
        return g.gradient(y, t, output_gradients=d)

    if dy is None:
        return from_tf(fwd(to_tf(x)))
    return from_tf(bwd(to_tf(x), to_tf(dy)))


def tf_tape(x, a, dy):
    tf = _tf()
    if dy is None:
        raise Skip("bwd")
    t = to_tf(x)
    with tf.GradientTape() as g:
        g.watch(t)
        y = tf.nn.leaky_relu(t, alpha=a)
    return from_tf(g.gradient(y, t, output_gradients=to_tf(dy)))


def tf_rawgrad(x, a, dy):
    tf = _tf()
    if dy is None:
        raise Skip("bwd")
    return from_tf(tf.raw_ops.LeakyReluGrad(gradients=to_tf(dy), features=to_tf(x), alpha=a))


def _keras_policy_layer(x, a, dy, policy, in_dtype=None):
    import keras
    keras.mixed_precision.set_global_policy(policy)
    try:
        layer = keras.layers.LeakyReLU(negative_slope=a)
        tf = _tf()
        xt = to_tf(x)
        if dy is None:
            return from_tf(layer(xt))
        with tf.GradientTape() as g:
            g.watch(xt)
            y = layer(xt)
        d = to_tf(dy)
        if y.dtype != d.dtype:
            d = tf.cast(d, y.dtype)
        return from_tf(g.gradient(y, xt, output_gradients=d)), y.dtype.name
    finally:
        keras.mixed_precision.set_global_policy("float32")


def keras_mixed_f16(x, a, dy):
    return _keras_policy_layer(x, a, dy, "mixed_float16")


def keras_mixed_bf16(x, a, dy):
    return _keras_policy_layer(x, a, dy, "mixed_bfloat16")


def keras_f32_policy(x, a, dy):
    return _keras_policy_layer(x, a, dy, "float32")


def keras_ops(x, a, dy):
    import keras
    if dy is not None:
        raise Skip("fwd")
    return from_tf(keras.ops.leaky_relu(to_tf(x), negative_slope=a))


# ------------------------------------------------------------------ JAX
def _jax():
    import jax
    return jax


def jax_jit(x, a, dy):
    jax = _jax()
    import jax.numpy as jnp
    f = jax.jit(lambda t: jax.nn.leaky_relu(t, a))
    if dy is None:
        return np.asarray(f(jnp.asarray(x)))
    _, vjp = jax.vjp(f, jnp.asarray(x))
    return np.asarray(vjp(jnp.asarray(dy))[0])


def jax_eager(x, a, dy):
    jax = _jax()
    import jax.numpy as jnp
    if dy is None:
        return np.asarray(jax.nn.leaky_relu(jnp.asarray(x), a))
    _, vjp = jax.vjp(lambda t: jax.nn.leaky_relu(t, a), jnp.asarray(x))
    return np.asarray(vjp(jnp.asarray(dy))[0])


def jax_traced_alpha(x, a, dy):
    jax = _jax()
    import jax.numpy as jnp
    f = jax.jit(lambda t, s: jax.nn.leaky_relu(t, s))
    s = jnp.asarray(a, dtype=jnp.float32)
    if dy is None:
        return np.asarray(f(jnp.asarray(x), s))
    y, vjp = jax.vjp(lambda t: f(t, s), jnp.asarray(x))
    return np.asarray(vjp(jnp.asarray(dy).astype(y.dtype))[0])


def jax_grad_sum(x, a, dy):
    jax = _jax()
    import jax.numpy as jnp
    if dy is None:
        raise Skip("bwd")
    g = jax.grad(lambda t: jnp.sum(jax.nn.leaky_relu(t, a) * jnp.asarray(dy)))
    return np.asarray(g(jnp.asarray(x)))


# ------------------------------------------------------------------ ORT
def _ort_model(dtype, alpha):
    from onnx import TensorProto, helper
    et = {np.dtype(np.float16): TensorProto.FLOAT16, np.dtype(np.float32): TensorProto.FLOAT}[dtype]
    node = helper.make_node("LeakyRelu", ["x"], ["y"], alpha=alpha)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", et, [None])],
                          [helper.make_tensor_value_info("y", et, [None])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])
    m.ir_version = 8
    return m.SerializeToString()


def _ort(x, a, dy, level):
    import onnxruntime as ort
    if dy is not None or x.dtype == BF16:
        raise Skip("fwd, no bf16")
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    s = ort.InferenceSession(_ort_model(x.dtype, a), so, providers=["CPUExecutionProvider"])
    return s.run(None, {"x": x})[0]


def ort_opt_all(x, a, dy):
    import onnxruntime as ort
    return _ort(x, a, dy, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)


def ort_opt_off(x, a, dy):
    import onnxruntime as ort
    return _ort(x, a, dy, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)


PATHS = {
    "torch.compile": torch_compile_fwd,
    "torch.where": torch_where,
    "torch.channels_last": torch_channels_last,
    "torch.noncontig": torch_noncontig,
    "torch.autocast_bf16": torch_autocast_linear,
    "torch.func.vjp": torch_func_grad,
    "torch.inplace": torch_inplace_bwd,
    "torch.onnx->ort": torch_onnx_ort,
    "np.where": np_where,
    "np.mask": np_mask,
    "tf.xla": tf_xla,
    "tf.tape": tf_tape,
    "tf.rawgrad": tf_rawgrad,
    "keras.mixed_f16": keras_mixed_f16,
    "keras.mixed_bf16": keras_mixed_bf16,
    "keras.f32_policy": keras_f32_policy,
    "keras.ops": keras_ops,
    "jax.jit": jax_jit,
    "jax.eager": jax_eager,
    "jax.traced_alpha": jax_traced_alpha,
    "jax.grad_sum": jax_grad_sum,
    "ort.opt_all": ort_opt_all,
    "ort.opt_off": ort_opt_off,
    "torch.0d": torch_0d,
}


# ------------------------------------------------------------------ Keras 3 on its torch backend (KERAS_BACKEND=torch)
def _kt(x, a, dy, policy, use_ops=False):
    assert os.environ.get("KERAS_BACKEND") == "torch"
    import keras
    _t()
    keras.mixed_precision.set_global_policy(policy)
    try:
        xt = to_t(x).requires_grad_(dy is not None)
        if use_ops:
            y = keras.ops.leaky_relu(xt, negative_slope=a)
        else:
            y = keras.layers.LeakyReLU(negative_slope=a)(xt)
        if dy is None:
            return from_t(y), str(y.dtype)
        y.backward(to_t(dy).to(y.dtype))
        return from_t(xt.grad), str(y.dtype)
    finally:
        keras.mixed_precision.set_global_policy("float32")


def kt_layer(x, a, dy):
    return _kt(x, a, dy, "float32")


def kt_ops(x, a, dy):
    return _kt(x, a, dy, "float32", use_ops=True)


def kt_mixed_f16(x, a, dy):
    return _kt(x, a, dy, "mixed_float16")


def kt_mixed_bf16(x, a, dy):
    return _kt(x, a, dy, "mixed_bfloat16")


PATHS.update({"kerastorch.layer": kt_layer, "kerastorch.ops": kt_ops,
              "kerastorch.mixed_f16": kt_mixed_f16, "kerastorch.mixed_bf16": kt_mixed_bf16})


# ------------------------------------------------------------------ Keras 3 on its numpy / jax backends (forward)
def _kb(x, a, dy, *, layer: bool, policy: str = "float32"):
    import keras
    if dy is not None:
        raise Skip("forward only (the numpy backend has no autodiff)")
    if os.environ.get("KERAS_BACKEND") not in ("numpy", "jax"):
        raise Skip("run with KERAS_BACKEND=numpy or jax")
    xt = keras.ops.convert_to_tensor(x)
    y = keras.layers.LeakyReLU(negative_slope=a, dtype=policy)(xt) if layer else \
        keras.ops.leaky_relu(xt, negative_slope=a)
    return np.asarray(y), str(y.dtype)


def kb_ops(x, a, dy):
    return _kb(x, a, dy, layer=False)


def kb_layer(x, a, dy):
    return _kb(x, a, dy, layer=True)


def kb_mixed_f16(x, a, dy):
    return _kb(x, a, dy, layer=True, policy="mixed_float16")


PATHS.update({"kerasnp.ops": kb_ops, "kerasnp.layer": kb_layer, "kerasnp.mixed_f16": kb_mixed_f16,
              "kerasjax.ops": kb_ops, "kerasjax.layer": kb_layer, "kerasjax.mixed_f16": kb_mixed_f16})

"""What each framework computes, as the golden Semantics that reproduces its bits.

A model maps (input dtype, direction) to a :class:`Semantics`: golden under it equals
the framework's CPU kernel bit for bit on every 16-bit pattern and on random float32 and
float64 patterns (zero signs included; NaN payloads aside), at the suite's alphas.
``tests/frameworks/test_models_main_env.py`` and ``tests/frameworks/test_models_own_envs.py``
check each model against the real framework where it is installed.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Optional

from conformance.records import Direction
from conformance.reference.semantics import Semantics

Model = Callable[[str, Direction], Semantics]


def jax(dtype: str, direction: Direction) -> Semantics:
    """``where(x >= 0, x, a_T*x)``; XLA:CPU runs DAZ/FTZ (float16 computes in float32, where
    its subnormals are normal); the gradient is autodiff's ``where(c, dy, 0) + a*where(c, 0, dy)``,
    fused into one multiply-add for float32/float64 (16-bit operations are widened one by one,
    so the product is rounded to T before the add)."""
    flush = dtype != "float16"
    if direction == "forward":
        return Semantics(slope_dtype=dtype, predicate="ge", daz=flush, ftz=flush)
    form = "sum" if dtype in ("float16", "bfloat16") else "fma"
    return Semantics(slope_dtype=dtype, grad_rule="ge", grad_form=form, daz=flush, ftz=flush)


def jax_fused_float16(dtype: str, direction: Direction) -> Semantics:
    """:func:`jax` with the float16 backward fused into one multiply-add in float32, as
    XLA:CPU compiles it on some hosts (measured on an Intel Xeon reporting avx512_bf16 and
    amx_bf16; other hosts widen op by op, the branch sum of :func:`jax`)."""
    model = jax(dtype, direction)
    if dtype == "float16" and direction == "backward":
        return Semantics(slope_dtype=dtype, grad_rule="ge", grad_form="fma")
    return model


def tensorflow(dtype: str, direction: Direction) -> Semantics:
    """``tf.nn.leaky_relu``: a float32 attribute converted to T; DAZ/FTZ where T computes in float32."""
    flush = dtype in ("bfloat16", "float32")
    return Semantics(slope_dtype=("float32", dtype), daz=flush, ftz=flush)


def keras_numpy(dtype: str, direction: Direction) -> Semantics:
    """Keras's numpy backend: ``np.maximum(x, np.array(a, x.dtype) * x)`` (min for a > 1 is not
    taken: the bug the policy fails)."""
    return Semantics(slope_dtype=dtype, formulation="max")


def onnxruntime(dtype: str, direction: Direction) -> Semantics:
    """``LeakyRelu``: a float32 attribute; float16 computed in float32 and rounded once."""
    return Semantics(opmath="float32") if dtype == "float16" else Semantics(slope_dtype="float32")


def paddle(dtype: str, direction: Direction) -> Semantics:
    """Forward: Eigen ``x.cwiseMax(T(alpha)*x)`` (cwiseMin for alpha >= 1), the slope in T, a
    NaN product returns x.  Backward: ``dout * (T(alpha)*(x < 0) + (x >= 0))``: dy at x == 0,
    dy*0 at NaN."""
    if direction == "forward":
        return Semantics(slope_dtype=dtype, formulation="max_or_min", nan_operand="x")
    return Semantics(slope_dtype=dtype, grad_rule="ge", nan_grad="dy*0")


def mindspore(dtype: str, direction: Direction) -> Semantics:
    """Forward: ``maximum(T(alpha)*x, x)`` (minimum for alpha > 1) on the CPU Maximum kernel.
    Backward: MaximumGrad (ties split dy/2, NaN gives dy to both), then ``alpha*d1 + d2``.
    float32 ops run under FZ/DAZ; float16 kernels compute in float32, where fp16 subnormals
    are normal."""
    flush = dtype == "float32"
    if direction == "forward":
        return Semantics(slope_dtype=dtype, formulation="max_or_min", nan_operand="x", daz=flush, ftz=flush)
    return Semantics(slope_dtype=dtype, grad_rule="max", grad_form="sum", daz=flush, ftz=flush)


#: backend name, or ``name[profile]`` where a profile computes differently.
MODELS: dict[str, Model] = {
    "jax": jax, "onnxruntime": onnxruntime, "paddle": paddle, "mindspore": mindspore,
    "tensorflow": tensorflow, "keras[jax]": jax, "keras[numpy]": keras_numpy,
    "keras[tensorflow]": tensorflow,
}

#: A second model that holds instead on some hosts: the framework's code generation depends on
#: the CPU it runs on.
HOST_DEPENDENT: dict[str, Model] = {"jax": jax_fused_float16, "keras[jax]": jax_fused_float16}


def known_semantics(backend: str, *, profile: Optional[str] = None, dtype: str,
                    direction: Direction) -> Semantics:
    """The Semantics that reproduces ``backend`` (and ``profile``) on ``dtype`` in ``direction``,
    or a KeyError naming the modelled backends."""
    key = f"{backend}[{profile}]" if profile else backend
    if key not in MODELS:
        raise KeyError(f"no model of {key}; modelled: {', '.join(MODELS)}")
    return MODELS[key](dtype, direction)

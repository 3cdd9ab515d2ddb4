"""Variant settings of the golden, written as the golden's keyword arguments, and their inputs."""
from __future__ import annotations

import numpy as np

from conformance.dtypes import all_patterns, from_bits

F, B = ("forward",), ("backward",)
FB = F + B
SAME = (("float16", "float16"), ("bfloat16", "bfloat16"), ("float32", "float32"))
CAST = (("float32", "float16"), ("float32", "bfloat16"), ("float16", "float32"), ("bfloat16", "float32"))

# name, directions, alpha, keywords, dtype pairs
_TABLE = [
    ("exact", FB, 0.2, {}, SAME + CAST),
    ("exact-neg", FB, -0.5, {}, SAME),
    ("slope-t", FB, 0.01, {"slope_dtype": "float16"}, SAME),
    ("slope-chain", FB, 0.3, {"slope_dtype": ("float32", "bfloat16")}, SAME),
    ("opmath32", FB, 0.2, {"opmath": "float32"}, SAME + CAST[:2]),
    ("opmath-bf16-ftz", F, 0.2, {"opmath": "bfloat16", "ftz": True}, (("float32", "float32"),)),
    ("flush", FB, 0.2, {"flush_subnormals": True}, SAME + CAST),
    ("daz", FB, 0.2, {"daz": True}, SAME),
    ("ftz", FB, 1 / 3, {"ftz": True}, SAME),
    ("saturate", FB, 1.5, {"saturate": True}, SAME + CAST[:2]),
    ("saturate-inf", FB, 1.5, {"saturate": "inf"}, SAME),
    ("narrow16", FB, 0.2, {"input_dtype": "float16"}, SAME + CAST[:2]),
    ("narrow-bf16", FB, 0.2, {"input_dtype": "bfloat16"}, SAME),
    ("xla", F, 0.2, {"daz": True, "ftz": True, "predicate": "ge", "slope_dtype": "float32"}, SAME),
    ("max", F, 1.5, {"formulation": "max"}, SAME),
    ("min", F, -0.5, {"formulation": "min"}, SAME),
    ("maxmin", F, 0.2, {"formulation": "maxmin"}, SAME),
    ("mask", F, 0.2, {"formulation": "mask"}, SAME + CAST[:2]),
    ("mask-opmath", F, 0.2, {"formulation": "mask", "opmath": "float32"}, CAST[:2]),
    ("relu", FB, 0.0, {"formulation": "relu"}, SAME),
    ("scale", FB, 0.2, {"formulation": "scale"}, SAME),
    ("max-or-min-x", F, 1.5, {"formulation": "max_or_min", "nan_operand": "x", "daz": True, "ftz": True}, SAME),
    ("max-or-min", F, 0.0, {"formulation": "max_or_min", "slope_dtype": "float16"}, SAME),
    ("twice", F, 0.3, {"formulation": "twice"}, SAME),
    ("twice-rtz", F, 0.3, {"formulation": "twice", "rounding": "rtz", "daz": True}, SAME),
    ("merge", F, 0.0, {"formulation": "merge"}, SAME),
    ("swap-branches", B, 0.2, {"formulation": "swap_branches"}, SAME),
    ("swap-operands", B, 0.2, {"formulation": "swap_operands"}, SAME + CAST[:1]),
    ("rtz", FB, 0.1, {"rounding": "rtz"}, SAME + CAST),
    ("rna", FB, 0.1, {"rounding": "rna", "opmath": "float32"}, SAME + CAST[:2]),
    ("result16", FB, 0.2, {"result_dtype": "float16"}, SAME + CAST[2:]),
    ("result-bf16", FB, 0.2, {"result_dtype": "bfloat16", "daz": True}, (("float16", "float32"),)),
    ("grad-ge", B, 0.2, {"grad_rule": "ge"}, SAME),
    ("grad-max", B, 0.5, {"grad_rule": "max", "grad_form": "sum", "slope_dtype": "float16"}, SAME),
    ("grad-max-flush", B, 1.5, {"grad_rule": "max", "daz": True, "ftz": True}, SAME),
    ("grad-result", B, -0.2, {"grad_rule": "result"}, SAME),
    ("grad-sum", B, 0.2, {"grad_rule": "ge", "grad_form": "sum", "daz": True}, SAME),
    ("grad-fma", B, 0.2, {"grad_rule": "ge", "grad_form": "fma", "daz": True, "ftz": True,
                          "slope_dtype": "float32"}, SAME),
    ("nan-dy", B, 0.2, {"nan_grad": "dy"}, SAME),
    ("nan-zero", B, 0.2, {"nan_grad": "zero"}, SAME),
    ("nan-dy0", B, 0.2, {"nan_grad": "dy*0", "grad_rule": "ge"}, SAME),
    ("nan-nan", B, 0.2, {"nan_grad": "nan", "saturate": True}, SAME),
    ("rounding-f64", FB, 0.2, {"rounding": "rtz"}, (("float64", "float64"),)),
]

#: (name, direction, alpha, (src, out), keywords), one entry per call.
SETTINGS = [(name, d, alpha, pair, kw) for name, dirs, alpha, kw, pairs in _TABLE
            for d in dirs for pair in pairs]


def inputs(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Every pattern of a 16-bit dtype, or a fixed random set of 2**16 patterns of a wider
    one; dy is the same set, permuted."""
    if dtype in ("float16", "bfloat16"):
        x = all_patterns(dtype)
    else:
        width = np.uint32 if dtype == "float32" else np.uint64
        bits = np.random.default_rng(2026).integers(0, np.iinfo(width).max, 1 << 16, dtype=width,
                                                    endpoint=True)
        x = from_bits(bits, dtype)
    return x, x[np.random.default_rng(7).permutation(x.size)]

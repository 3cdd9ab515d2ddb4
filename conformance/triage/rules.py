"""The catalogue of candidate explanations: each a golden variant and the category it proves.

A :class:`Rule` carries a :class:`~conformance.reference.semantics.Semantics` record (the
golden variant it stands for, built once with the rule).  Triage (``search``) scores every
rule, and stacks of them, by recomputing golden under them; this module only says which
rules are worth trying for a batch.
A rule with ``category=None`` is neutral context (float32 opmath): it may be part of
an explanation, but the elements only it explains stay ``rounding``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Optional

import numpy as np

from conformance import categories
from conformance.dtypes import info, is_nan
from conformance.reference import golden as ref
from conformance.reference.defaults import default_slopes, frameworks_with_default
from conformance.reference.semantics import Semantics

Groups = Callable[[np.ndarray], list]


@dataclass(frozen=True)
class Rule:
    """One candidate explanation."""

    category: Optional[str]
    semantics: Semantics
    summary: str
    detail: dict = field(default_factory=dict, compare=False)
    complexity: float = 1.0  # description length of the rule, in rules
    groups: Optional[Groups] = field(default=None, compare=False)  # each group must gain
    reach: Optional[str] = None  # the only elements it can change: "nan", "zero", "special", "tiny"
    keys: frozenset[str] = field(init=False, compare=False, repr=False)  # the fields its semantics sets

    def __post_init__(self) -> None:
        if self.category is not None:
            categories.check(self.category)
        object.__setattr__(self, "keys", frozenset(self.semantics.settings()))


def rule(category: Optional[str], summary: str, detail: Optional[dict] = None, *,
         complexity: float = 1.0, groups: Optional[Groups] = None, reach: Optional[str] = None,
         **settings: object) -> Rule:
    """A rule whose variant sets ``settings`` (:class:`Semantics` fields)."""
    return Rule(category, Semantics(**settings), summary, detail or {}, complexity, groups, reach)


# ----------------------------------------------------------------------------- slopes

def _close_to(alpha: float, c: float) -> bool:
    """Within what rounding alpha to a 16-bit dtype could do (that is alpha-precision)."""
    return abs(c - alpha) <= abs(alpha) * 2.0 ** -8


def slope_dtypes(dtypes: tuple[str, str]) -> list[str]:
    """Dtypes a kernel may round the slope to: either 16-bit dtype (T's own, as TF, JAX and
    MindSpore do, or another one, say a bfloat16 scalar in an fp16 kernel), and float32
    for float32 tensors (torch, TF and the CANN kernel all hold the slope as float32) and
    for float64 ones (TF's alpha is a float32 attribute)."""
    names = set(dtypes)
    narrow = ["float16", "bfloat16"]  # a kernel may hold the slope in a 16-bit type that is not T
    return narrow + (["float32"] if names & {"float32", "float64"} else [])


def _digits(estimate: float) -> list[tuple[float, int]]:
    out = [(float(f"{estimate:.{k}g}"), k) for k in range(1, 8)] + [(estimate, 17)]
    return [(c, k) for c, k in out if np.isfinite(c)]


def _who(c: float) -> str:
    names = frameworks_with_default(c)
    return f" ({c!r} is the default of {', '.join(names)})" if names else ""


def _plain(c: float) -> str:
    return " (plain ReLU, or the CANN default 0.0)" if c == 0 else _who(c)


def _alpha_rules(alpha: float, dtypes: tuple[str, str], estimates: list[float]) -> list[Rule]:
    """Another slope: every framework default and the estimate at 1..7 significant
    digits, each exact and rounded to each dtype in play."""
    cands = [(d, 0) for d in default_slopes()]
    for e in estimates:
        cands += _digits(e)
    seen: dict[float, int] = {}
    for c, k in cands:
        seen.setdefault(c, k)
    rules = []
    for c, k in seen.items():
        if _close_to(alpha, c):
            continue
        base = {"effective_alpha": c, "expected_alpha": alpha, "default_of": list(frameworks_with_default(c))}
        rules.append(rule("alpha-mismatch", f"negative side computed with slope {c!r} instead of {alpha!r}"
                          f"{_plain(c)}", base, complexity=1 + 1e-3 * k, slope=c))
        for d in slope_dtypes(dtypes):
            slope = ref.effective_slope(c, slope_dtype=d)
            if slope != c and not _close_to(alpha, slope):
                rules.append(rule("alpha-mismatch", f"negative side computed with slope {c!r} rounded to "
                                  f"{d} ({slope!r}) instead of {alpha!r}{_plain(c)}",
                                  {**base, "slope_dtype": d, "slope": slope},
                                  complexity=1 + 1e-3 * k, slope=c, slope_dtype=d))
    return rules


def _relu_rule(alpha: float, direction: str) -> list[Rule]:
    if alpha == 0:  # a zero slope's sign of zero is not another slope
        return []
    return [rule("alpha-mismatch", f"negative side gives +0 instead of slope {alpha!r}: plain ReLU "
                 "max(x, 0), or the CANN default 0.0",
                 {"effective_alpha": 0.0, "expected_alpha": alpha, "default_of": ["CANN"],
                  "formula": "max(x, 0)"}, formulation="relu")]


def _precision_rules(alpha: float, dtypes: tuple[str, str]) -> list[Rule]:
    out = []
    for d in slope_dtypes(dtypes):
        slope = ref.effective_slope(alpha, slope_dtype=d)
        if slope != alpha:
            out.append(rule("alpha-precision", f"slope rounded to {d} ({slope!r}) before multiplying",
                            {"slope_dtype": d, "slope": slope, "alpha": alpha}, slope_dtype=d))
    return out


# ----------------------------------------------------------------------------- the rest

_FORMULAS = {"max": "max(x, a*x)", "min": "min(x, a*x)", "maxmin": "max(x, 0) + a*min(x, 0)",
             "mask-multiply": "x*m + a*x*(1-m) with m = (x > 0)", "scale": "a*x on both sides (no select)"}


def _more_formulations(alpha: float, direction: str) -> list[Rule]:
    """Formulas a hand-written kernel gets wrong in ways that show only for some alphas or values."""
    if direction == "backward":
        return [rule("formulation", "branches swapped: dx = a*dy where x > 0 and dy elsewhere (the "
                     "gradient of min(x, a*x))", {"formula": "x > 0 ? a*dy : dy"}, formulation="swap_branches"),
                rule("formulation", "dy and x passed the other way round: dx = x where dy > 0, else a*x",
                     {"formula": "dy > 0 ? x : a*x"}, formulation="swap_operands"),
                rule("formulation", "the gradient selected on the forward result y > 0 instead of x > 0 "
                     "(a kernel that keeps only y; wrong for a < 0)", {"formula": "y > 0 ? dy : a*dy"},
                     grad_rule="result")]
    out = [rule("formulation", "LeakyReLU applied twice: the negative side is a*(a*x), rounded twice",
                {"formula": "f(f(x))", "effective_alpha": alpha * alpha}, formulation="twice"),
           rule("formulation", "selected with x >= 0 instead of x > 0 (x = -0 passes through)",
                {"formula": "x >= 0 ? x : a*x"}, reach="zero", predicate="ge")]
    if alpha == 0:  # a zero slope asked for: max(x, 0) is another formula, not another slope
        out.append(rule("formulation", "computed as max(x, 0) (plain ReLU: +0 for every negative x, "
                        "and -inf gives 0 instead of NaN)", {"formula": "max(x, 0)"}, formulation="relu"))
    return out


def _rounding_rules(dtypes: tuple[str, str]) -> list[Rule]:
    """The result's final conversion rounded in another mode (modelled for inputs of at most
    32 bits and outputs narrower than float64)."""
    if "float64" in dtypes:
        return []
    return [rule("rounding", "results rounded toward zero (truncated) instead of to nearest even, so "
                 "an overflow gives ±max", {"rounding": "toward zero"}, rounding="rtz"),
            rule("rounding", "results rounded to nearest with ties away from zero instead of ties to even",
                 {"rounding": "half away from zero"}, rounding="rna")]


def _formulation_rules(direction: str) -> list[Rule]:
    if direction == "backward":
        # MindSpore's own graph first: where both predict the same, the stack keeps it, and a
        # flush rule stacked on it then reads dy in a*d1 + d2 as MindSpore's Add does
        return [rule("formulation", "the gradient of maximum(a*x, x) through MaximumGrad (MindSpore): "
                     "dx = a*d1 + d2 rounded step by step, a tie (x = ±0, ±inf) gives a*(dy/2) + dy/2, a "
                     "NaN product a*dy + dy", {"formula": "d maximum(a*x, x)", "form": "a*d1 + d2"},
                     reach="special", grad_rule="max", grad_form="sum"),
                rule("formulation", "the gradient of maximum(a*x, x): a tie (x = ±0, ±inf) "
                     "gives ((1+a)/2)*dy, a NaN product (1+a)*dy", {"formula": "d maximum(a*x, x)"},
                     reach="special", grad_rule="max"),
                rule("formulation", "computed as a*dy on both sides (no select)", {"formula": "a*dy"},
                     formulation="scale")]
    return [rule("formulation", f"computed as {text}", {"formula": text}, formulation=name)
            for name, text in _FORMULAS.items()] + [
        rule("formulation", "computed as max(x, a*x) (min for a > 1) by a compare-select that returns x "
             "where a*x is NaN, so x = ±inf with a = 0 gives ±inf (Paddle, MindSpore)",
             {"formula": "max(x, a*x), min for a > 1", "nan_product": "x"}, reach="special",
             formulation="max_or_min", nan_operand="x"),
        rule("formulation", "select x >= 0 instead of x > 0: x = ±0 passes through unchanged, which shows "
             "only for a negative slope (ONNX's definition; ONNX Runtime's float32 kernel, JAX)",
             {"formula": "where(x >= 0, x, a*x)"}, predicate="ge"),
        rule("formulation", "computed as where(x < 0, a*x, x) by a select-and-merge that gives +0 where the "
             "selected product is a zero (ONNX Runtime's Where, which runs its float16 LeakyRelu's function "
             "body: x_sel != 0 ? x_sel : y_sel)", {"formula": "where(x < 0, a*x, x)", "merge": "x_sel != 0"},
             formulation="merge", predicate="ge")]


def _flush_rules() -> list[Rule]:
    """Flushes alone: they change only values below the normal range (tried first)."""
    both = "subnormal inputs read as zero (DAZ) and subnormal products flushed (FTZ)"
    return [
        rule("subnormal-flush", both, {"daz": True, "ftz": True}, daz=True, ftz=True,
             reach="tiny"),
        rule("subnormal-flush", "subnormal inputs read as zero (DAZ)", {"daz": True}, daz=True, reach="tiny"),
        rule("subnormal-flush", "subnormal products flushed to zero (FTZ)", {"ftz": True}, ftz=True, reach="tiny"),
        rule("subnormal-flush", "every subnormal result flushed to zero", {"flush_output": True},
             daz=True, ftz=True, flush_output=True, reach="tiny"),
        rule("subnormal-flush", "every subnormal input and result flushed to zero", {"flush_inputs": True},
             daz=True, ftz=True, flush_output=True, flush_inputs=True, reach="tiny"),
        rule("subnormal-flush", "every subnormal input flushed to zero as it is read (selected values "
             "included), results kept", {"flush_inputs": True, "ftz": False}, flush_inputs=True, reach="tiny"),
    ]


def _flush_select_rules(direction: str) -> list[Rule]:
    """Flushes together with a select ``x >= 0``: they change zeros too, so they are tried
    where the formulations are, not first."""
    both = "subnormal inputs read as zero (DAZ) and subnormal products flushed (FTZ)"
    rules: list[Rule] = []
    if direction == "forward":
        rules += [
            rule("subnormal-flush", both + " with select x >= 0, so a negative subnormal x passes "
                 "through (XLA:CPU)", {"daz": True, "ftz": True, "predicate": "x >= 0"},
                 daz=True, ftz=True, predicate="ge", reach="tiny"),
            rule("subnormal-flush", "subnormal inputs read as zero (DAZ) with select x >= 0",
                 {"daz": True, "predicate": "x >= 0"}, daz=True, predicate="ge", reach="tiny"),
        ]
    else:  # DAZ under autodiff's where(x >= 0, x, a*x): a subnormal x (read as zero) takes dy and
        # the branch sum's add reads a subnormal dy as zero.  Two rules' worth (a flush and
        # grad-at-zero) and a little more, so that where the pair explains a batch, the pair
        # names it (and x == 0 stays grad-at-zero); alone it covers batches without zeros.
        for form, text in (("sum", "branch sum"), ("fma", "branch sum fused into one multiply-add")):
            rules.append(rule("subnormal-flush", both + " under autodiff through where(x >= 0, x, a*x) "
                              f"({text}, XLA:CPU): a subnormal x takes dy, a subnormal dy passes the add "
                              "as zero", {"daz": True, "ftz": True, "rule": "x >= 0", "form": text},
                              complexity=2.1, daz=True, ftz=True, grad_rule="ge", grad_form=form,
                              reach="tiny"))
    return rules


def _value_groups(before: np.ndarray) -> list[np.ndarray]:
    return [is_nan(before), np.isinf(before.astype(np.float64))]


def _saturation_rules(dtypes: tuple[str, str]) -> list[Rule]:
    text = "NaN became 0 and/or ±inf became ±max (saturation mode)"
    rules = [rule("saturation", text, {}, groups=_value_groups, reach="special", saturate=True),
             rule("saturation", "±inf became ±max, NaN kept (a saturating cast or clamp)", {"which": "inf"},
                  groups=_value_groups, reach="special", saturate="inf")]
    if dtypes[0] != "float64":  # no float32 unit reads float64 operands
        rules.append(rule("saturation", text + ", operands saturated too", {"operands": True},
                          groups=_value_groups, reach="special", saturate=True, saturate_inputs=True))
    return rules


def _gradient_rules() -> list[Rule]:
    return [
        rule("grad-step", "backward as the TBE pre-v200 step function: dx = dy*(|r-1|*alpha + r), "
             "r = min(x, tiny)/tiny, so a positive subnormal x got a fraction of dy", {"rule": "step"},
             reach="tiny", grad_rule="step"),
        rule("grad-at-zero", "backward at x == 0 used slope 1 (dx = dy) instead of alpha",
             {"rule": "x >= 0"}, reach="zero", grad_rule="ge"),
        rule("grad-at-zero", "backward at x == 0 used slope 1 (dx = dy) instead of alpha "
             "(autodiff through where(x >= 0, x, a*x))", {"rule": "x >= 0", "form": "branch sum"},
             reach="zero", grad_rule="ge", grad_form="sum"),
        rule("grad-at-zero", "backward at x == 0 used slope 1 (dx = dy) instead of alpha "
             "(autodiff through where(x >= 0, x, a*x), the branch sum fused into one multiply-add: "
             "JAX on XLA:CPU)", {"rule": "x >= 0", "form": "fused branch sum"},
             reach="zero", grad_rule="ge", grad_form="fma"),
        rule("nan-gradient", "backward at x = NaN gave dy instead of alpha*dy", {"nan_grad": "dy"},
             reach="nan", nan_grad="dy"),
        rule("nan-gradient", "backward at x = NaN gave +0 instead of alpha*dy", {"nan_grad": "zero"},
             reach="nan", nan_grad="zero"),
        rule("nan-gradient", "backward at x = NaN gave dy*0 (a zero with dy's sign, Paddle) instead "
             "of alpha*dy", {"nan_grad": "dy*0"}, reach="nan", nan_grad="dy*0"),
        rule("nan-gradient", "backward at x = NaN gave NaN (x's NaN propagated) instead of alpha*dy",
             {"nan_grad": "nan"}, reach="nan", nan_grad="nan"),
    ]


def _computed_in(n: str, dtypes: tuple[str, str]) -> list[Rule]:
    """A kernel computing in the narrower ``n`` (a 16-bit type; float32 for a float64 tensor):
    in ``n`` itself (TensorFlow: slope rounded to ``n``), or, for a 16-bit ``n``, in float32
    opmath with the result rounded to ``n`` (torch), which differs from the output only when
    ``n`` is not the output dtype (Keras's mixed precision hands the gradient back in the
    input's dtype)."""
    rules = [rule("input-precision", f"computed in {n}: inputs, slope and product rounded to {n}",
                  {"input_dtype": n, "compute_dtype": n}, input_dtype=n, opmath=n)]
    if dtypes[1] != n and dtypes[0] != "float64":  # float64 operands are held in float64: no (float64, n) pair
        rules.append(rule("input-precision", f"computed in {n} with float32 opmath: inputs rounded to {n}, "
                          f"slope and product in float32, result rounded to {n} (torch under a mixed "
                          "precision policy)", {"input_dtype": n, "compute_dtype": n, "opmath": "float32"},
                          input_dtype=n, opmath="float32", result_dtype=n))
    return rules


def _select_autodiff_rules() -> list[Rule]:
    """Autodiff of a select with x > 0 (torch.where): only zero signs change.  Tried after the
    gradient rules, so that where x == 0 gives no evidence (alpha 1, or no zeros in the batch)
    it ties with JAX's x >= 0 branch sum and is reported as the equal alternative."""
    return [rule("formulation", "autodiff through where(x > 0, x, a*x) (torch.where, any autodiff of a "
                 "select): dx = where(x > 0, dy, 0) + a*where(x > 0, 0, dy), so a zero gradient comes out +0",
                 {"formula": "where(x > 0, dy, 0) + a*where(x > 0, 0, dy)"}, reach="zero", grad_form="sum")]


def _widened_rules(dtypes: tuple[str, str]) -> list[Rule]:
    """A 16-bit kernel whose result is widened: computed in the input dtype, then converted."""
    src, out = dtypes
    if info(src).bits != 16 or out != "float32":
        return []
    return [rule("input-precision", f"result rounded to {src} (the input dtype), then widened to {out}",
                 {"result_dtype": src}, result_dtype=src),
            rule("input-precision", f"computed in float32, rounded to {src} (the input dtype), then widened "
                 f"to {out}", {"result_dtype": src, "opmath": "float32"}, result_dtype=src, opmath="float32"),
            rule("input-precision", f"computed in {src} (the input dtype: slope, product and result), then "
                 f"widened to {out}", {"result_dtype": src, "slope_dtype": src}, result_dtype=src,
                 slope_dtype=src)]


def _input_rules(dtypes: tuple[str, str]) -> list[Rule]:
    if dtypes[0] not in ("float32", "float64"):  # a 16-bit kernel may compute in the other 16-bit type
        narrow: tuple[str, ...] = tuple(n for n in ("float16", "bfloat16") if n != dtypes[0])
        return _widened_rules(dtypes) + _narrowed_rules(narrow, dtypes)
    narrow = ("float16", "bfloat16") + (("float32",) if dtypes[0] == "float64" else ())
    rules = _narrowed_rules(narrow, dtypes)
    if dtypes[0] == "float64":
        rules.insert(len(narrow), rule("input-precision", "the product computed in float32 (slope and product "
                                       "rounded to float32, as C's float * float), the positive side kept",
                                       {"compute_dtype": "float32"}, opmath="float32"))
    return rules


def _narrowed_rules(narrow: tuple[str, ...], dtypes: tuple[str, str]) -> list[Rule]:
    """Inputs rounded to each of ``narrow``, then the whole computation in it."""
    narrowed = [rule("input-precision", f"inputs rounded to {n} before computing (precision lost)",
                     {"input_dtype": n}, input_dtype=n) for n in narrow]
    return narrowed + [r for n in narrow for r in _computed_in(n, dtypes)]


def _neutral_rules(dtypes: tuple[str, str]) -> list[Rule]:
    if info(dtypes[1]).bits != 16:
        return []
    return [rule(None, "computed in float32, then rounded", {}, complexity=1.0, opmath="float32")]


def catalogue(*, alpha: float, direction: str, dtypes: tuple[str, str],
              estimates: list[float]) -> list[Rule]:
    """Every rule worth trying on a batch: neutral context first (a tie with it is no
    evidence for a category), then the subnormal flushes alone (they change only the values
    below the normal range, so on a tie they are the narrower explanation: a batch of
    subnormals alone, such as one chunk of an exhaustive sweep, names the flush, not a
    narrower input type), then in the registry's order of categories, then the formulas
    and rounding modes of hand-written kernels (on a tie, with a few elements, the rule
    named first is the narrower one; the others are reported as equally good).

    The rules are built once per setting (keyed by the slopes' hex spelling, so -0.0 and
    0.0 stay apart): every mismatching row of a run asks for the same few catalogues."""
    head, tail = _fixed_rules(float(alpha).hex(), direction, dtypes)
    slopes = _cached_alpha_rules(float(alpha).hex(), dtypes, tuple(float(e).hex() for e in estimates))
    return [*head, *slopes, *tail]


@lru_cache(maxsize=256)
def _fixed_rules(alpha_hex: str, direction: str, dtypes: tuple[str, str]) -> tuple[tuple[Rule, ...], ...]:
    """The catalogue's rules before the slopes and after them (those the estimates do not change)."""
    alpha = float.fromhex(alpha_hex)
    head = _neutral_rules(dtypes) + _flush_rules() + _input_rules(dtypes)
    tail = (_relu_rule(alpha, direction) + _precision_rules(alpha, dtypes) + _formulation_rules(direction)
            + _flush_select_rules(direction) + _saturation_rules(dtypes))
    if direction == "backward":
        tail += _gradient_rules() + _select_autodiff_rules()
    return tuple(head), tuple(tail + _more_formulations(alpha, direction) + _rounding_rules(dtypes))


@lru_cache(maxsize=1024)
def _cached_alpha_rules(alpha_hex: str, dtypes: tuple[str, str], estimates: tuple[str, ...]) -> tuple[Rule, ...]:
    return tuple(_alpha_rules(float.fromhex(alpha_hex), dtypes, [float.fromhex(e) for e in estimates]))

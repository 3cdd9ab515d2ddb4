"""The Semantics record: validation, readable ids, combining, and the settings golden reads."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.dtypes import info
from conformance.reference import golden
from conformance.reference.semantics import EXACT, Semantics
from tests.helpers import bits_differ


@pytest.mark.parametrize("fields,message", [
    ({"formulation": "mask"}, r"Semantics.formulation must be one of .*'mask-multiply'.*; got 'mask'"),
    ({"grad_rule": "GE"}, r"Semantics.grad_rule must be one of 'gt', 'ge'.*; got 'GE'"),
    ({"saturate": "nan"}, r"Semantics.saturate must be one of False, True, 'inf'"),
    ({"daz": 1}, r"Semantics.daz must be True or False, got 1"),
    ({"opmath": "float8"}, r"Semantics.opmath must be a float dtype name such as 'float16'; got 'float8'"),
    ({"slope_dtype": ()}, r"Semantics.slope_dtype must name at least one dtype"),
    ({"slope": float("inf")}, r"Semantics.slope must be a finite number"),
    ({"slope": "0.1"}, r"Semantics.slope must be a finite number"),
])
def test_a_bad_setting_says_which_field_and_what_to_pass(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Semantics(**fields)


def test_dtypes_are_kept_by_their_names() -> None:
    s = Semantics(opmath=np.float32, slope_dtype=[np.dtype("float32"), "bfloat16"])
    assert s.opmath == "float32" and s.slope_dtype == ("float32", "bfloat16")
    assert s == Semantics(opmath="float32", slope_dtype=("float32", "bfloat16")) and hash(s) == hash(
        Semantics(opmath="float32", slope_dtype=("float32", "bfloat16")))


@pytest.mark.parametrize("semantics,text", [
    (EXACT, "exact"),
    (Semantics(daz=True, ftz=True, predicate="ge"), "daz, ftz, predicate=ge"),
    (Semantics(slope=0.01, slope_dtype=("float32", "float16")), "slope=0.01, slope_dtype=float32/float16"),
    (Semantics(formulation="mask-multiply", opmath="float32"), "opmath=float32, formulation=mask-multiply"),
])
def test_str_names_what_differs_from_exact(semantics: Semantics, text: str) -> None:
    assert str(semantics) == text


def test_combined_lays_the_second_record_over_the_first() -> None:
    a, b = Semantics(daz=True, slope_dtype="float16"), Semantics(slope_dtype="float32", grad_rule="ge")
    both = Semantics(daz=True, slope_dtype="float32", grad_rule="ge")
    assert a.combined(b) == both and hash(a.combined(b)) == hash(both)
    assert str(a.combined(b)) == str(both) and a.combined(b).settings() == both.settings()
    assert EXACT.combined(a) == a and a.combined(EXACT) == a
    assert list(a.settings()) == ["slope_dtype", "daz"]


def test_slope_replaces_the_alpha_asked_for() -> None:
    x = np.linspace(-3, 3, 101).astype(np.float16)
    assert not bits_differ(golden.forward(x, 0.2, semantics=Semantics(slope=0.01)), golden.forward(x, 0.01)).any()


def test_input_and_output_flags_act_around_the_computation() -> None:
    tiny, top = info("float32").smallest_subnormal, info("float32").max
    x = np.array([tiny, -tiny, np.nan, np.inf, -np.inf, -1.5e-38], np.float32)
    flushed = golden.forward(x, 0.5, semantics=Semantics(flush_inputs=True))
    assert flushed[:2].tolist() == [0.0, 0.0] and np.signbit(flushed[1])  # a selected subnormal is read as zero
    assert golden.forward(x, 0.5)[0] == tiny  # the exact select keeps it
    saturated = golden.forward(x, 0.5, semantics=Semantics(saturate_inputs=True))
    assert saturated[2:5].tolist() == [0.0, top, np.float32(-top * 0.5)]
    out = golden.forward(x, 0.5, semantics=Semantics(flush_output=True))
    assert out[5] == 0 and np.signbit(out[5]) and golden.forward(x, 0.5)[5] != 0


def test_compute_is_forward_and_backward() -> None:
    x = np.linspace(-2, 2, 9).astype(np.float32)
    dy = np.full(9, 3.0, np.float32)
    s = Semantics(grad_rule="ge", predicate="ge")
    assert not bits_differ(golden.compute("forward", x, 0.2, semantics=s), golden.forward(x, 0.2, semantics=s)).any()
    assert not bits_differ(golden.compute("backward", x, 0.2, dy=dy, semantics=s),
                           golden.backward(dy, x, 0.2, semantics=s)).any()
    with pytest.raises(ValueError, match="backward needs dy"):
        golden.compute("backward", x, 0.2)


def test_the_golden_takes_the_record_alone() -> None:
    """One record, one spelling of each setting: no keyword form, no second name for a field."""
    assert not {"leaky_relu", "leaky_relu_backward", "semantics_of"} & set(dir(golden))
    x = np.array([-1.0, np.inf], np.float16)
    y = golden.forward(x, 0.2, out_dtype="float32", semantics=Semantics(formulation="mask-multiply"))
    assert y[0] == np.float32(-0.2) and np.isnan(y[1])  # inf*(1-m) with m = 1 is inf*0
    with pytest.raises(TypeError):
        golden.forward(x, 0.2, formulation="mask-multiply")
    for legacy in ({"flush_subnormals": True}, {"alpha": 0.1}):
        with pytest.raises(TypeError):
            Semantics(**legacy)

"""Calling a backend through the guard: it gets the inputs and options it was asked for, what it
raises becomes a refusal naming the exception, a result of the wrong size or dtype is refused, and
a write into its copies of ``x`` or ``dy`` is an ``input-modified`` finding that fails its row
unless the backend's policy (for its profile) allows it."""
from __future__ import annotations

from typing import Optional

import numpy as np
import pytest

from conformance.dtypes import all_patterns
from conformance.guard import guarded_call, input_modified, shaped_like
from conformance.judge.evaluate import evaluate
from conformance.judge.gate import GateConfig
from conformance.records import BackendResult, Row
from conformance.reference import golden as ref

X = all_patterns("float16")[:64].copy()


class Recorder:
    """A backend that records what it was called with and answers the golden."""

    name = "recorder"

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def forward(self, x: np.ndarray, alpha: float, *, out_dtype: Optional[str] = None) -> BackendResult:
        self.calls.append(("forward", x, None, alpha, out_dtype))
        return BackendResult(ref.forward(x, alpha, out_dtype=out_dtype))

    def backward(self, dy: np.ndarray, x: np.ndarray, alpha: float, *,
                 out_dtype: Optional[str] = None) -> BackendResult:
        self.calls.append(("backward", x, dy, alpha, out_dtype))
        return BackendResult(ref.backward(dy, x, alpha, out_dtype=out_dtype))


class Raising(Recorder):
    def forward(self, x: np.ndarray, alpha: float, *, out_dtype: Optional[str] = None) -> BackendResult:
        raise RuntimeError("device lost")


def test_a_backward_call_hands_the_backend_dy_x_alpha_and_the_output_dtype() -> None:
    backend, dy = Recorder(), X[::-1].copy()
    result = guarded_call(backend, "backward", X, 0.25, dy=dy, out_dtype="float32")
    (direction, x, got_dy, alpha, out_dtype), = backend.calls
    assert (direction, alpha, out_dtype) == ("backward", 0.25, "float32")
    assert x is X and got_dy is dy and result.value.dtype == np.float32


def test_a_forward_call_hands_the_backend_its_output_dtype() -> None:
    backend = Recorder()
    guarded_call(backend, "forward", X, 0.1, out_dtype="float32")
    assert backend.calls[0][4] == "float32"


def test_what_a_backend_raises_is_a_refusal_naming_the_exception() -> None:
    result = guarded_call(Raising(), "forward", X, 0.1)
    assert result.value is None and "RuntimeError" in result.rejected and "device lost" in result.rejected


@pytest.mark.parametrize("value, ok", [
    (np.zeros(64, np.float16), True), (np.zeros(63, np.float16), False), (np.zeros(64, np.float32), False),
])
def test_a_result_of_the_wrong_size_or_dtype_is_refused(value: np.ndarray, ok: bool) -> None:
    result = shaped_like(BackendResult(value), numel=64, out_dtype="float16")
    assert (result.value is not None) == ok
    if not ok:
        assert "expected 64 elements of float16" in result.rejected


def _row(*, backend: str = "torch", profile: Optional[str] = None) -> Row:
    return evaluate(X, 0.1, BackendResult(ref.forward(X, 0.1)), direction="forward", backend=backend,
                    profile=profile, config=GateConfig())


def _written(a: np.ndarray, count: int) -> np.ndarray:
    b = a.copy()
    b[:count] = np.float16(7.0)
    return b


def test_untouched_copies_leave_the_row_as_it_was() -> None:
    row = _row()
    assert input_modified(row, kept=(X, None), handed=(X.copy(), None), config=GateConfig()) is row


def test_a_write_into_x_fails_the_row_and_counts_the_elements() -> None:
    row = input_modified(_row(), kept=(X, None), handed=(_written(X, 3), None), config=GateConfig())
    finding, = [f for f in row.findings if f.category == "input-modified"]
    assert row.verdict == "fail" and finding.gated and finding.count == 3
    assert finding.detail["changed"] == {"x": 3, "dy": 0}
    assert "3 of 64 elements of x" in finding.summary


def test_a_write_into_dy_is_counted_on_dy() -> None:
    dy = X[::-1].copy()
    row = input_modified(_row(), kept=(X, dy), handed=(X.copy(), _written(dy, 5)), config=GateConfig())
    finding, = [f for f in row.findings if f.category == "input-modified"]
    assert finding.detail["changed"] == {"x": 0, "dy": 5} and "5 of 64 elements of dy" in finding.summary


def test_writes_into_both_inputs_are_both_named_and_the_larger_is_the_count() -> None:
    dy = X[::-1].copy()
    row = input_modified(_row(), kept=(X, dy), handed=(_written(X, 3), _written(dy, 5)), config=GateConfig())
    finding = row.findings[-1]
    assert finding.count == 5 and finding.detail["changed"] == {"x": 3, "dy": 5}
    assert "(3 of 64 elements of x, 5 of 64 elements of dy)" in finding.summary


def test_a_copy_reshaped_or_retyped_counts_every_element() -> None:
    for handed in (X.copy().reshape(8, 8), X.astype(np.float32)):
        row = input_modified(_row(), kept=(X, None), handed=(handed, None), config=GateConfig())
        assert row.findings[-1].detail["changed"]["x"] == X.size


def test_the_policy_of_the_backend_or_its_profile_can_allow_input_modified() -> None:
    allowed = frozenset({"input-modified"})
    by_backend = GateConfig(policy={"torch": allowed})
    by_profile = GateConfig(policy={"keras": frozenset(), "keras[numpy]": allowed})
    handed = (_written(X, 1), None)
    assert input_modified(_row(), kept=(X, None), handed=handed, config=by_backend).verdict == "warn"
    assert input_modified(_row(backend="tensorflow"), kept=(X, None), handed=handed,
                          config=by_backend).verdict == "fail"
    assert input_modified(_row(backend="keras", profile="numpy"), kept=(X, None), handed=handed,
                          config=by_profile).verdict == "warn"
    assert input_modified(_row(backend="keras", profile="jax"), kept=(X, None), handed=handed,
                          config=by_profile).verdict == "fail"

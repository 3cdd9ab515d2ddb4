"""A comparison judges a result once when backends return the same bits on the same batch: the rows
are those judging each backend's result again would give, under each backend's own policy."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from conformance import judged_once
from conformance.adapters import from_numpy
from conformance.config import default_config
from conformance.judge.evaluate import evaluate
from conformance.records import BackendResult
from conformance.render.export import row_dict
from conformance.suite import Options, Selection, run_suite
from tests.helpers import CONFIG, keep_small_batches


def _slope_in_fp16(x: np.ndarray, alpha: float) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.where(x > 0, x, x * np.float16(alpha)).astype(x.dtype)


def _selection() -> Selection:
    """Two backends with the same defect (their results are judged once), and one exact."""
    first, second = (from_numpy(_slope_in_fp16, dtypes=["float16"], name=n) for n in ("slope", "twin"))
    names = ("golden", "slope", "twin")
    return Selection(backends=names, references=names, dtypes=("float16",), alphas=(0.1, 0.3),
                     directions=("forward",), objects=(("slope", first), ("twin", second)))


def _rows(selection: Selection, monkeypatch: pytest.MonkeyPatch, *, once: bool) -> list[dict]:
    with monkeypatch.context() as mp:
        if not once:
            mp.setattr(judged_once.JudgedBatches, "reuse", lambda *a, **k: None)
        result = run_suite(selection, Options(config=CONFIG, max_examples=10, results_dir=None))
    return [row_dict(r) for r in result.rows] + [vars(a) for a in result.agreement]


def test_rows_judged_once_are_those_judged_again(monkeypatch: pytest.MonkeyPatch) -> None:
    keep_small_batches(monkeypatch)
    calls: list[str] = []
    real = judged_once.regated
    monkeypatch.setattr(judged_once, "regated", lambda row, **kw: calls.append(kw["backend"]) or real(row, **kw))
    selection = _selection()
    once = _rows(selection, monkeypatch, once=True)
    assert calls and set(calls) == {"twin"}  # the twin's results were not judged again
    assert once == _rows(selection, monkeypatch, once=False)
    twin = [r for r in once if r.get("backend") == "twin" and "findings" in r]
    assert twin and all(f["category"] == "alpha-precision" for r in twin for f in r["findings"])


@pytest.mark.parametrize("allowed", [False, True])
def test_regated_row_is_the_other_backends_judgement(allowed: bool) -> None:
    """The row under another backend's policy (one that lets the finding through, or not): the same
    as evaluating its result."""
    x = np.linspace(-1000, 1000, 6001).astype(np.float16)
    result = BackendResult(_slope_in_fp16(x, 0.01), notes=("a note",))  # the slope of another alpha
    config = default_config()
    judged = evaluate(x, 0.1, BackendResult(result.value), direction="forward", backend="first", config=config)
    assert judged.findings and judged.verdict == "fail"
    if allowed:
        config = replace(config, policy={**config.policy, "other": frozenset(f.category for f in judged.findings)})
        judged = evaluate(x, 0.1, BackendResult(result.value), direction="forward", backend="first", config=config)
    again = evaluate(x, 0.1, result, direction="forward", backend="other", config=config)
    got = judged_once.regated(judged, backend="other", profile=None, variant=None, notes=result.notes, config=config)
    assert row_dict(got) == row_dict(again)
    assert (judged.verdict, got.verdict) == (("fail", "warn") if allowed else ("fail", "fail"))

"""The quantized rows of ``conformance run``: each framework's int8/uint8 LeakyReLU over all
256 codes of every setting of the fixed grid, judged by code distance and quantized triage.

The rows come with the float backends that bring them (``torch``; ``tensorflow`` brings
TFLite's two profiles; ``onnxruntime``) when the selection keeps its default dtypes and runs
forward; a framework that is not installed is skipped with the reason.  The settings, not
the selection's slopes, give each row its slope.
"""
from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

from conformance.cases.quantized import quant_grid
from conformance.frameworks.quantized_profiles import SUITE_PROFILES
from conformance.judge.gate import GateConfig
from conformance.judge.quantized import evaluate_codes
from conformance.records import Row, RowKey
from conformance.reference.quantized import QuantParams, all_codes, setting_text
from conformance.suite import Selection, SuiteResult

SUITE_SETTINGS = 9  # the grid's first 9: every slope of the grid, both that XNNPACK declines among them


@dataclass(frozen=True)
class QuantRowSpec(RowKey):
    """One quantized row to run: its key (the variant is the quantization setting, as the
    judged row names it) and the runner and parameters that compute it."""

    runner: str = ""  # the key of ``quantized_backends.RUNNERS``
    params: Optional[QuantParams] = None

    @classmethod
    def of(cls, backend: str, profile: str, *, runner: str, params: QuantParams, alpha: float) -> QuantRowSpec:
        return cls(backend, profile, setting_text(params), params.dtype, params.dtype, "forward", alpha,
                   runner=runner, params=params)


def wanted(*, dtypes: Optional[tuple[str, ...]], directions: tuple[str, ...]) -> bool:
    """Whether a run selection takes quantized rows: its default dtypes, forward among its directions."""
    return dtypes is None and "forward" in directions


def plan_quantized(backends: tuple[str, ...], *, settings: int = SUITE_SETTINGS) -> tuple[
        list[QuantRowSpec], list[str]]:
    """The rows the selected ``backends`` bring, and one line per profile skipped (with why)."""
    rows, skipped = [], []
    for (backend, profile), declared in SUITE_PROFILES.items():
        if declared.brought_by not in backends:
            continue
        if importlib.util.find_spec(declared.module) is None:
            skipped.append(f"{backend}[{profile}] quantized: {declared.module} is not installed")
            continue
        rows += [QuantRowSpec.of(backend, profile, runner=declared.runner, params=p, alpha=a)
                 for p, a in quant_grid(settings)]
    return rows, skipped


def run_quantized_row(spec: QuantRowSpec, *, config: GateConfig) -> Row:
    """Run one row's framework over all codes and judge it (with the parameters it reports)."""
    from conformance.frameworks.quantized_backends import RUNNERS

    used, out = RUNNERS[spec.runner][0](spec.alpha, spec.params)
    return evaluate_codes(all_codes(used), out, spec.alpha, params=used, backend=spec.backend,
                          profile=spec.profile, config=config, label="codes")


def for_selection(selection: Selection) -> tuple[list[QuantRowSpec], list[str]]:
    """The quantized rows a ``conformance run`` selection takes (none unless :func:`wanted`)."""
    if not wanted(dtypes=selection.dtypes, directions=selection.directions):
        return [], []
    return plan_quantized(selection.backends)


def extend(result: SuiteResult, specs: list[QuantRowSpec], *, config: GateConfig,
           on_row: Optional[Callable[[QuantRowSpec, Row], None]] = None) -> None:
    """Append the quantized rows to a finished suite result; Ctrl-C or SIGTERM stops them as it
    stops the float rows (an interrupted result gets none)."""
    if result.interrupted:
        return
    try:
        for spec in specs:
            result.rows.append(run_quantized_row(spec, config=config))
            if on_row is not None:
                on_row(spec, result.rows[-1])
    except KeyboardInterrupt as exc:
        result.interruption = exc

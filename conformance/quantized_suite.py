"""The quantized rows of ``conformance run``: each framework's int8/uint8 LeakyReLU over all
256 codes of every setting of the fixed grid, judged by code distance and quantized triage.

The rows come with the float backends that bring them (``torch``; ``tensorflow`` brings
TFLite's two profiles; ``onnxruntime``) when the selection keeps its default dtypes and runs
forward; a framework that is not installed is skipped with the reason.  The settings, not
the selection's slopes, give each row its slope.

Every name a report prints selects its rows: ``--backend tflite`` (a quantized backend no float
backend shares a name with), ``tflite[xnnpack]`` (one profile), ``tflite[xnnpack/S:Z:S:Z]`` (one
setting) and ``--dtype qint8`` / ``quint8`` (:class:`QuantAsk`).
"""
from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Optional

from conformance.cases.quantized import quant_grid
from conformance.extras import install_hint
from conformance.frameworks.quantized_profiles import SUITE_PROFILES
from conformance.judge.gate import GateConfig
from conformance.judge.quantized import evaluate_codes
from conformance.records import Row, RowKey, label_parts
from conformance.reference.quantized import QDTYPES, QuantParams, all_codes, setting_text
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


@dataclass(frozen=True)
class QuantAsk:
    """The quantized rows a selection names beyond what its float backends bring: ``labels``
    (``tflite``, ``tflite[xnnpack]``, ``tflite[xnnpack/SETTING]``) and ``dtypes`` (``qint8``,
    ``quint8``; None: both, when the selection names no float dtype either)."""

    labels: tuple[str, ...] = ()
    dtypes: Optional[tuple[str, ...]] = None


#: No quantized row named: those the selection's float backends bring.
BROUGHT = QuantAsk()


def names_quantized(label: str, *, float_backends: Sequence[str]) -> bool:
    """Whether ``label`` names quantized rows only: a quantized backend no float backend is called
    (``tflite``), or a backend with one of its quantized profiles (``torch[vector]``)."""
    base, profile, _ = label_parts(label)
    profiles = [p for b, p in SUITE_PROFILES if b == base]
    if profile is None:
        return bool(profiles) and base not in float_backends
    return profile in profiles


def _asked(names: Sequence[str], backend: str, profile: str, setting: str) -> bool:
    """Whether ``names`` (backends and labels) take the quantized row (backend, profile, setting)."""
    for name in names:
        base, p, s = label_parts(name)
        brought = p is None and SUITE_PROFILES[(backend, profile)].brought_by == base
        if brought or (base == backend and p in (None, profile) and s in (None, setting)):
            return True
    return False


def plan_quantized(backends: Sequence[str], *, settings: int = SUITE_SETTINGS,
                   dtypes: Optional[Sequence[str]] = None) -> tuple[list[QuantRowSpec], list[str]]:
    """The rows the selected ``backends`` (float backends that bring them, or quantized labels)
    take, of ``dtypes`` (None: both), and one line per profile skipped (with why)."""
    rows, skipped = [], []
    grid = [(p, a) for p, a in quant_grid(settings) if dtypes is None or p.dtype in dtypes]
    for (backend, profile), declared in SUITE_PROFILES.items():
        taken = [(p, a) for p, a in grid if _asked(backends, backend, profile, setting_text(p))]
        if not taken:
            continue
        if importlib.util.find_spec(declared.module) is None:
            skipped.append(f"{backend}[{profile}] quantized: {declared.module} is not installed; "
                           f"{install_hint(declared.module)}")
            continue
        rows += [QuantRowSpec.of(backend, profile, runner=declared.runner, params=p, alpha=a) for p, a in taken]
    return rows, skipped


def run_quantized_row(spec: QuantRowSpec, *, config: GateConfig) -> Row:
    """Run one row's framework over all codes and judge it (with the parameters it reports)."""
    from conformance.frameworks.quantized_backends import RUNNERS

    used, out = RUNNERS[spec.runner][0](spec.alpha, spec.params)
    return evaluate_codes(all_codes(used), out, spec.alpha, params=used, backend=spec.backend,
                          profile=spec.profile, config=config, label="codes")


def wanted(*, dtypes: Optional[tuple[str, ...]], directions: tuple[str, ...],
           ask: QuantAsk = BROUGHT) -> bool:
    """Whether a run selection takes quantized rows: forward among its directions, and its default
    dtypes or a quantized dtype asked for."""
    return "forward" in directions and (ask.dtypes is not None or dtypes is None)


def for_selection(selection: Selection, ask: QuantAsk = BROUGHT) -> tuple[list[QuantRowSpec], list[str]]:
    """The quantized rows a ``conformance run`` selection takes (none unless :func:`wanted`): those
    its float backends bring and those ``ask`` names."""
    if not wanted(dtypes=selection.dtypes, directions=selection.directions, ask=ask):
        return [], []
    return plan_quantized((*selection.backends, *ask.labels), dtypes=ask.dtypes)


def quantized_dtype(name: str) -> bool:
    """``qint8`` or ``quint8``: a dtype only quantized rows have."""
    return name in QDTYPES


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

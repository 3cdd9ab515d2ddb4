"""Which sweeps a selection of backends runs: one :class:`SweepSpec` per (backend, x class) for
every backend that supports the dtype pair and direction, with the gate's tolerance of the
output dtype; a backend that does not support them is skipped, with its reason."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Optional

from conformance.backends import skip_reason
from conformance.errors import UsageError
from conformance.judge.gate import GateConfig
from conformance.suite import Selection
from conformance.sweep.spec import SweepSpec


def sweep_specs(backends: Sequence[str], *, src: str, out: str, direction: str, alpha: Optional[float],
                x_classes: Sequence[Optional[str]], profile: Optional[str], variant: Optional[str],
                config: GateConfig, on_skip: Callable[[str], None]) -> list[SweepSpec]:
    """The sweeps of ``backends`` (validated names); ``on_skip`` hears one line per backend
    skipped, and a selection no backend supports is a UsageError."""
    selection = Selection(backends=tuple(backends), profile=profile, variant=variant)
    tol = config.tolerance(out)
    specs = []
    for name in backends:
        backend = selection.backend(name)
        if not backend.supports(src, out, direction):  # type: ignore[arg-type]
            why = skip_reason(backend, src, out, direction)  # type: ignore[arg-type]
            on_skip(f"skipped {name} {src}->{out} {direction}: {why}")
            continue
        specs += [SweepSpec(name, src, out, direction, alpha, getattr(backend, "profile", None),
                            getattr(backend, "variant", None), x,
                            (tol.rtol, tol.atol, tol.max_ulp, tol.strict_zeros)) for x in x_classes]
    if not specs:
        raise UsageError(f"no selected backend supports {src}->{out} {direction}; pick another --backend or --dtype")
    return specs

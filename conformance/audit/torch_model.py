"""A torch model: ``package.module:factory`` (or ``file.py:factory``) building an ``nn.Module``,
or a ``torch.export`` program file (``.pt2``).

The factory is imported and called (that is the target's own code); the model
is never run.  ``torch.fx`` tracing gives the activations in call order,
functional calls included; when tracing fails the modules are listed in
definition order (``named_modules``) and a note says so.  Each activation names the
file:line where it was written and is an implicit default exactly when the audit of that
source says so (:mod:`conformance.audit.torch_sites`).
"""
from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

from conformance.audit.record import (
    DEFAULT,
    INITIAL,
    PASSED,
    STORED,
    TRAINED,
    Activation,
    default_of,
    dynamic,
    from_default,
    same_slope,
    with_value,
)
from conformance.audit.source import PRELU, PRELU_CALL, RRELU, RRELU_CALL
from conformance.audit.torch_sites import Shown, Site, call_site, constructions, shown_as, written_at
from conformance.errors import UsageError
from conformance.ops import RRELU_LOWER, RRELU_UPPER

MODULE, FUNCTION = "torch.nn.LeakyReLU", "torch.nn.functional.leaky_relu"


def _shown(target: str) -> Shown:
    """Paths as the audit shows them: a ``file.py:factory`` target's file as it was written."""
    module = target.rpartition(":")[0]
    return shown_as({str(Path(module).resolve()): module} if module.endswith(".py") else {})


def build(target: str, *, shown: Shown) -> tuple[Any, dict[int, Site]]:
    """The ``nn.Module`` that ``module:factory`` builds, and where each of its LeakyReLU modules
    was constructed (by ``id``)."""
    import torch

    from conformance.backends import load
    from conformance.errors import BackendUnavailable

    try:
        factory = load(target)
    except BackendUnavailable as exc:
        raise UsageError(str(exc).replace("backend ", "audit ", 1)) from None
    try:
        with constructions(shown=shown) as sites:
            model = factory() if callable(factory) and not isinstance(factory, torch.nn.Module) else factory
    except Exception as exc:  # noqa: BLE001  the factory is the user's code
        first = (str(exc).strip().splitlines() or [""])[0][:120]
        raise UsageError(f"{target}: the factory failed ({type(exc).__name__}: {first}); "
                         "pass a factory that builds the model without arguments") from None
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"{target} built a {type(model).__name__}, not a torch.nn.Module; "
                         "pass a factory that returns the model")
    return model, sites


def _module(name: str, module: Any, *, site: Optional[Site]) -> Activation:
    """A LeakyReLU module: an implicit default when its construction passed no slope and it still
    has the default; named by its construction's file:line and its module path."""
    value, path = module.negative_slope, name or "(root)"
    if site is None:  # built before the factory ran (a module-level instance)
        return with_value(value, where=path, api=MODULE, origin=STORED)
    where = f"{site.where} {path}"
    if not site.passed and same_slope(value, default_of(MODULE).declared):
        return from_default(where=where, api=MODULE)
    return with_value(value, where=where, api=MODULE, origin=PASSED if site.passed else STORED)


def _prelu(name: str, module: Any, *, site: Optional[Site]) -> Activation:
    """A PReLU module: its weight against the value it was initialised with (``init``): every element
    still equal to it (``initial value``; an implicit default when the construction passed no ``init``),
    or not (``trained``)."""
    import torch

    weight = module.weight.detach()
    initial = bool((weight == torch.full_like(weight, module.init)).all())
    values = tuple(float(v) for v in weight.float().reshape(-1).tolist())
    origin = STORED if not initial or site is None else PASSED if site.passed else DEFAULT
    path = name or "(root)"
    found = Activation(path if site is None else f"{site.where} {path}", "torch", PRELU, origin,
                       values[0] if len(set(values)) == 1 else None, str(weight.dtype).removeprefix("torch."))
    return replace(found, weight=values, provenance=INITIAL if initial else TRAINED,
                   arguments=(f"num_parameters={module.num_parameters}", f"init={module.init!r}"))


def _rrelu(name: str, module: Any, *, site: Optional[Site]) -> Activation:
    """An RReLU module: its bounds and eval slope (lower + upper) / 2; an implicit default when the
    construction passed no bound."""
    bounds, path = (float(module.lower), float(module.upper)), name or "(root)"
    if site is not None and not site.passed:
        return replace(from_default(where=f"{site.where} {path}", api=RRELU), bounds=bounds)
    where, origin = (path, STORED) if site is None else (f"{site.where} {path}", PASSED)
    return replace(with_value(sum(bounds) / 2, where=where, api=RRELU, origin=origin), bounds=bounds)


def listed(name: str, module: Any, *, sites: dict[int, Site]) -> Optional[Activation]:
    """The activation a module is (a LeakyReLU, PReLU or RReLU), None for any other module."""
    import torch

    readers = ((torch.nn.LeakyReLU, _module), (torch.nn.PReLU, _prelu), (torch.nn.RReLU, _rrelu))
    read = next((r for cls, r in readers if isinstance(module, cls)), None)
    return None if read is None else read(name, module, site=sites.get(id(module)))


def _call_written(node: Any, *, api: str, shown: Shown) -> tuple[str, Optional[Activation]]:
    """Where a functional call of the trace was written (the file:line of its caller), and what the
    source audit reads of ``api`` there."""
    site = call_site(node.stack_trace, shown=shown)
    written = written_at(site, api=api) if site is not None else None
    return (written.where if written else site.where if site else f"{node.name} (fx call_function)"), written


def _traced_call(node: Any, *, model: Any, shown: Shown) -> Activation:
    """A functional call of the trace; an implicit default when the call written there passes no slope."""
    import torch

    if node.target in (torch.prelu, torch.nn.functional.prelu):
        return _traced_prelu(node, model=model, where=_call_written(node, api=PRELU_CALL, shown=shown)[0])
    api = RRELU_CALL if node.target in _functions()[RRELU_CALL] else FUNCTION
    where, written = _call_written(node, api=api, shown=shown)
    if api == RRELU_CALL:
        return _traced_rrelu(node, where=where, implicit=written is not None and written.implicit)
    if written is not None and written.implicit:
        return from_default(where=where, api=FUNCTION)
    return _call(node, where=where)


def _traced_prelu(node: Any, *, model: Any, where: str) -> Activation:
    """``F.prelu(x, weight)``: the weight's values when it is an attribute of the model, else dynamic."""
    weight = node.kwargs.get("weight", node.args[1] if len(node.args) > 1 else None)
    if getattr(weight, "op", None) != "get_attr":
        return dynamic(str(weight), where=where, api=PRELU_CALL)
    tensor = functools.reduce(getattr, weight.target.split("."), model).detach()
    values = tuple(float(v) for v in tensor.float().reshape(-1).tolist())
    return replace(Activation(where, "torch", PRELU_CALL, STORED, values[0] if len(set(values)) == 1 else None,
                              str(tensor.dtype).removeprefix("torch.")), weight=values)


def _traced_rrelu(node: Any, *, where: str, implicit: bool) -> Activation:
    """``F.rrelu(x, lower, upper, training)`` with the arguments the trace holds (fx fills in the defaults)."""
    given = dict(zip(("lower", "upper", "training"), node.args[1:]), **node.kwargs)
    bounds = (float(given.get("lower", RRELU_LOWER)), float(given.get("upper", RRELU_UPPER)))
    found = from_default(where=where, api=RRELU_CALL) if implicit else \
        with_value(sum(bounds) / 2, where=where, api=RRELU_CALL)
    return replace(found, bounds=bounds, arguments=("training=True",) if given.get("training") else ())


def _functions() -> dict[str, set]:
    """The functions of a trace the audit lists, by the API they are."""
    import torch

    return {FUNCTION: {torch.nn.functional.leaky_relu, torch.nn.functional.leaky_relu_, torch._C._nn.leaky_relu,
                       torch._C._nn.leaky_relu_},
            PRELU_CALL: {torch.prelu, torch.nn.functional.prelu},
            RRELU_CALL: {torch.nn.functional.rrelu, torch.nn.functional.rrelu_, torch.rrelu, torch.rrelu_}}


def _call(node: Any, *, where: str, dtype: Optional[str] = None) -> Activation:
    """A functional call node: its slope argument (position 1 or ``negative_slope``) or the default."""
    value = node.kwargs.get("negative_slope", node.args[1] if len(node.args) > 1 else None)
    if value is None:
        return from_default(where=where, api=FUNCTION, dtype=dtype)
    if not isinstance(value, (int, float)):
        return dynamic(str(value), where=where, api=FUNCTION)
    return with_value(value, where=where, api=FUNCTION, dtype=dtype)


def traced(model: Any, *, sites: dict[int, Site], shown: Shown) -> list[Activation]:
    """The activations in call order, from a ``torch.fx`` trace (raises when it cannot trace)."""
    import torch

    tracer = torch.fx.Tracer()
    tracer.record_stack_traces = True  # each node's caller: the file:line of a functional call
    graph = tracer.trace(model)
    modules, functions, found = dict(model.named_modules()), set().union(*_functions().values()), []
    for node in graph.nodes:
        module = modules.get(node.target) if node.op == "call_module" else None
        activation = listed(node.target, module, sites=sites) if module is not None else None
        if activation is not None:
            found.append(activation)
        elif node.op == "call_function" and node.target in functions:
            found.append(_traced_call(node, model=model, shown=shown))
    return found


def audit_factory(target: str) -> tuple[list[Activation], tuple[str, ...]]:
    """Every LeakyReLU, PReLU and RReLU of the model ``target`` builds, and notes on how they were found."""
    shown = _shown(target)
    model, sites = build(target, shown=shown)
    try:
        return traced(model, sites=sites, shown=shown), ("torch.fx trace: call order, functional calls included",)
    except Exception as exc:  # noqa: BLE001  fx fails on data-dependent control flow, among others
        found = [a for name, m in model.named_modules() if (a := listed(name, m, sites=sites)) is not None]
        why = (str(exc).strip().splitlines() or [""])[0][:100]
        return found, (f"torch.fx could not trace ({type(exc).__name__}: {why}): modules only, "
                       "in definition order; functional calls are not seen",)


def audit_exported(path: Path) -> list[Activation]:
    """Every aten leaky_relu of a ``torch.export`` program file, with its input dtype."""
    import torch

    try:
        program = torch.export.load(str(path))
    except Exception as exc:  # noqa: BLE001
        raise UsageError(f"{path}: not a readable torch.export program ({type(exc).__name__}); "
                         "save one with torch.export.save(torch.export.export(model, args), 'model.pt2')") from None
    ops = {torch.ops.aten.leaky_relu.default, torch.ops.aten.leaky_relu_.default}
    found = []
    for node in program.graph.nodes:
        if node.op == "call_function" and node.target in ops:
            value = node.args[0].meta.get("val") if node.args and hasattr(node.args[0], "meta") else None
            dtype = str(value.dtype).removeprefix("torch.") if value is not None else None
            stack = list((node.meta.get("nn_module_stack") or {}).values())
            where = f"{node.name} ({stack[-1][0]})" if stack and stack[-1][0] else node.name
            found.append(_call(node, where=where, dtype=dtype))
    return found

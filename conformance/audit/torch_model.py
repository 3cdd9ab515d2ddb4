"""A torch model: ``package.module:factory`` (or ``file.py:factory``) building an ``nn.Module``,
or a ``torch.export`` program file (``.pt2``).

The factory is imported and called (that is the target's own code); the model
is never run.  ``torch.fx.symbolic_trace`` gives the activations in call order,
functional calls included; when tracing fails the modules are listed in
definition order (``named_modules``) and a note says so.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from conformance.audit.record import STORED, Activation, dynamic, from_default, with_value
from conformance.errors import UsageError

MODULE, FUNCTION = "torch.nn.LeakyReLU", "torch.nn.functional.leaky_relu"


def build(target: str) -> Any:
    """The ``nn.Module`` that ``module:factory`` builds."""
    import torch

    from conformance.backends import load
    from conformance.errors import BackendUnavailable

    try:
        factory = load(target)
    except BackendUnavailable as exc:
        raise UsageError(str(exc).replace("backend ", "audit ", 1)) from None
    try:
        model = factory() if callable(factory) and not isinstance(factory, torch.nn.Module) else factory
    except Exception as exc:  # noqa: BLE001  the factory is the user's code
        first = (str(exc).strip().splitlines() or [""])[0][:120]
        raise UsageError(f"{target}: the factory failed ({type(exc).__name__}: {first}); "
                         "pass a factory that builds the model without arguments") from None
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"{target} built a {type(model).__name__}, not a torch.nn.Module; "
                         "pass a factory that returns the model")
    return model


def _module(name: str, module: Any) -> Activation:
    return with_value(module.negative_slope, where=name or "(root)", api=MODULE, origin=STORED)


def _functions() -> set:
    import torch

    return {torch.nn.functional.leaky_relu, torch.nn.functional.leaky_relu_, torch._C._nn.leaky_relu,
            torch._C._nn.leaky_relu_}


def _call(node: Any, *, where: str, dtype: Optional[str] = None) -> Activation:
    """A functional call node: its slope argument (position 1 or ``negative_slope``) or the default."""
    value = node.kwargs.get("negative_slope", node.args[1] if len(node.args) > 1 else None)
    if value is None:
        return from_default(where=where, api=FUNCTION, dtype=dtype)
    if not isinstance(value, (int, float)):
        return dynamic(str(value), where=where, api=FUNCTION)
    return with_value(value, where=where, api=FUNCTION, dtype=dtype)


def traced(model: Any) -> list[Activation]:
    """The activations in call order, from ``torch.fx.symbolic_trace`` (raises when it cannot trace)."""
    import torch

    graph = torch.fx.symbolic_trace(model).graph
    modules, functions, found = dict(model.named_modules()), _functions(), []
    for node in graph.nodes:
        if node.op == "call_module" and isinstance(modules.get(node.target), torch.nn.LeakyReLU):
            found.append(_module(node.target, modules[node.target]))
        elif node.op == "call_function" and node.target in functions:
            found.append(_call(node, where=f"{node.name} (fx call_function)"))
    return found


def audit_factory(target: str) -> tuple[list[Activation], tuple[str, ...]]:
    """Every LeakyReLU of the model ``target`` builds, and notes on how they were found."""
    import torch

    model = build(target)
    try:
        return traced(model), ("torch.fx trace: call order, functional calls included",)
    except Exception as exc:  # noqa: BLE001  fx fails on data-dependent control flow, among others
        found = [_module(name, m) for name, m in model.named_modules() if isinstance(m, torch.nn.LeakyReLU)]
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

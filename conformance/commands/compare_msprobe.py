"""`conformance compare --msprobe DUMP_DIR`: one row per LeakyReLU call of an msprobe dump.

Each call is judged like a ``compare`` dump (backend ``dump``); its row's
``variant`` is msprobe's API name (``Functional.leaky_relu.1.backward``) and its
``notes`` say when the call passed no slope and the framework default was used, and where
the call was made (its source line and module, from the dump's ``stack.json`` and
``construct.json``; see ``ingest.msprobe_stack``).
"""
from __future__ import annotations

from contextlib import ExitStack
from dataclasses import replace
from typing import Optional

from conformance.errors import UsageError
from conformance.ingest.dumps import check_elements, check_pair, chunks, kernel_plan_fn, progress
from conformance.ingest.msprobe import REDUMP, Call, read_calls
from conformance.judge.chunked import evaluate_chunks
from conformance.judge.evaluate import PlanFn
from conformance.judge.gate import GateConfig
from conformance.records import Row


def _check(call: Call) -> None:
    where = f"{call.name} ({call.out_file})"
    check_elements(call.x.shape, what=f"{call.name} x", fix=REDUMP + " of a call with data")
    check_pair(call.x, call.out, flag=where, src_flag=f"{call.name} x")
    if call.dy is not None and (call.dy.shape != call.x.shape or call.dy.dtype != call.x.dtype):
        raise UsageError(f"{call.name}: dy is {call.dy.dtype}{list(call.dy.shape)} but x is "
                         f"{call.x.dtype}{list(call.x.shape)}; the dump's forward and backward do not belong together")


def evaluate_call(call: Call, *, config: GateConfig, profile: Optional[str] = None,
                  cores: Optional[int] = None, quiet: bool = False) -> Row:
    """The row of one call: golden of the call's x (and dy) at its slope against its output;
    ``profile``/``cores`` give triage the reference kernel's tiling plan (``tail-block``);
    ``quiet``: no progress bar (``-q``)."""
    _check(call)
    plan_fn: Optional[PlanFn] = None
    if profile is not None or cores is not None:
        plan_fn = kernel_plan_fn(profile, cores, dtypes=(call.x.dtype.name, call.out.dtype.name),
                                direction=call.direction)
    with ExitStack() as stack:
        row = evaluate_chunks(lambda: chunks(call.x, call.out, dy=call.dy), numel=call.x.size,
                              dtype=call.x.dtype, alpha=call.alpha, direction=call.direction,
                              out_dtype=call.out.dtype.name, backend="dump", config=config,
                              profile=profile, label=call.out_file, shape=call.x.shape, plan_fn=plan_fn,
                              advance=progress(stack, call.name, total=call.x.size, quiet=quiet))
    return replace(row, variant=call.name, notes=(*(() if call.note is None else (call.note,)), *call.where))


def rows(dump_dir: str, *, config: GateConfig, profile: Optional[str] = None,
         cores: Optional[int] = None, quiet: bool = False) -> list[Row]:
    """One row per LeakyReLU call of the msprobe dump at ``dump_dir``."""
    return [evaluate_call(call, config=config, profile=profile, cores=cores, quiet=quiet)
            for call in read_calls(dump_dir)]

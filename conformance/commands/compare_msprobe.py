"""`conformance compare --msprobe DUMP_DIR`: one row per LeakyReLU call of an msprobe dump;
with ``--reference-msprobe BENCHMARK_DIR``, msprobe's two-dump workflow.

Each call is judged like a ``compare`` dump (backend ``dump``); its row's
``variant`` is msprobe's API name (``Functional.leaky_relu.1.backward``) and its
``notes`` say when the call passed no slope and the framework default was used, and where
the call was made (its source line and module, from the dump's ``stack.json`` and
``construct.json``; see ``ingest.msprobe_stack``).

With a benchmark dump, the calls of both are matched (``ingest.msprobe_pairs``), each side
is judged against the golden, and each pair is compared (``judge.call_pairs``); the rows
are the device's, the agreements the pairs compared bit for bit, and ``--csv`` writes one
line per pair with msprobe's columns (``render.csv_report``).
"""
from __future__ import annotations

import argparse
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Optional

from rich.console import Console

from conformance.commands.args import parse_int
from conformance.errors import UsageError
from conformance.ingest.dumps import check_elements, check_pair, chunks, kernel_plan_fn, progress
from conformance.ingest.msprobe import REDUMP, Call, read_calls
from conformance.ingest.msprobe_pairs import match, paired
from conformance.judge.agreement import Agreement
from conformance.judge.call_pairs import CallPair
from conformance.judge.chunked import evaluate_chunks
from conformance.judge.evaluate import PlanFn
from conformance.judge.gate import GateConfig
from conformance.records import Row
from conformance.render.call_pairs import render_pairs
from conformance.render.csv_report import write_pairs_csv

BENCHMARK_FLAG = "--reference-msprobe"


def configure(sources: argparse._ArgumentGroup) -> None:
    """``--reference-msprobe``, the benchmark of msprobe's two-dump workflow, among the sources."""
    sources.add_argument(BENCHMARK_FLAG, metavar="BENCHMARK_DIR",
                        help="msprobe's two-dump workflow: the benchmark run's tensor dump (the same model on "
                             "GPU/CPU); with --msprobe DEVICE_DIR, each LeakyReLU call of the two is matched: "
                             "same bits or not, how many differ, and why")


def add_csv_option(parser: argparse.ArgumentParser) -> None:
    """``--csv``: the two-dump workflow's table as a file, beside the other reports."""
    parser.add_argument("--csv", metavar="PATH",
                        help="with --reference-msprobe: one row per call and direction, msprobe's columns "
                             "(Cosine ... Five Thousandths Err Ratio) beside this tool's")


def check_flags(args: argparse.Namespace) -> None:
    """The benchmark dump goes with a device dump, and the CSV with both."""
    if args.reference_msprobe is not None and args.msprobe is None:
        raise UsageError(f"{BENCHMARK_FLAG} {args.reference_msprobe} needs --msprobe DEVICE_DIR "
                         "(the device run's dump it is compared with)")
    if args.csv is not None and args.reference_msprobe is None:
        raise UsageError("--csv writes msprobe's two-dump table; pass --msprobe DEVICE_DIR "
                         f"{BENCHMARK_FLAG} BENCHMARK_DIR")


def _check(call: Call) -> None:
    where = f"{call.name} ({call.out_file})"
    check_elements(call.x.shape, what=f"{call.name} x", fix=REDUMP + " of a call with data")
    check_pair(call.x, call.out, flag=where, src_flag=f"{call.name} x")
    if call.dy is not None and (call.dy.shape != call.x.shape or call.dy.dtype != call.x.dtype):
        raise UsageError(f"{call.name}: dy is {call.dy.dtype}{list(call.dy.shape)} but x is "
                         f"{call.x.dtype}{list(call.x.shape)}; the dump's forward and backward do not belong together")


def evaluate_call(call: Call, *, config: GateConfig, profile: Optional[str] = None,
                  cores: Optional[int] = None, quiet: bool = False, plots: bool = True) -> Row:
    """The row of one call: golden of the call's x (and dy) at its slope against its output;
    ``profile``/``cores`` give triage the reference kernel's tiling plan (``tail-block``);
    ``quiet``: no progress bar (``-q``); ``plots``: keep what the HTML report draws."""
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
                              advance=progress(stack, call.name, total=call.x.size, quiet=quiet), plots=plots)
    return replace(row, variant=call.name, notes=(*(() if call.note is None else (call.note,)), *call.where))


def rows(dump_dir: str, *, config: GateConfig, profile: Optional[str] = None,
         cores: Optional[int] = None, quiet: bool = False, plots: bool = True) -> list[Row]:
    """One row per LeakyReLU call of the msprobe dump at ``dump_dir``."""
    return [evaluate_call(call, config=config, profile=profile, cores=cores, quiet=quiet, plots=plots)
            for call in read_calls(dump_dir)]


class PairRun:
    """msprobe's two-dump workflow, pair by pair: the pairs finished so far stay readable, so
    that an interrupted run reports them (``--csv`` here, the JSON from :attr:`rows`)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.pairs: list[CallPair] = []

    @property
    def rows(self) -> list[Row]:
        """The device's rows, judged against the golden: the verdict is theirs."""
        return [p.device for p in self.pairs if p.device is not None]

    @property
    def agreements(self) -> list[Agreement]:
        """The pairs compared bit for bit."""
        return [p.agreement for p in self.pairs if p.agreement is not None]

    def _row(self, call: Optional[Call], *, config: GateConfig) -> Optional[Row]:
        if call is None:
            return None
        return evaluate_call(call, config=config, profile=self.args.profile, cores=self.cores,
                             quiet=self.args.quiet)

    @property
    def cores(self) -> Optional[int]:
        return None if self.args.cores is None else parse_int(self.args.cores, flag="--cores", minimum=1)

    def run(self, config: GateConfig) -> list[Row]:
        """Match the two dumps' calls, judge and compare each pair; the device's rows."""
        found = match(read_calls(self.args.msprobe), read_calls(self.args.reference_msprobe, flag=BENCHMARK_FLAG))
        try:
            for m in found:
                self.pairs.append(paired(m, device_row=self._row(m.device, config=config),
                                         benchmark_row=self._row(m.benchmark, config=config)))
        except UsageError:
            raise
        except (KeyboardInterrupt, Exception):  # the pairs done so far are written, marked unfinished
            self.write_csv(complete=False)
            raise
        return self.rows

    def write_csv(self, *, complete: bool = True) -> None:
        if self.args.csv is not None:
            write_pairs_csv(self.pairs, self.args.csv, complete=complete)

    def render(self, *, console: Console) -> None:
        render_pairs(self.pairs, console=console, device=_dump_name(self.args.msprobe),
                     benchmark=_dump_name(self.args.reference_msprobe))


def _dump_name(path: str) -> str:
    return Path(path).resolve().name or path

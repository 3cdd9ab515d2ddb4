"""The suite's selection and options from parsed arguments: which rows (backends, workers, dtypes,
slopes, directions, kernel) and how (gate, seed, examples, jobs), as ``run``, ``agree`` and
``export-cases`` take them."""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Optional

from conformance.backends import WorkerSpec, default_backends, installed_defaults
from conformance.backends import names as backend_names
from conformance.commands.args import (
    DTYPE_HELP,
    add_kernel_options,
    config_from,
    items,
    parse_alpha,
    parse_dtype,
    parse_int,
    parse_seconds,
)
from conformance.commands.names import check_profile, choice, profiled
from conformance.errors import UsageError
from conformance.ops import OPS
from conformance.prelu_suite import OP_ALPHA
from conformance.quantized_suite import QuantAsk, names_quantized, quantized_dtype
from conformance.suite import DIRECTIONS, SUITE_ALPHAS, Options, Selection

MAX_EXAMPLES = 10_000  # hypothesis examples per dtype pair; more only slows the run
MAX_JOBS = 256


def add_selection_options(parser: argparse.ArgumentParser, *, reference: bool = False,
                          backend_help: str = "") -> None:
    """What to run (backends, dtypes, slopes, directions, kernel, workers, seed), as ``run`` and
    ``agree`` take it; ``reference``: also ``--reference``."""
    add = parser.add_argument
    add("--backend", action="append", metavar="NAME",
        help=f"one of {', '.join(backend_names())}, or your own as module:NAME or file.py:NAME, NAME a "
             "factory, a backend object or a kernel fn(x, alpha) "
             f"(repeat or comma-separate; default: {backend_help or ', '.join(default_backends())}, "
             "those installed here)")
    add("--dtype", action="append", metavar="D", help=f"{DTYPE_HELP}; repeat or comma-separate")
    add("--alpha", action="append", metavar="A", help="slope(s), e.g. 0.2 or 1/3 (default: the suite's 8)")
    add("--direction", action="append", metavar="DIR", help="forward or backward (default: both)")
    add("--op", action="append", metavar="OP",
        help=f"operator(s): {', '.join(OPS)} (repeat or comma-separate; default: every one; a PReLU row's "
             "alpha is 0.25, an RReLU row's 11/48, so an --alpha leaving those out leaves their rows out)")
    if reference:
        add("--reference", action="append", metavar="NAME",
            help="also compare every other backend's rows bit for bit with this backend's output on the "
                 "same inputs (a --backend name, added to the run if not selected; comma-separate "
                 "several: each is compared with the ones before it)")
    add_kernel_options(parser)
    add("--worker", action="append", metavar="CMD",
        help="run the backend a worker serves through it, e.g. \"ssh npu-host /opt/venv/bin/conformance "
             "worker --backend torch_npu\" (repeatable; without --backend only worker backends run)")
    add("--worker-timeout", default="600", metavar="S",
        help="seconds a worker may take per call before its row gets an error finding (default 600)")
    add("--seed", default="0", help="seed for random inputs and hypothesis examples (default 0)")
    add("--max-examples", default="100", help="hypothesis examples per dtype and direction (default 100)")


def selection_from(args: argparse.Namespace, *, references: Sequence[str] = ()) -> Selection:
    """The float suite's selection the flags ask for (as ``agree`` and ``export-cases`` take it);
    a UsageError when they name quantized rows, which only ``run`` runs."""
    selection, ask = run_selection_from(args, references=references)
    named = [*ask.labels, *(ask.dtypes or ())]
    if named:
        raise UsageError(f"{named[0]}: quantized rows run in `conformance run` only")
    return selection


def run_selection_from(args: argparse.Namespace, *,
                       references: Sequence[str] = ()) -> tuple[Selection, QuantAsk]:
    """The suite selection the flags ask for, validated (UsageError on anything unknown), and the
    quantized rows they name (``--backend tflite``, ``tflite[xnnpack]``, ``--dtype qint8``);
    ``references`` (validated backend names) run first and every other row is compared with them."""
    chosen = items(args.backend, flag="--backend")
    quantized = tuple(n for n in chosen or () if names_quantized(n, float_backends=backend_names()))
    floats, profile, variant = profiled([n for n in chosen or () if n not in quantized],
                                        profile=args.profile, variant=args.variant)
    directions = items(args.direction, flag="--direction") or DIRECTIONS
    for d in directions:
        choice(d, DIRECTIONS, flag="--direction")
    dtypes, quant_dtypes, alphas = dtypes_from(args), quant_dtypes_from(args), items(args.alpha, flag="--alpha")
    alphas = SUITE_ALPHAS if alphas is None else tuple(dict.fromkeys(map(parse_alpha, alphas)))
    ops = ops_from(args, alphas=alphas)
    timeout = parse_seconds(args.worker_timeout, flag="--worker-timeout")
    workers = workers_from(args, timeout=timeout)  # last: starting a worker is the slow part
    served = tuple(name for name, _ in workers)
    defaults = () if chosen or workers or dtypes == () else runnable_defaults()
    backends = tuple(dict.fromkeys((*references, *(floats or defaults), *served)))
    ask = QuantAsk(quantized, quant_dtypes)
    if dtypes == ():  # quantized dtypes only: the float backends bring their quantized rows, no float row
        bringing = backends if chosen or workers else default_backends()  # a missing one says so, with its extra
        backends, ask = (), QuantAsk((*quantized, *bringing), quant_dtypes)
    profile, variant = check_profile(argparse.Namespace(profile=profile, variant=variant),
                                     [b for b in backends if b not in served])
    return Selection(backends=backends, workers=workers, worker_timeout=timeout,
                     dtypes=dtypes, alphas=alphas, directions=tuple(directions),  # type: ignore[arg-type]
                     profile=profile, variant=variant, references=tuple(references), ops=ops), ask


def slope_text(alpha: float) -> str:
    """``alpha`` as a user would type it: its short decimal, else a fraction (11/48)."""
    return repr(alpha) if len(repr(alpha)) <= 8 else str(Fraction(alpha).limit_denominator(1000))


def ops_from(args: argparse.Namespace, *, alphas: tuple[float, ...]) -> Optional[tuple[str, ...]]:
    """The operators --op names (None without it: every op the slopes select); a UsageError for an
    unknown one, or a PReLU/RReLU op whose one row alpha the --alpha slopes leave out."""
    named = items(getattr(args, "op", None), flag="--op")
    for op in named or ():
        choice(op, tuple(OPS), flag="--op")
        if op in OP_ALPHA and alphas != SUITE_ALPHAS and OP_ALPHA[op] not in alphas:
            typed = slope_text(OP_ALPHA[op])
            raise UsageError(f"--op {op}: its rows run at alpha {typed}, which --alpha leaves out; "
                             f"drop --alpha or add {typed}")
    return named


def dtypes_from(args: argparse.Namespace) -> Optional[tuple[str, ...]]:
    """The float dtypes --dtype names: None without --dtype, () when it names quantized ones only."""
    named = items(args.dtype, flag="--dtype")
    if named is None:
        return None
    return tuple(dict.fromkeys(parse_dtype(d) for d in named if not quantized_dtype(d)))


def quant_dtypes_from(args: argparse.Namespace) -> Optional[tuple[str, ...]]:
    """The quantized dtypes --dtype names (``qint8``, ``quint8``), None when it names none."""
    named = [d for d in items(args.dtype, flag="--dtype") or () if quantized_dtype(d)]
    return tuple(dict.fromkeys(named)) or None


def runnable_defaults() -> tuple[str, ...]:
    """The default backends installed here; each other one is named on stderr with how to install
    it, and a UsageError says what to install when none is."""
    found, missing = installed_defaults()
    for why in missing:
        print(f"conformance: not run: {why}", file=sys.stderr)
    if not found:
        raise UsageError("no default backend can run here; install one (pip install 'conformance[torch]') "
                         "or name one with --backend")
    return found


def workers_from(args: argparse.Namespace, *, timeout: float) -> tuple[tuple[str, WorkerSpec], ...]:
    """Start each --worker, learn from its handshake which backend it serves."""
    from conformance.worker.client import connect

    found = []
    for command in args.worker or ():
        spec = WorkerSpec(command, timeout)
        found.append((connect(spec).name, spec))
    return tuple(found)


def options_from(args: argparse.Namespace) -> Options:
    """How the rows run: the gate configuration, seed, examples, reproducer directory and jobs;
    the plot data only for an HTML report."""
    config = config_from(args)
    return Options(config=config, seed=parse_int(args.seed, flag="--seed"),
                   max_examples=parse_int(args.max_examples, flag="--max-examples", maximum=MAX_EXAMPLES),
                   results_dir=Path(args.results_dir), jobs=jobs_from(args), plots=args.html is not None)


def add_jobs_option(parser: argparse.ArgumentParser) -> None:
    """``--jobs N``: the processes the rows run on."""
    parser.add_argument("--jobs", metavar="N",
                        help="processes the rows run on (default: the cores this process may use); 1 runs "
                             "every row in this process; the reports are the same either way")


def jobs_from(args: argparse.Namespace) -> int:
    """``--jobs``, or the cores this process may use."""
    if args.jobs is None:
        return available_cores()
    return parse_int(args.jobs, flag="--jobs", minimum=1, maximum=MAX_JOBS)


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1

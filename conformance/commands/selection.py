"""The suite's selection and options from parsed arguments: which rows (backends, workers, dtypes,
slopes, directions, kernel) and how (gate, seed, examples, jobs), as ``run``, ``agree`` and
``export-cases`` take them."""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from conformance.backends import WorkerSpec, installed_defaults
from conformance.commands.args import (
    check_profile,
    checked_backend,
    choice,
    config_from,
    items,
    parse_alpha,
    parse_dtype,
    parse_int,
    parse_seconds,
)
from conformance.errors import UsageError
from conformance.suite import DIRECTIONS, SUITE_ALPHAS, Options, Selection

MAX_EXAMPLES = 10_000  # hypothesis examples per dtype pair; more only slows the run
MAX_JOBS = 256


def selection_from(args: argparse.Namespace, *, references: Sequence[str] = ()) -> Selection:
    """The suite selection the flags ask for, validated (UsageError on anything unknown);
    ``references`` (validated backend names) run first and every other row is compared with them."""
    chosen = items(args.backend, flag="--backend")
    for name in chosen or ():
        checked_backend(name, flag="--backend")
    directions = items(args.direction, flag="--direction") or DIRECTIONS
    for d in directions:
        choice(d, DIRECTIONS, flag="--direction")
    dtypes, alphas = items(args.dtype, flag="--dtype"), items(args.alpha, flag="--alpha")
    dtypes = None if dtypes is None else tuple(dict.fromkeys(map(parse_dtype, dtypes)))
    alphas = SUITE_ALPHAS if alphas is None else tuple(dict.fromkeys(map(parse_alpha, alphas)))
    workers = workers_from(args)  # last: starting a worker is the slow part
    served = tuple(name for name, _ in workers)
    defaults = () if chosen or workers else runnable_defaults()
    backends = tuple(dict.fromkeys((*references, *(chosen or defaults), *served)))
    profile, variant = check_profile(args, [b for b in backends if b not in served])
    return Selection(backends=backends, workers=workers,
                     worker_timeout=parse_seconds(args.worker_timeout, flag="--worker-timeout"),
                     dtypes=dtypes, alphas=alphas, directions=tuple(directions),  # type: ignore[arg-type]
                     profile=profile, variant=variant, references=tuple(references))


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


def workers_from(args: argparse.Namespace) -> tuple[tuple[str, WorkerSpec], ...]:
    """Start each --worker, learn from its handshake which backend it serves."""
    from conformance.worker.client import connect

    timeout = parse_seconds(args.worker_timeout, flag="--worker-timeout")
    found = []
    for command in args.worker or ():
        spec = WorkerSpec(command, timeout)
        found.append((connect(spec).name, spec))
    return tuple(found)


def options_from(args: argparse.Namespace) -> Options:
    """How the rows run: the gate configuration, seed, examples, reproducer directory and jobs."""
    config = config_from(args)
    jobs = available_cores() if args.jobs is None else parse_int(args.jobs, flag="--jobs", minimum=1,
                                                                 maximum=MAX_JOBS)
    return Options(config=config, seed=parse_int(args.seed, flag="--seed"),
                   max_examples=parse_int(args.max_examples, flag="--max-examples", maximum=MAX_EXAMPLES),
                   results_dir=Path(args.results_dir), jobs=jobs)


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1

"""`conformance compare --reference-y/--reference-dx`: a second device's or framework's dump of
the same inputs.  Both outputs are judged against golden; then their bits are compared, a chunk
at a time, and the agreement says whether they are identical, how many elements differ and why
(``judge.agreement``, from both sides' triage)."""
from __future__ import annotations

import argparse
from contextlib import ExitStack
from pathlib import Path
from typing import Optional

from conformance.commands.args import parse_alpha, parse_dtype, parse_int
from conformance.errors import UsageError
from conformance.ingest.arrays import Dump, load
from conformance.ingest.dumps import check_pair, chunks, kernel_plan_fn, progress
from conformance.judge.agreement import Agreement, from_chunks
from conformance.judge.chunked import evaluate_chunks
from conformance.judge.gate import GateConfig
from conformance.records import Row

FLAGS = {"forward": ("--reference-y", "reference_y", "--y", "y"),
         "backward": ("--reference-dx", "reference_dx", "--dx", "dx")}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reference-y", metavar="PATH",
                        help="another device's or framework's y for the same x: are the bits the same, "
                             "how many differ, and why")
    parser.add_argument("--reference-dx", metavar="PATH",
                        help="another device's or framework's dx for the same x and dy (as --reference-y)")


def check(args: argparse.Namespace) -> None:
    """Each reference goes with the output it is compared with, and only with plain arrays."""
    for flag, dest, needs, needs_dest in FLAGS.values():
        if getattr(args, dest) is None:
            continue
        if args.msprobe is not None:
            raise UsageError(f"{flag} compares plain arrays; to compare two msprobe dumps, pass the "
                             "benchmark's as --reference-msprobe BENCHMARK_DIR")
        if args.manifest is not None:
            raise UsageError(f"{flag} compares plain arrays; it cannot be combined with --manifest")
        if getattr(args, needs_dest) is None:
            raise UsageError(f"{flag} needs {needs} (the output it is compared with)")


def inputs(args: argparse.Namespace) -> dict[str, Optional[str]]:
    """The reference paths, for the report-path collision check."""
    return {flag: getattr(args, dest) for flag, dest, _, _ in FLAGS.values()}


def agreements(args: argparse.Namespace, rows: list[Row], *, config: GateConfig) -> list[Agreement]:
    """One agreement per row that has a reference dump."""
    bits = parse_dtype(args.dtype) if args.dtype else None
    found = []
    for row in rows:
        flag, dest, _, out_dest = FLAGS[row.direction]
        if getattr(args, dest) is None:
            continue
        x = load(args.x, flag="--x", bits_dtype=bits)
        dy = load(args.dy, flag="--dy", bits_dtype=bits) if row.direction == "backward" else None
        out = load(getattr(args, out_dest), flag=FLAGS[row.direction][2], bits_dtype=bits)
        ref = load(getattr(args, dest), flag=flag, bits_dtype=bits)
        check_pair(x, ref, flag=flag)
        if ref.dtype != out.dtype:
            raise UsageError(f"{flag} is {ref.dtype} but {FLAGS[row.direction][2]} is {out.dtype}; "
                             "compare outputs of the same dtype")
        ref_row = _judged(args, x, ref, dy=dy, row=row, config=config, label=Path(getattr(args, dest)).name)
        pairs = ((r.actual, o.actual) for r, o in zip(chunks(x, ref, dy=dy), chunks(x, out, dy=dy)))
        found.append(from_chunks(pairs, ref_row=ref_row, row=row,
                                 names=(Path(getattr(args, dest)).name, Path(getattr(args, out_dest)).name)))
    return found


def _judged(args: argparse.Namespace, x: Dump, ref: Dump, *, dy: Optional[Dump], row: Row,
            config: GateConfig, label: str) -> Row:
    """The reference dump against golden, as ``compare`` judges the device's."""
    cores = None if args.cores is None else parse_int(args.cores, flag="--cores", minimum=1)
    plan_fn = None
    if args.profile is not None or cores is not None:
        plan_fn = kernel_plan_fn(args.profile, cores, dtypes=(x.dtype.name, ref.dtype.name),
                                direction=row.direction)
    with ExitStack() as stack:
        return evaluate_chunks(lambda: chunks(x, ref, dy=dy), numel=x.size, dtype=x.dtype,
                               alpha=parse_alpha(args.alpha), direction=row.direction,
                               out_dtype=ref.dtype.name, backend="dump", profile=args.profile,
                               config=config, label=label, plan_fn=plan_fn, shape=x.shape,
                               advance=progress(stack, f"{row.direction} {label}", total=x.size,
                                                quiet=args.quiet),
                               plots=args.html is not None)

"""`conformance compare`: triage arrays dumped from a real device against the exact reference.

Arrays come as ``.npy`` or ``.npz``, memory-mapped and checked by
``conformance.ingest.arrays`` (never unpickled; any byte order), and are judged
a chunk at a time (``conformance.ingest.dumps``), so a dump larger than memory can be compared.
Dtypes are read from the arrays: an fp32 x with an fp16 y is the fp32->fp16
path.  bfloat16 comes as an ml_dtypes ``.npy`` or as raw uint16 bits with
``--dtype bfloat16``.  ``--profile``/``--cores`` give triage the emulator's
tiling plan, so that errors confined to tail tiles are named ``tail-block``.
"""
from __future__ import annotations

import argparse
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Optional

from conformance import machine
from conformance.commands import compare_msprobe, compare_prelu, compare_quant, compare_reference
from conformance.commands.args import add_gate_options, config_from, parse_alpha, parse_dtype, parse_int, shown
from conformance.commands.output import HTML_HELP, add_view_options, html_paths, view_from
from conformance.errors import UsageError
from conformance.ingest.arrays import Dump, load
from conformance.ingest.dumps import check_bits_used, check_elements, check_pair, chunks, kernel_plan_fn, progress
from conformance.judge.chunked import evaluate_chunks
from conformance.judge.gate import GateConfig
from conformance.records import DEFAULT_OP, Row
from conformance.render import console as render
from conformance.render import files, github
from conformance.render.export import partial_on_interrupt, write_reports
from conformance.render.summary import RunInfo, command_line

HELP = "triage arrays from a real device (x, y and/or dy, dx; PReLU's weight, dweight) against the exact reference"
_BITS_DTYPES = ("bfloat16", "float16")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--x", help="input x (.npy, .npz or a torch.save .pt)")
    parser.add_argument("--y", help="forward output y computed by the device")
    parser.add_argument("--alpha", help="the slope the device was given")
    parser.add_argument("--dy", help="upstream gradient dy (backward)")
    parser.add_argument("--dx", help="gradient dx computed by the device (backward)")
    compare_prelu.configure(parser)
    parser.add_argument("--dtype", metavar="D",
                        help="dtype of arrays stored as raw uint16 bits: bf16 or fp16 (or bfloat16, float16)")
    parser.add_argument("--quant", metavar="S_IN:Z_IN:S_OUT:Z_OUT",
                        help="--x and --y are int8 or uint8 codes of this per-tensor affine setting "
                             "(quantized LeakyReLU; see docs/explanation/quantized.md)")
    sources = parser.add_argument_group("other sources (instead of --x, --y, --dy, --dx, --alpha)")
    sources.add_argument("--msprobe", metavar="DUMP_DIR",
                         help="an msprobe tensor dump: one row per LeakyReLU call it recorded")
    compare_msprobe.configure(sources)
    sources.add_argument("--manifest", metavar="DIR",
                         help="a directory written by export-cases, with the device's outputs beside the inputs")
    parser.add_argument("--profile", help="chip profile whose tiling plan locates tail tiles")
    parser.add_argument("--cores", help="number of cores of the tiling plan")
    compare_reference.configure(parser)
    parser.add_argument("--json", help="write the JSON report here")
    parser.add_argument("--junit", help="write JUnit XML here")
    parser.add_argument("--html", metavar="PATH", help=HTML_HELP)
    compare_msprobe.add_csv_option(parser)
    parser.add_argument("--config", help="gate configuration TOML file")
    add_gate_options(parser)
    add_view_options(parser)


def _bits_dtype(text: Optional[str]) -> Optional[str]:
    """``--dtype`` as a table name, with the aliases ``run`` takes; a 16-bit dtype only."""
    if text is None:
        return None
    name = parse_dtype(text)
    if name not in _BITS_DTYPES:
        raise UsageError(f"--dtype {shown(text)}: raw bits are read as bf16 or fp16 only (compare reads "
                         "other dtypes, and pairs, from the arrays themselves)")
    return name


def _cores(text: Optional[str]) -> Optional[int]:
    if text is None:
        return None
    return parse_int(text, flag="--cores", minimum=1)


# ----------------------------------------------------------------------------- run

def _rows(args: argparse.Namespace, *, alpha: float, config: GateConfig) -> list[Row]:
    bits = _bits_dtype(args.dtype)
    x = load(args.x, flag="--x", bits_dtype=bits)
    check_elements(x.shape, what=f"--x {args.x}", fix="pass the dumps of a call with data")
    jobs: list[tuple[str, Dump, Optional[Dump]]] = []
    if args.y is not None:
        y = load(args.y, flag="--y", bits_dtype=bits)
        check_pair(x, y, flag="--y")
        jobs.append(("forward", y, None))
    if args.dx is not None:
        dy = load(args.dy, flag="--dy", bits_dtype=bits)
        dx = load(args.dx, flag="--dx", bits_dtype=bits)
        if dy.shape != x.shape or dy.dtype != x.dtype:
            raise UsageError(f"--dy is {dy.dtype}{list(dy.shape)} but --x is {x.dtype}{list(x.shape)}; "
                             "dy must match x in dtype and shape")
        check_pair(x, dx, flag="--dx")
        jobs.append(("backward", dx, dy))
    check_bits_used(bits, x=x, outs=[out for _, out, _ in jobs], path=args.x)
    return [_evaluate(args, x, out, dy=dy, direction=d, alpha=alpha, config=config)
            for d, out, dy in jobs]


def _evaluate(args: argparse.Namespace, x: Dump, out: Dump, *, dy: Optional[Dump],
              direction: str, alpha: float, config: GateConfig) -> Row:
    cores = _cores(args.cores)
    plan_fn = None
    if args.profile is not None or cores is not None:
        plan_fn = kernel_plan_fn(args.profile, cores, dtypes=(x.dtype.name, out.dtype.name),
                                direction=direction)
    label = Path(args.y if direction == "forward" else args.dx).name
    with ExitStack() as stack:
        return evaluate_chunks(lambda: chunks(x, out, dy=dy), numel=x.size, dtype=x.dtype,
                               alpha=alpha, direction=direction, out_dtype=out.dtype.name,
                               backend="dump", profile=args.profile, config=config, label=label,
                               plan_fn=plan_fn, shape=x.shape,
                               advance=progress(stack, f"{direction} {label}", total=x.size, quiet=args.quiet),
                               plots=args.html is not None)


def _check_flags(args: argparse.Namespace) -> None:
    compare_prelu.check_flags(args)
    if args.op != DEFAULT_OP:
        _bits_dtype(args.dtype)
        return
    compare_msprobe.check_flags(args)
    if args.quant is not None:
        return compare_quant.check_flags(args)
    _bits_dtype(args.dtype)
    compare_reference.check(args)
    if args.msprobe is not None or args.manifest is not None:
        given = [f for f in ("--x", "--y", "--dy", "--dx", "--alpha") if getattr(args, f[2:]) is not None]
        if args.msprobe is not None and args.manifest is not None:
            raise UsageError("pass either --msprobe or --manifest, not both")
        if given:
            raise UsageError(f"{', '.join(given)} cannot be combined with --msprobe/--manifest "
                             "(the arrays and slopes come from the dump)")
        return
    if args.x is None or args.alpha is None:
        raise UsageError("compare needs --x and --alpha (or --msprobe DUMP_DIR, or --manifest DIR)")
    if args.dx is not None and args.dy is None:
        raise UsageError("--dx needs --dy (the upstream gradient the device was given)")
    if args.dy is not None and args.dx is None:
        raise UsageError("--dy needs --dx (the gradient the device computed)")
    if args.y is None and args.dx is None:
        raise UsageError("nothing to compare: pass --y (forward) and/or --dy with --dx (backward)")


def _source(args: argparse.Namespace) -> Callable[[GateConfig], list[Row]]:
    """What makes the rows: an msprobe dump, an export-cases directory, or the arrays."""
    if args.op != DEFAULT_OP:
        return lambda config: compare_prelu.rows(args, config=config, bits=_bits_dtype(args.dtype))
    if args.msprobe is not None:
        return lambda config: compare_msprobe.rows(args.msprobe, config=config, profile=args.profile,
                                                   cores=_cores(args.cores), quiet=args.quiet,
                                                   plots=args.html is not None)
    if args.quant is not None:
        return lambda config: compare_quant.rows(args, config=config)
    if args.manifest is not None:
        from conformance.ingest import manifest

        return lambda config: manifest.rows(args.manifest, config=config)
    alpha = parse_alpha(args.alpha)
    return lambda config: _rows(args, alpha=alpha, config=config)


def execute(args: argparse.Namespace) -> int:
    inputs = {"--x": args.x, "--y": args.y, "--dy": args.dy, "--dx": args.dx, "--config": args.config,
              "--msprobe": args.msprobe, **compare_reference.inputs(args),
              compare_msprobe.BENCHMARK_FLAG: args.reference_msprobe, "--weight": args.weight,
              "--dweight": args.dweight}
    paths = files.prepare(html_paths(args), inputs=inputs)
    _check_flags(args)
    pairs = compare_msprobe.PairRun(args) if args.reference_msprobe is not None else None
    source = _source(args) if pairs is None else pairs.run
    config = config_from(args)
    rows: list[Row] = []
    with partial_on_interrupt(paths, lambda: rows or (pairs.rows if pairs else []),  # Ctrl-C/SIGTERM: partial
                              seed=None, config=config):
        rows = source(config)
        found = pairs.agreements if pairs else compare_reference.agreements(args, rows, config=config)
    console, view = render.make_console(), view_from(args)
    render.render_rows(rows, console=console, view=view)
    for note in [] if view.quiet else [f"note: {row.variant or row}: {n}" for row in rows for n in row.notes]:
        console.print(note, markup=False)
    if pairs is None and not view.quiet:
        render.render_agreement(found, console=console)
    elif not view.quiet:
        pairs.render(console=console)
    console.print(render.summary_line(rows))
    info = RunInfo(command=command_line(), environment=machine.describe())
    write_reports(rows, paths, seed=None, config=config, info=info, agreement=found or None)
    if pairs is not None:
        pairs.write_csv()
    github.publish(rows, info=info)
    render.print_policy(config.described, quiet=view.quiet)  # once the reports are written
    return 1 if any(r.verdict == "fail" for r in rows) else 0

"""`conformance compare --op prelu` (and ``--op rrelu``): a PReLU or RReLU dump against the exact golden
(:mod:`conformance.reference.prelu`), triaged by :mod:`conformance.triage.prelu` and judged as the suite's
PReLU rows are (:func:`conformance.prelu_suite.judge_batch`): y (forward); dx and, with ``--dweight``, the
weight's gradient (backward).  The weight lies on torch's channel axis 1 (or is one shared element, the
input's shape without its batch axis, or any shape broadcasting to the input), or on ``--channel-axis``.
RReLU is its eval mode, the slope (1/8 + 1/3) / 2 of torch's bounds, with no weight.  The arrays are
read whole: triage recomputes every rule on the whole tensor."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional

import numpy as np

from conformance.commands.args import parse_int
from conformance.commands.names import choice
from conformance.dtypes import info
from conformance.errors import UsageError
from conformance.ingest.arrays import load
from conformance.ingest.dumps import check_bits_used, check_elements
from conformance.judge.evaluate import merge_rows
from conformance.judge.gate import GateConfig
from conformance.ops import OPS, RRELU_EVAL_SLOPE
from conformance.prelu_suite import PRELU_DTYPES, PreluBatch, judge_batch, row_config
from conformance.records import DEFAULT_OP, BackendResult, Row, RowKey
from conformance.reference import prelu

#: What only a LeakyReLU dump takes, by its flag.
LEAKY_ONLY = {"--alpha": "alpha", "--quant": "quant", "--msprobe": "msprobe", "--manifest": "manifest",
              "--reference-y": "reference_y", "--reference-dx": "reference_dx", "--profile": "profile",
              "--cores": "cores", "--reference-msprobe": "reference_msprobe", "--csv": "csv"}
#: What only a PReLU dump takes, by its flag.
PRELU_ONLY = {"--weight": "weight", "--dweight": "dweight", "--channel-axis": "channel_axis"}


def configure(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--op", default=DEFAULT_OP, metavar="OP",
        help=f"the operator the dump computed: {', '.join(OPS)} (default leaky_relu; rrelu: eval mode)")
    add("--weight", metavar="PATH", help="--op prelu: the weight the device was given (1 element, C on the "
        "channel axis, the input's shape without its batch axis, or a shape broadcasting to it)")
    add("--dweight", metavar="PATH", help="--op prelu, backward: the weight's gradient the device computed")
    add("--channel-axis", metavar="N", help="--op prelu: the axis a C-element weight lies on (default 1, "
        "torch's; -1 for channels last)")


def named(args: argparse.Namespace, flags: dict[str, str]) -> list[str]:
    """The ``flags`` given on the command line."""
    return [flag for flag, dest in flags.items() if getattr(args, dest, None) is not None]


def check_flags(args: argparse.Namespace) -> None:
    """The flags of ``--op``'s dump, each with what it needs; a UsageError naming the fix otherwise."""
    op = choice(args.op, tuple(OPS), flag="--op")
    if op == DEFAULT_OP:
        if named(args, PRELU_ONLY):
            raise UsageError(f"{named(args, PRELU_ONLY)[0]} is PReLU's; add --op prelu")
        return
    if named(args, LEAKY_ONLY):
        raise UsageError(f"{named(args, LEAKY_ONLY)[0]} is not taken with --op {op} (the slope comes from "
                         f"{'--weight' if op == 'prelu' else 'RReLU eval mode, 11/48'})")
    if op == "rrelu" and named(args, PRELU_ONLY):
        raise UsageError(f"{named(args, PRELU_ONLY)[0]}: --op rrelu has no weight (its eval slope is 11/48); "
                         "for a slope of your own pass --op prelu --weight W")
    if op == "prelu" and args.weight is None:
        raise UsageError("--op prelu needs --weight (the weight the device was given)")
    if args.x is None:
        raise UsageError(f"compare --op {op} needs --x, and --y (forward) and/or --dy with --dx (backward)")
    if (args.dy is None) != (args.dx is None):
        raise UsageError("--dx and --dy go together (the gradient computed and the upstream gradient given)")
    if args.dweight is not None and args.dy is None:
        raise UsageError("--dweight needs --dy and --dx (the backward call it came from)")
    if args.y is None and args.dx is None:
        raise UsageError("nothing to compare: pass --y (forward) and/or --dy with --dx (backward)")


def rows(args: argparse.Namespace, *, config: GateConfig, bits: Optional[str]) -> list[Row]:
    """The forward and backward rows of the dump (:func:`check_flags` first); ``bits``: the dtype of
    arrays stored as raw uint16 bits."""
    arrays = read_all(args, bits=bits)
    x = arrays["--x"]
    check_elements(x.shape, what=f"--x {args.x}", fix="pass the dumps of a call with data")
    if x.dtype.name not in PRELU_DTYPES:
        raise UsageError(f"--x is {x.dtype}; PReLU is compared in {', '.join(PRELU_DTYPES)}")
    axis = channel_axis(args.channel_axis, ndim=x.ndim)
    weight = checked_weight(args, arrays, channel_axis=axis)
    config = row_config(None, config)  # a sum's order is the implementation's: reduction-order is allowed
    found = []
    if args.y is not None:
        y = same_as_x(arrays["--y"], x, flag="--y")
        batch = PreluBatch(Path(args.y).name, x, None, weight, axis)
        found.append(judged(args.op, batch, BackendResult(value=y), config=config))
    if args.dx is not None:
        dy, dx = same_as_x(arrays["--dy"], x, flag="--dy"), same_as_x(arrays["--dx"], x, flag="--dx")
        dweight = checked_dweight(arrays["--dweight"], weight, x) if args.dweight is not None else None
        batch = PreluBatch(Path(args.dx).name, x, dy, weight, axis)
        found.append(judged(args.op, batch, BackendResult(value=dx, dweight=dweight), config=config))
    return found


def read_all(args: argparse.Namespace, *, bits: Optional[str]) -> dict[str, np.ndarray]:
    """Every array given, whole, by its flag; a ``--dtype`` that no raw-bits array takes is a UsageError."""
    paths = {flag: getattr(args, flag[2:]) for flag in ("--x", "--y", "--dy", "--dx", "--weight", "--dweight")}
    dumps = {flag: load(path, flag=flag, bits_dtype=bits) for flag, path in paths.items() if path is not None}
    check_bits_used(bits, x=dumps["--x"], outs=[d for flag, d in dumps.items() if flag != "--x"], path=args.x)
    return {flag: d.whole() for flag, d in dumps.items()}


def judged(op: str, batch: PreluBatch, result: BackendResult, *, config: GateConfig) -> Row:
    """One direction's row: y, or dx and dweight merged, against the golden."""
    direction = "forward" if batch.dy is None else "backward"
    dtype = batch.x.dtype.name
    alpha = float(np.asarray(batch.weight, dtype=np.float64).reshape(-1)[0]) if op == "prelu" else RRELU_EVAL_SLOPE
    spec = RowKey("dump", None, None, dtype, dtype, direction, alpha, op=op)
    parts = judge_batch(spec, batch, result, config=config, with_dweight=result.dweight is not None)
    return merge_rows(parts, config=config)


def channel_axis(text: Optional[str], *, ndim: int) -> int:
    """``--channel-axis`` as an axis of x in 0..ndim-1 (negative counts from the end); torch's 1 without it."""
    if text is None:
        return 1
    return parse_int(text, flag="--channel-axis", minimum=-ndim, maximum=ndim - 1) % ndim


def checked_weight(args: argparse.Namespace, arrays: dict[str, np.ndarray], *, channel_axis: int) -> np.ndarray:
    """PReLU's --weight, a float whose shape fits x's (RReLU's: its eval slope)."""
    if args.op == "rrelu":
        return np.array([RRELU_EVAL_SLOPE])
    weight, x = arrays["--weight"], arrays["--x"]
    try:
        info(weight.dtype)
        prelu.expanded_weight(weight, x.shape, channel_axis=channel_axis)
    except ValueError as exc:  # not a float dtype, or a shape no weight rule takes
        raise UsageError(f"--weight {args.weight}: {exc}{axis_hint(weight, x.shape)}") from None
    return weight


def axis_hint(weight: np.ndarray, shape: tuple[int, ...]) -> str:
    """How to name the axis a 1-D ``weight`` fits, when one of ``shape``'s axes has its length."""
    fits = [i for i, n in enumerate(shape) if weight.ndim == 1 and n == weight.size]
    return f"; or pass --channel-axis {fits[-1]}, the axis of {weight.size} elements" if fits else ""


def checked_dweight(dweight: np.ndarray, weight: np.ndarray, x: np.ndarray) -> np.ndarray:
    """--dweight, of the weight's shape and x's dtype (the golden's)."""
    if dweight.shape != weight.shape or dweight.dtype != x.dtype:
        raise UsageError(f"--dweight is {dweight.dtype}{list(dweight.shape)}; it must have the weight's shape "
                         f"{list(weight.shape)} and x's dtype {x.dtype}")
    return dweight


def same_as_x(a: np.ndarray, x: np.ndarray, *, flag: str) -> np.ndarray:
    """``a`` when it has x's shape and dtype; a UsageError naming both otherwise."""
    if a.shape != x.shape or a.dtype != x.dtype:
        raise UsageError(f"{flag} is {a.dtype}{list(a.shape)} but --x is {x.dtype}{list(x.shape)}; "
                         f"{flag} must match x in dtype and shape")
    return a

"""`conformance compare --quant S_IN:Z_IN:S_OUT:Z_OUT`: quantized dumps against the exact codes.

``--x`` and ``--y`` hold int8 (qint8) or uint8 (quint8) codes of the same shape; the setting
gives the per-tensor affine parameters of both.  The row is judged by code distance and
quantized triage (``judge.quantized``) as backend ``dump``, so the same table, JSON, JUnit
and exit codes follow.  The dumps are memory-mapped and read a chunk at a time
(``ingest.dumps.chunks``), as float dumps are.  A bad setting or a float array is exit 2
with one line.
"""
from __future__ import annotations

import argparse
from contextlib import ExitStack
from pathlib import Path

import numpy as np

from conformance.commands.args import parse_alpha, shown
from conformance.errors import UsageError
from conformance.ingest.arrays import Dump, read
from conformance.ingest.dumps import chunks, progress
from conformance.judge.gate import GateConfig
from conformance.judge.quantized import evaluate_code_chunks, judged_whole
from conformance.records import Row
from conformance.reference.quantized import QDTYPES, QuantParams, parse_setting
from conformance.triage.quantized_layout import LAYOUT_MAX_CODES

_BY_STORAGE = {np.dtype(storage): name for name, (storage, _, _) in QDTYPES.items()}
_NOT_WITH = ("--dy", "--dx", "--dtype", "--msprobe", "--manifest", "--profile", "--cores")


def check_flags(args: argparse.Namespace) -> None:
    """``--quant`` needs ``--x``, ``--y`` and ``--alpha``, and takes none of the float-only flags."""
    given = [f for f in _NOT_WITH if getattr(args, f[2:]) is not None]
    if given:
        raise UsageError(f"--quant compares --x and --y codes only; drop {', '.join(given)}")
    missing = [f for f in ("--x", "--y", "--alpha") if getattr(args, f[2:]) is None]
    if missing:
        raise UsageError(f"--quant needs {', '.join(missing)} (int8 or uint8 codes, and the slope)")


def _codes(path: str, *, flag: str) -> Dump:
    """The codes of one dump, memory-mapped; a UsageError for any dtype but int8/uint8."""
    raw = read(path, flag=flag)
    native = raw.dtype.newbyteorder("=")
    if native not in _BY_STORAGE:
        raise UsageError(f"{flag} {path}: --quant reads int8 or uint8 codes, got {raw.dtype}; "
                         "save the quantized tensor's integer codes (int_repr)")
    return Dump(raw, native)


def setting(text: str, *, x: Dump) -> QuantParams:
    """``--quant`` parsed for the dtype of ``x``; a UsageError saying what to fix."""
    try:
        return parse_setting(text, dtype=_BY_STORAGE[x.dtype])
    except ValueError as exc:
        raise UsageError(f"--quant {shown(text)}: {exc}") from None


def rows(args: argparse.Namespace, *, config: GateConfig) -> list[Row]:
    """The one forward row of the two dumps."""
    x, y = _codes(args.x, flag="--x"), _codes(args.y, flag="--y")
    if x.dtype != y.dtype or x.shape != y.shape:
        raise UsageError(f"--y is {y.dtype}{list(y.shape)} but --x is {x.dtype}{list(x.shape)}; "
                         "the codes in and out share a dtype and a shape")
    if x.size == 0:
        raise UsageError(f"--x {args.x} holds no codes; pass the dumps of a call with data")
    params = setting(args.quant, x=x)
    alpha, label = parse_alpha(args.alpha), Path(args.y).name
    with ExitStack() as stack:
        row = evaluate_code_chunks(lambda: chunks(x, y, dy=None), numel=x.size, alpha=alpha, params=params,
                                   backend="dump", config=config, label=label, shape=x.shape,
                                   advance=progress(stack, f"forward {label}", total=x.size, quiet=args.quiet))
    unexplained = any(f.category == "unexplained" for f in row.findings)
    if unexplained and x.size <= LAYOUT_MAX_CODES:  # a layout or span proof needs every code's place
        row = judged_whole(row, x.whole(), y.whole(), params=params, config=config, label=label)
    return [row]

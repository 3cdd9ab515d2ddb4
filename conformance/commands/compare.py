"""`conformance compare`: triage arrays dumped from a real device against the exact reference.

Arrays come as ``.npy`` or ``.npz`` (always loaded with ``allow_pickle=False``).
Dtypes are read from the arrays: an fp32 x with an fp16 y is the fp32->fp16
path.  bfloat16 comes as an ml_dtypes ``.npy`` or as raw uint16 bits with
``--dtype bfloat16``.  ``--profile``/``--cores`` give triage the emulator's
tiling plan, so that errors confined to tail tiles are named ``tail-block``.
"""
from __future__ import annotations

import argparse
import zipfile
from pathlib import Path
from typing import Optional

import numpy as np

from conformance.commands.args import add_view_options, parse_alpha, parse_int, view_from
from conformance.dtypes import DTYPES, info
from conformance.errors import UsageError
from conformance.records import BackendResult, TileLayout
from conformance.reference.golden import SUPPORTED_PAIRS
from conformance.report import console as render
from conformance.report import files
from conformance.report.evaluate import LayoutFn, Row, evaluate
from conformance.report.export import partial_on_interrupt, write_reports
from conformance.report.gate import GateConfig, load_config

HELP = "triage arrays from a real device (x, y and/or dy, dx) against the exact reference"
_BITS_DTYPES = ("bfloat16", "float16")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--x", required=True, help="input x (.npy or .npz)")
    parser.add_argument("--y", help="forward output y computed by the device")
    parser.add_argument("--alpha", required=True, help="the slope the device was given")
    parser.add_argument("--dy", help="upstream gradient dy (backward)")
    parser.add_argument("--dx", help="gradient dx computed by the device (backward)")
    parser.add_argument("--dtype", choices=_BITS_DTYPES,
                        help="dtype of arrays stored as raw uint16 bits (e.g. bfloat16)")
    parser.add_argument("--profile", help="chip profile whose tiling plan locates tail tiles")
    parser.add_argument("--cores", help="number of cores of the tiling plan")
    parser.add_argument("--json", help="write the JSON report here")
    parser.add_argument("--junit", help="write JUnit XML here")
    parser.add_argument("--config", help="gate configuration TOML file")
    parser.add_argument("--strict-zeros", action="store_true", help="a wrong zero sign fails")
    add_view_options(parser)


# ----------------------------------------------------------------------------- loading

def _read(path: str, *, flag: str) -> np.ndarray:
    """One array from a .npy, or from a .npz holding one array or one named after the flag."""
    file = Path(path)
    if not file.exists():
        raise UsageError(f"{flag} {path}: file does not exist; pass the path of a .npy or .npz file")
    if not file.is_file():
        raise UsageError(f"{flag} {path}: not a regular file; pass the path of a .npy or .npz file")
    with open(file, "rb") as handle:
        magic = handle.read(6)
    if magic.startswith(b"\x80"):  # a pickle protocol header
        raise UsageError(f"{flag} {path}: holds a pickled object; save a plain numeric array with numpy.save")
    if magic and not (magic.startswith(b"\x93NUMPY") or magic.startswith(b"PK")):
        raise UsageError(f"{flag} {path}: not a .npy or .npz file (no numpy header); save it with numpy.save")
    try:
        data = np.load(file, allow_pickle=False)
        if isinstance(data, np.lib.npyio.NpzFile):
            with data:
                return _from_npz(data, path=path, flag=flag)
        return data
    except UsageError:
        raise
    except ValueError as exc:
        if "pickle" in str(exc) or "Object arrays" in str(exc):
            raise UsageError(f"{flag} {path}: holds a pickled or object array; save a plain numeric "
                             "array with numpy.save") from None
        raise UsageError(f"{flag} {path}: cannot read it ({exc}); the file may be truncated") from None
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise UsageError(f"{flag} {path}: cannot read it ({exc}); the file may be truncated") from None


def _from_npz(data: np.lib.npyio.NpzFile, *, path: str, flag: str) -> np.ndarray:
    name = flag.lstrip("-")
    if name in data.files:
        return data[name]
    if len(data.files) == 1:
        return data[data.files[0]]
    raise UsageError(f"{flag} {path}: .npz holds {', '.join(data.files) or 'nothing'}; "
                     f"store one array or one named {name!r}")


def _typed(a: np.ndarray, *, flag: str, bits_dtype: Optional[str]) -> np.ndarray:
    """The array in a table dtype (uint16 bits reinterpreted when --dtype says so)."""
    if a.dtype.kind == "O":
        raise UsageError(f"{flag}: object arrays are not supported; save a numeric array")
    if a.dtype.kind == "V" and a.dtype.itemsize == 2 and a.dtype.fields is None:
        return a.view(info("bfloat16").dtype)  # numpy.save writes ml_dtypes bfloat16 as '<V2'
    if a.dtype == np.uint16 or a.dtype == np.int16:
        if bits_dtype is None:
            raise UsageError(f"{flag}: raw {a.dtype} array; pass --dtype bfloat16 (or float16) "
                             "to read it as bit patterns")
        return a.view(info(bits_dtype).dtype)
    if a.dtype.name not in DTYPES:
        raise UsageError(f"{flag}: unsupported dtype {a.dtype}; use one of {', '.join(DTYPES)}")
    return a


def load_array(path: str, *, flag: str, bits_dtype: Optional[str]) -> np.ndarray:
    return _typed(_read(path, flag=flag), flag=flag, bits_dtype=bits_dtype)


def _check_pair(x: np.ndarray, out: np.ndarray, *, flag: str, src_flag: str = "--x") -> None:
    if out.shape != x.shape:
        raise UsageError(f"{flag} has shape {out.shape} but {src_flag} has {x.shape}; "
                         "pass arrays of the same shape")
    pair = (x.dtype.name, out.dtype.name)
    if pair not in SUPPORTED_PAIRS:
        raise UsageError(f"unsupported dtype pair {pair[0]}->{pair[1]} ({src_flag}, {flag}); supported: "
                         + ", ".join(f"{a}->{b}" for a, b in sorted(SUPPORTED_PAIRS)))


# ----------------------------------------------------------------------------- layout

def _cores(text: Optional[str]) -> Optional[int]:
    if text is None:
        return None
    return parse_int(text, flag="--cores", minimum=1)


def plan_layout(profile: Optional[str], cores: Optional[int], *, dtypes: tuple[str, str],
                direction: str) -> LayoutFn:
    """The reference kernel's tiling plan as a layout function (imports the emulator lazily)."""
    from conformance.npu_impl import kernel

    try:
        spec = kernel.build_spec(direction, dtypes[0], dtypes[1], profile=profile)  # type: ignore[arg-type]
    except ValueError as exc:
        raise UsageError(f"--profile: {exc}") from None
    chip = spec.profile
    if cores is not None and cores > chip.vector_cores:
        raise UsageError(f"--cores {cores}: {chip.name} has {chip.vector_cores} vector cores; "
                         f"pass 1..{chip.vector_cores}")

    def layout(numel: int) -> Optional[TileLayout]:
        return kernel.plan_for(numel, spec, cores=cores).layout()

    return layout


# ----------------------------------------------------------------------------- run

def _rows(args: argparse.Namespace, *, alpha: float, config: GateConfig) -> list[Row]:
    bits = args.dtype
    x = load_array(args.x, flag="--x", bits_dtype=bits)
    jobs: list[tuple[str, np.ndarray, Optional[np.ndarray]]] = []
    if args.y is not None:
        y = load_array(args.y, flag="--y", bits_dtype=bits)
        _check_pair(x, y, flag="--y")
        jobs.append(("forward", y, None))
    if args.dx is not None:
        dy = load_array(args.dy, flag="--dy", bits_dtype=bits)
        dx = load_array(args.dx, flag="--dx", bits_dtype=bits)
        if dy.shape != x.shape or dy.dtype != x.dtype:
            raise UsageError(f"--dy is {dy.dtype}{list(dy.shape)} but --x is {x.dtype}{list(x.shape)}; "
                             "dy must match x in dtype and shape")
        _check_pair(x, dx, flag="--dx")
        jobs.append(("backward", dx, dy))
    return [_evaluate(args, x, out, dy=dy, direction=d, alpha=alpha, config=config)
            for d, out, dy in jobs]


def _evaluate(args: argparse.Namespace, x: np.ndarray, out: np.ndarray, *, dy: Optional[np.ndarray],
              direction: str, alpha: float, config: GateConfig) -> Row:
    cores = _cores(args.cores)
    layout_fn = None
    if args.profile is not None or cores is not None:
        layout_fn = plan_layout(args.profile, cores, dtypes=(x.dtype.name, out.dtype.name),
                                direction=direction)
    return evaluate(x, alpha, BackendResult(out), direction=direction, dy=dy,
                    out_dtype=out.dtype.name, backend="dump", profile=args.profile, config=config,
                    label=Path(args.y if direction == "forward" else args.dx).name,
                    layout_fn=layout_fn)


def _check_flags(args: argparse.Namespace) -> None:
    if args.dx is not None and args.dy is None:
        raise UsageError("--dx needs --dy (the upstream gradient the device was given)")
    if args.dy is not None and args.dx is None:
        raise UsageError("--dy needs --dx (the gradient the device computed)")
    if args.y is None and args.dx is None:
        raise UsageError("nothing to compare: pass --y (forward) and/or --dy with --dx (backward)")


def execute(args: argparse.Namespace) -> int:
    inputs = {"--x": args.x, "--y": args.y, "--dy": args.dy, "--dx": args.dx, "--config": args.config}
    paths = files.prepare(files.ReportPaths(args.json, args.junit), inputs=inputs)
    _check_flags(args)
    alpha = parse_alpha(args.alpha)
    config = load_config(args.config, strict_zeros=args.strict_zeros)
    rows: list[Row] = []
    with partial_on_interrupt(paths, lambda: rows, seed=None):  # Ctrl-C/SIGTERM: a partial report
        rows = _rows(args, alpha=alpha, config=config)
    console = render.make_console()
    render.render_rows(rows, console=console, view=view_from(args))
    console.print(render.summary_line(rows))
    write_reports(rows, paths, seed=None)
    return 1 if any(r.verdict == "fail" for r in rows) else 0

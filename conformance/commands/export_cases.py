"""`conformance export-cases DIR`: the suite's inputs as .npy files, a manifest and a device runner.

The rows are planned as ``run`` plans them for the same selection (``--backend``,
default ``torch``: the dtype pairs and boundary sizes torch_npu also declares) and
the batches are the ones ``run`` would feed that backend with the same ``--seed``
and ``--max-examples``.  On the device: ``python DIR/run_cases.py --device npu:0``;
back here: ``conformance compare --manifest DIR`` gives ``run``'s rows.
"""
from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

from conformance.commands.args import parse_int
from conformance.commands.selection import MAX_EXAMPLES, selection_from
from conformance.errors import UsageError
from conformance.ingest.manifest import RUNNER, export
from conformance.render import console as show
from conformance.suite import plan

HELP = "write the suite's inputs, a manifest and a torch_npu runner for an offline device"
DEFAULT_BACKEND = "torch"


def configure(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("dir", metavar="DIR", help="a new (or empty) directory to write the cases into")
    add("--backend", action="append", metavar="NAME",
        help=f"plan the rows this backend would run (default {DEFAULT_BACKEND}; repeat or comma-separate)")
    add("--dtype", action="append", metavar="D", help="fp16, bf16, fp32, fp64 (default: the backend's)")
    add("--alpha", action="append", metavar="A", help="slope(s), e.g. 0.2 or 1/3 (default: the suite's 8)")
    add("--direction", action="append", metavar="DIR", help="forward or backward (default: both)")
    add("--profile", help="chip profile of the backends that have one")
    add("--variant", help="kernel variant of the backends that have one")
    add("--seed", default="0", help="seed for random inputs and hypothesis examples (default 0)")
    add("--max-examples", default="100", help="hypothesis examples per dtype and direction (default 100)")
    parser.set_defaults(worker=None, worker_timeout="600", reference=None)


def _exported(specs: list, target: str, **how: Any) -> dict:
    """:func:`export` into ``target``; a path that is no directory, or cannot be written, is exit 2.
    An export cut short (Ctrl-C, SIGTERM, a full disk) leaves ``target`` as it found it, so the
    same command runs again."""
    root = Path(target)
    if root.exists() and not root.is_dir():
        raise UsageError(f"export-cases {target} is not a directory; pass a new directory")
    existed = root.exists()
    try:
        return export(specs, root, **how)
    except UsageError:
        raise
    except OSError as exc:
        _undo(root, existed=existed)
        raise UsageError(f"export-cases {target}: cannot write there ({exc.strerror or exc}); "
                         "pass a new directory you can write") from None
    except BaseException:
        _undo(root, existed=existed)
        raise


def _undo(root: Path, *, existed: bool) -> None:
    """Remove what an unfinished export wrote: ``root`` itself when it made it, else what is inside."""
    for path in ([root] if not existed else list(root.iterdir())) if root.exists() else []:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def execute(args: argparse.Namespace) -> int:
    args.backend = args.backend or [DEFAULT_BACKEND]
    selection = selection_from(args)
    seed = parse_int(args.seed, flag="--seed")
    max_examples = parse_int(args.max_examples, flag="--max-examples", maximum=MAX_EXAMPLES)
    specs, skipped = plan(selection)
    if not specs:
        raise UsageError("the selection plans no rows: its backends support none of its dtypes; "
                         "pick a supported --dtype")
    mixed = [s for s in specs if s.out_dtype != s.dtype]
    if mixed:
        raise UsageError(f"{mixed[0]}: the runner computes same-dtype pairs only (as torch_npu does); "
                         "pass --dtype without a ->pair")
    manifest = _exported(specs, args.dir, seed=seed, max_examples=max_examples, alphas=selection.alphas)
    console = show.make_console()
    console.print(f"{show.plural(len(specs), 'row')}, {show.plural(len(manifest['cases']), 'case')} "
                  f"written to {args.dir}", markup=False)
    if skipped:
        console.print(f"skipped {show.plural(len(skipped), 'row')} the backends do not support", markup=False)
    console.print(f"on the device: python {Path(args.dir) / RUNNER} --device npu:0; "
                  f"then: conformance compare --manifest {args.dir}", markup=False)
    return 0

"""Reading device dumps for judging: what ``compare`` and ``compare --msprobe`` share.

A dump's x and output are checked as a pair the golden knows, read
``CHUNK_ELEMENTS`` at a time (a dump larger than memory can be judged, each
chunk's mapped pages released once judged), located on the reference kernel's
tiling plan when a profile or a core count is given, and shown with a progress
bar when large.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Optional

from rich.console import Console

from conformance import jit
from conformance.dtypes import short_name
from conformance.errors import UsageError
from conformance.ingest.arrays import Dump, is_raw_bits
from conformance.judge.evaluate import PlanFn
from conformance.records import Chunk, TilePlan
from conformance.reference.golden import SUPPORTED_PAIRS
from conformance.render import console as render

CHUNK_ELEMENTS = 1 << 21  # elements judged at a time: bounds memory, keeps the work in cache
HELD = 4  # chunks a reader may still hold after it asked for the next: judged, read ahead, handed on
PROGRESS_ELEMENTS = 1 << 24  # inputs at least this large show a progress bar (on stderr)


def check_elements(shape: tuple[int, ...], *, what: str, fix: str) -> None:
    """A UsageError when an input of ``shape`` holds no elements: an empty comparison
    proves nothing, so it is never a PASS."""
    if math.prod(shape) == 0:
        raise UsageError(f"{what} holds no elements (shape {list(shape)}); an empty comparison "
                         f"proves nothing, so it is no PASS: {fix}")


def check_bits_used(bits: Optional[str], *, x: Dump, outs: list[Dump], path: str) -> None:
    """A UsageError when ``--dtype`` names another 16-bit dtype than the arrays have and none of
    them is raw bits it would apply to (so it would be ignored)."""
    if bits is None or any(map(is_raw_bits, [x, *outs])) or x.dtype.name == bits:
        return
    raise UsageError(f"--dtype {short_name(bits)} reads raw uint16 bits, but --x {path} is {x.dtype.name} "
                     "(no array here is raw bits); drop --dtype: compare reads the dtype from the arrays")


def check_pair(x: Dump, out: Dump, *, flag: str, src_flag: str = "--x") -> None:
    """A UsageError unless ``out`` has x's shape and (x, out) is a dtype pair the golden runs."""
    if out.shape != x.shape:
        raise UsageError(f"{flag} has shape {out.shape} but {src_flag} has {x.shape}; "
                         "pass arrays of the same shape")
    pair = (x.dtype.name, out.dtype.name)
    if pair not in SUPPORTED_PAIRS:
        raise UsageError(f"unsupported dtype pair {pair[0]}->{pair[1]} ({src_flag}, {flag}); supported: "
                         + ", ".join(f"{a}->{b}" for a, b in sorted(SUPPORTED_PAIRS)))


def chunks(x: Dump, out: Dump, *, dy: Optional[Dump], size: Optional[int] = None) -> Iterator[Chunk]:
    """Consecutive flat chunks of x, dy and the output, native byte order: a mapped file's
    elements read in place (``Dump.mapped``: its pages mapped first, so a file that shrank is an
    error), others read (the first chunk's files at once, a thread each: a caller has nothing
    to do but wait for it, while a later chunk's read may overlap the caller's work).  The
    mapped pages of a chunk are released from resident memory once the ``HELD``-th chunk after it
    is asked for (resident memory holds a few chunks), when no reader holds it any more."""
    step = max(1, size or CHUNK_ELEMENTS)
    dumps = (x, out) if dy is None else (x, dy, out)
    starts = range(0, x.size, step)
    for k, lo in enumerate(starts):
        hi = min(lo + step, x.size)
        read = [functools.partial(dump.mapped, lo, hi) for dump in dumps]
        parts = jit.in_parallel(read) if lo == 0 else [part() for part in read]
        yield Chunk(lo, parts[0], None if dy is None else parts[1], parts[-1])
        del parts
        if k >= HELD:
            _released(dumps, starts[k - HELD], step=step)
    for lo in starts[max(0, len(starts) - HELD):]:  # the last ones, once no chunk is left to read
        _released(dumps, lo, step=step)


def _released(dumps: tuple[Dump, ...], lo: int, *, step: int) -> None:
    for dump in dumps:
        dump.release(lo, min(lo + step, dump.size))


def kernel_plan_fn(profile: Optional[str], cores: Optional[int], *, dtypes: tuple[str, str],
                direction: str) -> PlanFn:
    """The reference kernel's tiling plan as a tile plan function (imports the emulator lazily)."""
    from conformance.npu_impl import kernel

    try:
        spec = kernel.build_spec(direction, dtypes[0], dtypes[1], profile=profile)  # type: ignore[arg-type]
    except ValueError as exc:
        raise UsageError(f"--profile: {exc}") from None
    chip = spec.profile
    if cores is not None and cores > chip.vector_cores:
        raise UsageError(f"--cores {cores}: {chip.name} has {chip.vector_cores} vector cores; "
                         f"pass 1..{chip.vector_cores}")

    def tile_plan(numel: int) -> Optional[TilePlan]:
        return kernel.plan_for(numel, spec, cores=cores).tile_plan()

    return tile_plan


def progress(stack: ExitStack, description: str, *, total: int, quiet: bool = False) -> Callable[[int], None]:
    """A progress bar on stderr for large inputs, closed with ``stack``; a no-op for small ones
    and under ``-q`` (on a terminal and on a pipe alike)."""
    if quiet or total < PROGRESS_ELEMENTS:
        return lambda n: None
    bar = stack.enter_context(render.make_progress(console=Console(stderr=True)))
    task = bar.add_task(description, total=total, unit="element")
    return lambda n: bar.update(task, advance=n)  # rich's bar on a terminal, progress lines on a pipe

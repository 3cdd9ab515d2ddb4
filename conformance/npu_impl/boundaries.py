"""The batch sizes on the edges of the emulated kernel's tiling plan, from the plan itself.

Apart from the strategies so that a backend (and a worker's hello) can name them
without importing hypothesis.
"""
from __future__ import annotations

from typing import Optional

from conformance.dtypes import DTypeInfo, DTypeLike, info
from conformance.records import Direction


def _plan_facts(dtype: DTypeLike | DTypeInfo, *, profile: Optional[str], out_dtype: Optional[str],
                direction: Direction, variant: Optional[str]) -> tuple[int, int, int]:
    """(tile elements, elements one core takes before a second is used, core limit) from the plan."""
    from conformance.npu_impl.kernel import build_spec, plan_for
    from conformance.npu_impl.tiling import MIN_TILING_BITS_SIZE_PER_CORE

    rec = info(dtype)
    spec = build_spec(direction, rec, out_dtype or rec, profile=profile, variant=variant, check_pair=False)
    plan = plan_for(0, spec)
    bits = plan.params.min_dtype_bits if plan.params else rec.bits
    return plan.tile_elements, MIN_TILING_BITS_SIZE_PER_CORE // bits, spec.profile.vector_cores


def boundary_sizes(dtype: DTypeLike | DTypeInfo, *, profile: Optional[str] = None,
                   out_dtype: Optional[str] = None, direction: Direction = "backward",
                   variant: Optional[str] = None, tiles: bool = True) -> tuple[int, ...]:
    """Element counts on the edges of the elementwise plan for ``profile`` (default: the default chip).

    The plan (opbase ``elewise_tiling.cpp``) takes one more core per ``per_core``
    elements (32768 bits) up to the core limit, and cuts blocks of 512-element
    multiples.  Core boundaries: one core full and +1 (a second, shorter block),
    two cores +1 (a third).  With ``tiles``: every core full -1/0/+1 (the +1 makes
    longer blocks and a shorter last one) and every core one full tile -1/+1 (the
    +1 gives every block a second, shorter tile).
    Backward has the most UB buffers, hence the smallest tile, so it is the default plan to probe.
    ``tiles=False`` keeps only the (small) one- and two-core sizes.
    """
    tile, per_core, cores = _plan_facts(dtype, profile=profile, out_dtype=out_dtype,
                                        direction=direction, variant=variant)
    sizes = {per_core, per_core + 1, 2 * per_core + 1}
    if tiles:
        full = cores * per_core
        sizes |= {full - 1, full, full + 1, cores * tile - 1, cores * tile + 1}
    return tuple(sorted(n for n in sizes if n > 0))

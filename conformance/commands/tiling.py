"""`conformance tiling`: print the emulated kernel's tiling plan and a roofline estimate.

The plan is opbase's elementwise tiling (``src/op_common/atvoss/elewise/elewise_tiling.cpp``);
``--usable-fraction`` switches to the source article's UB-budget model."""
from __future__ import annotations

import argparse
import json
from typing import Any

from conformance.commands.args import ascii_float, ascii_int
from conformance.errors import UsageError
from conformance.npu_impl.chips import PROFILES, ChipProfile
from conformance.npu_impl.kernel import KernelSpec, build_spec, plan_for, vector_ops
from conformance.npu_impl.tiling import Roofline, TilingPlan, roofline

HELP = "show how the emulated CANN kernel tiles N elements over cores and UB, with a roofline estimate"
MAX_NUMEL = 2 ** 31 - 1


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--numel", type=ascii_int, required=True, help="number of elements (>= 0)")
    parser.add_argument("--dtype", required=True, help="float16, bfloat16 or float32")
    parser.add_argument("--out-dtype", default=None, help="output dtype (default: the input dtype)")
    parser.add_argument("--profile", default="ascend910b1", help=f"chip: {', '.join(PROFILES)}")
    parser.add_argument("--cores", type=ascii_int, default=None, help="cores to use (default: all vector cores)")
    parser.add_argument("--usable-fraction", type=ascii_float, default=None,
                        help="the article's model instead of the elementwise formula: this fraction of "
                             "the total UB holds one tile (the article uses 0.6)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _spec(args: argparse.Namespace) -> KernelSpec:
    """The reference forward kernel for the requested profile and dtypes, or a UsageError."""
    try:
        return build_spec("forward", args.dtype, args.out_dtype or args.dtype, profile=args.profile)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _check(args: argparse.Namespace, prof: ChipProfile) -> None:
    if not 0 <= args.numel <= MAX_NUMEL:
        raise UsageError(f"--numel must be in 0..{MAX_NUMEL:,} (2**31 - 1, the kernel's int32 element "
                         f"count), got {args.numel:,}")
    if args.cores is not None and not 1 <= args.cores <= prof.vector_cores:
        raise UsageError(f"--cores must be in 1..{prof.vector_cores} on {prof.name}, got {args.cores}")
    if args.usable_fraction is not None and not 0 < args.usable_fraction <= 1:
        raise UsageError(f"--usable-fraction must be in (0, 1], got {args.usable_fraction}")


OUTPUT_CAST = ("a separate l0op::Cast after the kernel (aclnn_leaky_relu.cpp), its plan not shown; "
               "rounding assumed round-to-nearest-even")


def plan_sources(plan: TilingPlan, spec: KernelSpec) -> dict[str, str]:
    """Where each figure of the plan comes from, and the kernel it plans."""
    prof = spec.profile
    ub = "ub_usable_bytes" if plan.model == "elewise" else "ub_bytes"
    tiling = prof.source("tiling") if plan.model == "elewise" else \
        "the source article's model: usable fraction of the total UB holds one tile"
    sources = {"ub_budget_bytes": prof.source(ub), "vector_cores": prof.source("vector_cores"), "tiling": tiling,
               "kernel": prof.source("forward_kernel")}
    if spec.out != spec.kernel_out:
        sources["output_cast"] = OUTPUT_CAST
    if prof.aclnn_note:
        sources["aclnn"] = f"{prof.aclnn_note} ({prof.source('aclnn')})"
    return sources


def _params_json(plan: TilingPlan) -> dict[str, int] | None:
    p = plan.params
    return None if p is None else {"min_dtype_bits": p.min_dtype_bits, "max_dtype_bits": p.max_dtype_bits,
                                   "buffer_num": p.buffer_num, "buffer_divisor": p.buffer_divisor}


def plan_json(plan: TilingPlan, spec: KernelSpec, est: Roofline) -> dict[str, Any]:
    """The plan as JSON-ready data (keys: tile_elements, tiles, cores, roofline, ...)."""
    return {
        "profile": spec.profile.name, "dtype": spec.src.name, "out_dtype": spec.out.name,
        "numel": plan.numel, "model": plan.model, "ub_budget_bytes": plan.ub_budget_bytes,
        "ub_tile_bytes": plan.ub_tile_bytes, "align_elements": plan.align_elements,
        "tile_elements": plan.tile_elements, "tiles": plan.tiles,
        "former_cores": plan.former_cores, "tail_cores": len(plan.cores) - plan.former_cores,
        "params": _params_json(plan), "sources": plan_sources(plan, spec),
        "cores": [{"core": c.core, "start": c.start, "length": c.length,
                   "tiles": [{"start": t.start, "length": t.length} for t in c.tiles]} for c in plan.cores],
        "roofline": {
            "gm_bytes": est.gm_bytes, "vector_ops_per_element": est.vector_ops_per_element,
            "single_buffered_us": est.single_buffered_s * 1e6,
            "double_buffered_us": est.double_buffered_s * 1e6,
            "gm_bytes_per_s": est.gm_bytes_per_s, "gm_bytes_per_s_source": est.gm_bytes_per_s_source,
            "vector_bytes_per_s": est.vector_bytes_per_s, "vector_source": est.vector_source,
            "note": "an estimate: figures whose source says 'assumed' are not from a CANN source"},
    }


def _render(data: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"[bold]{data['profile']}[/] {data['dtype']}->{data['out_dtype']}, {data['numel']:,} elements, "
                  f"model {data['model']}: tile {data['tile_elements']:,} elements "
                  f"({data['ub_tile_bytes']:,} of {data['ub_budget_bytes']:,} B UB), {data['tiles']:,} tiles, "
                  f"{data['former_cores']} former + {data['tail_cores']} tail cores, "
                  f"align {data['align_elements']} elements")
    for figure, source in data["sources"].items():
        console.print(f"  {figure}: {source}", highlight=False)
    table = Table("core", "start", "length", "tiles", "last tile")
    for c in data["cores"]:
        last = c["tiles"][-1]["length"] if c["tiles"] else 0
        table.add_row(str(c["core"]), f"{c['start']:,}", f"{c['length']:,}", str(len(c["tiles"])), f"{last:,}")
    console.print(table)
    r = data["roofline"]
    console.print(f"roofline: {r['double_buffered_us']:.2f} us double-buffered, "
                  f"{r['single_buffered_us']:.2f} us single-buffered; GM {r['gm_bytes']:,} B at "
                  f"{r['gm_bytes_per_s']:.3g} B/s ({r['gm_bytes_per_s_source']}); vector "
                  f"{r['vector_bytes_per_s']:.3g} B/s ({r['vector_source']})")


def execute(args: argparse.Namespace) -> int:
    spec = _spec(args)
    _check(args, spec.profile)
    try:
        plan = plan_for(args.numel, spec, cores=args.cores, usable_fraction=args.usable_fraction)
    except ValueError as exc:
        raise UsageError(f"{exc}; pass a larger --usable-fraction") from None
    est = roofline(plan, profile=spec.profile, gm_bytes_per_element=(spec.src.bits + spec.out.bits) // 8,
                   vector_ops=vector_ops(spec), compute_itemsize=spec.compute.bits // 8)
    data = plan_json(plan, spec, est)
    if args.json:
        print(json.dumps(data, indent=1))
    else:
        _render(data)
    return 0

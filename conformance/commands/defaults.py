"""`conformance defaults`: each framework's default slope, declared beside probed live, and the
emulated CANN chip profiles' figures (UB, cores, kernels, what the gate allows), each with its source."""
from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table
from rich.text import Text

from conformance.frameworks.default_probes import ProbeResult, has_probe, probe_all

HELP = "print each framework's default LeakyReLU slope, declared and probed live"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults()


def _table(results: tuple[ProbeResult, ...]) -> Table:
    table = Table(title="LeakyReLU default slopes (the default-alpha trap)")
    for column in ("API", "argument", "declared", "probed", "version", "status"):
        table.add_column(column, overflow="fold")
    styles = {"agrees": "green", "DISAGREES": "bold red", "declared only": "dim"}
    for r in results:
        probed = "-" if r.probed is None else f"{r.probed:.7g}"
        status = Text(r.status, style=styles.get(r.status, "yellow"))  # a Text: [torch] is no markup
        table.add_row(r.entry.api, r.entry.argument, f"{r.entry.declared:g}", probed, r.version or "-", status)
    return table


CHIP_FIGURES = ("ub_usable_bytes", "vector_cores", "forward_kernel", "backward_kernel", "tiling", "aclnn",
                "allowed")


def chip_table() -> Table:
    """One row per cann --profile: the figures the emulator runs on (their sources follow the table)."""
    from conformance.npu_impl.chips import DEFAULT_PROFILE, PROFILES

    table = Table(title="emulated CANN chip profiles (cann --profile; sources below)")
    for column in ("profile", "usable UB (B)", "vector cores", "forward", "backward", "aclnn", "gate allows"):
        table.add_column(column, overflow="fold")
    for name, p in PROFILES.items():
        table.add_row(name + (" (default)" if name == DEFAULT_PROFILE else ""), f"{p.ub_usable_bytes:,}",
                      str(p.vector_cores), p.forward_kernel, p.backward_kernel,
                      "yes" if p.aclnn_supported else "not supported",
                      ", ".join(sorted(p.allowed)) or "-")
    return table


def chip_sources() -> list[str]:
    """``profile figure: source`` for every figure of ``chip_table``."""
    from conformance.npu_impl.chips import PROFILES

    return [f"{name} {figure}: {p.source(figure)}" for name, p in PROFILES.items() for figure in CHIP_FIGURES]


def close_workers(results: tuple[ProbeResult, ...]) -> None:
    """End the workers the probes started (Paddle's, MindSpore's), not the others of this process."""
    import sys

    client = sys.modules.get("conformance.worker.client")
    if client is None:
        return
    from conformance.backends import default_worker
    from conformance.errors import BackendUnavailable

    for name in sorted({r.entry.environment for r in results if r.entry.environment}):
        try:
            spec = default_worker(name)
        except BackendUnavailable:  # not set up: no worker started
            continue
        if spec is not None:
            client.close(spec)


def execute(args: argparse.Namespace) -> int:
    """Exit 0 when every probed default agrees with its declaration, 1 otherwise."""
    results = probe_all()
    console = Console()
    console.print(_table(results))
    console.print("sources: " + "; ".join(f"{r.entry.api}: {r.entry.source}" for r in results), style="dim")
    console.print(chip_table())
    for line in chip_sources():
        console.print(line, style="dim", highlight=False, markup=False)
    unprobed: dict[str, list[str]] = {}
    for r in results:
        if has_probe(r.entry) and r.probed is None:
            unprobed.setdefault(r.status, []).append(r.entry.api)
    for why, apis in unprobed.items():
        console.print(Text(f"{why}: {', '.join(apis)}", style="yellow"), highlight=False)
    disagreements = [r.entry.api for r in results if r.status == "DISAGREES"]
    if disagreements:
        names = ", ".join(disagreements)
        console.print(f"[bold red]declared default disagrees with the installed framework: {names}[/]")
        close_workers(results)
        return 1
    console.print("every probed default agrees with its declaration")
    close_workers(results)
    return 0

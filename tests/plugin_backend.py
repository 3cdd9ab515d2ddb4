"""A user's own backend package, as the entry-point registry sees it (test fixture)."""
from __future__ import annotations

from conformance.frameworks.golden_backend import GoldenBackend

BOUNDARY = (3, 17)


class PluginBackend(GoldenBackend):
    """The golden reference under another name, with facts of its own."""

    name = "plugin"
    default_suite = True
    extra_pairs = (("float32", "float16"),)

    def supports(self, dtype: str, out_dtype: str, direction: str) -> bool:
        return dtype == "float32" and out_dtype in ("float32", "float16")

    def skip_reason(self, dtype: str, out_dtype: str, direction: str) -> str:
        return f"the plugin has no {dtype}"

    def boundary_sizes(self, dtype: str, out_dtype: str, direction: str) -> tuple[int, ...]:
        return BOUNDARY


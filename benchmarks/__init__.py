"""Throughput figures, printed as ratios measured side by side in one run (not timed tests)."""

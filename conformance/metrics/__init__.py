"""Metrics: how far an output is from the golden, exactly, merged across chunks."""

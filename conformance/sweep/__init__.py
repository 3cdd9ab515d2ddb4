"""Exhaustive sweeps: every fp32 pattern, or every 16-bit x and slope, in resumable chunks."""

"""The numba twins of triage's numpy slope passes."""

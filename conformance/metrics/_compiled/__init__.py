"""The numba twins of the metrics' numpy paths."""

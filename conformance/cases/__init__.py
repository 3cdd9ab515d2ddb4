"""What to feed: edge pools, hypothesis strategies, exhaustive sweeps and the reproducer corpus."""

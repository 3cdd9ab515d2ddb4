"""Adapters for frameworks under test that are not part of the main environment's core
(each imports its framework lazily and declares its own facts)."""

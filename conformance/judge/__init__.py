"""Judge: one backend result -> one judged row; merges, the gate, baselines, agreement."""

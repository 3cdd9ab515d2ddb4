"""Reproducers of failing rows: the smallest failing part of a batch, and its ``.npz`` file.

A row's spec is read for its fields only (backend, profile, variant, dtypes, direction, alpha,
worker), so this module needs nothing of the suite that runs the rows.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

import numpy as np

from conformance.cases import corpus
from conformance.cases.batches import InputBatch
from conformance.records import Finding, Row

RowSpec = Any  # conformance.suite.RowSpec: its fields are read


def take(batch: InputBatch, index: np.ndarray, *, label: str) -> InputBatch:
    x = batch.x.reshape(-1)[index]
    dy = None if batch.dy is None else batch.dy.reshape(-1)[index]
    return InputBatch(label, x, dy)


def prefix_lengths(n: int) -> list[int]:
    """1..16, then doubling, then n: the candidate lengths for prefix reduction."""
    lengths = list(range(1, min(n, 16) + 1))
    k = 32
    while k < n:
        lengths.append(k)
        k *= 2
    return lengths + ([n] if n not in lengths else [])


def candidates(batch: InputBatch, finding: Finding) -> Iterable[InputBatch]:
    """Ever larger candidate reproducers: single offenders, all offenders, then prefixes."""
    n = batch.x.size
    hits = [ex.index for ex in finding.examples if 0 <= ex.index < n and ex.x is not None]
    for i in hits:
        yield take(batch, np.array([i]), label="reproducer")
    if len(hits) > 1:
        yield take(batch, np.array(hits), label="reproducer")
    for k in prefix_lengths(n):
        yield take(batch, np.arange(k), label="reproducer")


def smallest(batch: InputBatch, finding: Finding, *, fails: Callable[[InputBatch], bool]) -> InputBatch:
    """The smallest candidate that still ``fails`` (with ``finding.category``).

    Deterministic reduction rather than hypothesis shrinking: the row's inputs
    come from several sources (sweeps, pools, drawn tensors), so we reduce the
    failing batch itself.  Value defects reduce to one offending element;
    tile-plan defects (tails, core ranges, red zones) to the shortest failing prefix.
    """
    for candidate in candidates(batch, finding):
        if candidate.x.size and fails(candidate):
            return candidate
    return replace(batch, label="reproducer")


def failing_part(parts: Sequence[tuple[InputBatch, Row]], category: str) -> Optional[tuple[InputBatch, Finding]]:
    """The smallest batch whose own row fails with ``category``, with that row's finding
    (its example indices point into this batch, unlike the merged row's)."""
    failing = [(b, f) for b, r in parts for f in r.findings if f.category == category and f.gated]
    return min(failing, key=lambda bf: bf[0].x.size) if failing else None


def reproducer_path(spec: RowSpec, category: str, *, results_dir: Path) -> Path:
    """The row's one spelling and the category, as a file name: ``torch_fp16_forward_alpha_0.2-alpha-mismatch.npz``."""
    text = f"{spec}-{category}"
    return results_dir / (re.sub(r"[^A-Za-z0-9.+-]+", "_", text).strip("_") + ".npz")


def save_reproducer(spec: RowSpec, batch: InputBatch, finding: Finding, *, results_dir: Path) -> Path:
    out = spec.out_dtype if spec.out_dtype != spec.dtype else None
    case = corpus.Case(batch.x, spec.alpha, spec.direction, dy=batch.dy, out_dtype=out)
    rep = corpus.Reproducer(case, spec.backend, spec.profile, spec.variant, finding.category,
                            finding.summary, str(spec), spec.worker.command if spec.worker else None)
    return corpus.save(rep, reproducer_path(spec, finding.category, results_dir=results_dir))

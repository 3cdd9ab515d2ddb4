"""Quantized outputs in another layout: the exact codes moved by a transform of
:mod:`~conformance.triage.layout` (an axis permutation, NCHW/NHWC to or from NC1HWC0
with C0 = 32 for 1-byte codes, zero padding read as code 0) reproduce the actual codes, and
the quantized rules, run on the input codes moved the same way and in the order the kernel
computed them, reproduce the rest.

It is claimed only when together they reproduce every differing code: ``layout`` for the
codes the move alone explains, the rules' categories (with the transform in their detail)
for the others.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Optional

import numpy as np

from conformance.triage.layout import Transform, transforms
from conformance.triage.quantized import QuantBatch, QuantClaim, code_distance, triage_quantized

__all__ = ["LAYOUT_MAX_CODES", "claim_code_layout"]

LAYOUT_MAX_CODES = 1 << 24  # the proof reads the whole tensor: larger dumps are not tried
_SAMPLE = 4096  # differing codes a transform is first scored on
_PADDING = -1  # layout's source of a padded position (the memory holds zeros)


def _moved(values: np.ndarray, src: np.ndarray) -> np.ndarray:
    return np.where(src == _PADDING, 0, values[np.maximum(src, 0)]).astype(values.dtype)


def _likely(batch: QuantBatch, shape: tuple[int, ...], wrong: np.ndarray) -> Iterator[tuple[Transform, np.ndarray]]:
    """Transforms under which at least half of a sample of the differing codes are the exact
    codes moved, with each one's source of every position."""
    pick = wrong[:: max(1, wrong.size // _SAMPLE)]
    everywhere = np.arange(batch.actual.size)
    for t in transforms(shape, itemsize=batch.actual.dtype.itemsize):
        if np.mean(_moved(batch.golden, t.source(pick)) == batch.actual[pick]) >= 0.5:
            yield t, t.source(everywhere)


def _proved(batch: QuantBatch, t: Transform, src: np.ndarray) -> Optional[list[tuple[QuantClaim, QuantBatch]]]:
    moved = _moved(batch.golden, src)
    wrong = batch.actual != batch.golden
    alone = wrong & (batch.actual == moved)
    padded = src == _PADDING
    if np.count_nonzero(alone) * 2 < np.count_nonzero(wrong) or (batch.actual[padded] != 0).any():
        return None
    # the rules run on the positions holding a moved code, in the order the kernel computed
    # them (a position split lies in its memory order); the findings show the output's positions
    held = np.flatnonzero(~padded)
    held = held[np.argsort(src[held], kind="stable")]
    rest = QuantBatch(_moved(batch.codes, src)[held], batch.alpha, batch.params, moved[held], batch.actual[held],
                      where=src[held], numel=batch.size)
    claims = triage_quantized(rest)
    rest = replace(rest, where=held)
    if any(c.category == "unexplained" for c in claims):
        return None
    index = np.flatnonzero(alone)
    worst = int(code_distance(batch.actual[index], batch.golden[index]).max())
    found = QuantClaim("layout", index, f"the exact codes {t.name} reproduce these codes",
                       {**t.detail, "explained": index.size, "contradicted": 0, "max_code_diff": worst})
    differs = wrong[held]  # a code right where it is but not where it came from is not a finding
    kept = [(c, c.index[differs[c.index]]) for c in claims]
    return [(found, batch)] + [(QuantClaim(c.category, index, c.summary, {**c.detail, "layout": t.name,
                                                                        "explained": rest.count(index)}), rest)
                               for c, index in kept if index.size]


def claim_code_layout(batch: QuantBatch, shape: tuple[int, ...]) -> Optional[list[tuple[QuantClaim, QuantBatch]]]:
    """The claims (each with the batch its indices refer to) of the first transform that, with
    the quantized rules on the moved codes, reproduces every differing code of ``batch`` (the
    whole tensor, in order); None when none does."""
    wrong = np.flatnonzero(batch.actual != batch.golden)
    if not wrong.size or batch.actual.size > LAYOUT_MAX_CODES:
        return None
    for t, src in _likely(batch, shape, wrong):
        claims = _proved(batch, t, src)
        if claims is not None:
            return claims
    return None

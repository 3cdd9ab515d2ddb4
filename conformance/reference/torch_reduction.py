"""dweight's sum as torch adds it on CPU: ``at::sum``'s cascade sum (``aten/src/ATen/native/cpu/SumKernel.cpp``).

torch's PReLU backward writes each share ``x > 0 ? 0 : x*dy`` into a tensor of the input's shape, and
autograd sums it to the weight's shape (``at::sum_to``).  The reduction's ``TensorIterator`` merges
adjacent axes of one kind (reduced or kept) of the contiguous input and drops axes of length 1 (the
simplification :func:`conformance.reference.eigen_reduction.merged` models), hands the two innermost
merged axes to ``cascade_sum`` and loops over the outer ones itself, each call **adding** its sums into
the output (``CastStoreAccumulate``: ``*out += sum``), so the outer reduced axes (N in NCHW) are a
sequential float32 sum of the inner ones' sums.  ``cascade_sum``:

- the innermost axis reduced (a kept axis before it): per kept index, ``vectorized_inner_sum`` when the
  row has at least ``WIDTH`` elements: its whole vectors of ``WIDTH`` lanes summed lane-wise by
  ``row_sum`` (rows of four vectors, the four partial vectors summed by ``multi_row_sum``'s cascade, the
  vectors after the last whole row added to the first partial, the partials then added in order); the
  elements after the last whole vector added to a scalar from 0, then the lanes in order.  A shorter row:
  the same ``row_sum`` on scalars (``scalar_inner_sum``);
- the innermost axis kept (a reduced axis before it): ``vectorized_outer_sum`` over blocks of
  ``4 * WIDTH`` kept elements (each lane its own cascade over the reduced axis), then blocks of ``WIDTH``
  (``row_sum`` down the reduced axis), then one by one; fewer than ``WIDTH`` kept elements:
  ``scalar_outer_sum`` (blocks of four, then one by one).

``multi_row_sum``'s cascade: four levels; level 0 adds ``2**p`` rows (``p = max(4, ceil(log2(n)) // 4)``),
then is added into level 1 and cleared, carrying further up each time the count of rows is a multiple of the
next level's span; the rows left over go into level 0, and the levels are finally added into it in order.
Measured bit for bit against torch 2.13.0 (float32, ``WIDTH`` 8): docs/reference/prelu.md.  Not modelled:
a weight of one element on more than 32,768 elements (``parallel_reduce`` then splits the full reduction
over threads).
"""
from __future__ import annotations

import numpy as np

from conformance.reference.eigen_reduction import merged

WIDTH = 8  # lanes of the float32 vectors SumKernel.cpp's sum runs on (measured)
LEVELS = 4  # multi_row_sum's num_levels
ILP = 4  # row_sum's ilp_factor


def _levels_power(size: int) -> int:
    return max(4, (int(size - 1).bit_length() if size > 1 else 0) // LEVELS)


def multi_row_sum(rows: np.ndarray) -> np.ndarray:
    """``rows`` (n, ...) summed down their first axis by torch's cascade, each lane on its own."""
    size, acc = rows.shape[0], np.zeros((LEVELS, *rows.shape[1:]), dtype=rows.dtype)
    power = _levels_power(size)
    step, i = 1 << power, 0
    while i + step <= size:
        for _ in range(step):
            acc[0] = acc[0] + rows[i]
            i += 1
        for j in range(1, LEVELS):
            acc[j], acc[j - 1] = acc[j] + acc[j - 1], 0
            if i & ((step - 1) << (j * power)):
                break
    for r in rows[i:]:
        acc[0] = acc[0] + r
    for j in range(1, LEVELS):
        acc[0] = acc[0] + acc[j]
    return acc[0]


def row_sum(items: np.ndarray) -> np.ndarray:
    """torch's ``row_sum``: ``items`` (n, ...) read as rows of ``ILP``, those summed by the cascade, the
    items after the last whole row added to the first partial, the partials then in order."""
    whole = items.shape[0] // ILP
    partial = multi_row_sum(items[:whole * ILP].reshape((whole, ILP, *items.shape[1:])))
    for item in items[whole * ILP:]:
        partial[0] = partial[0] + item
    total = partial[0]
    for k in range(1, ILP):
        total = total + partial[k]
    return total


def inner_sum(row: np.ndarray) -> np.generic:
    """One contiguous reduced row: ``vectorized_inner_sum`` (``scalar_inner_sum`` when shorter than a vector)."""
    vectors = row.size // WIDTH
    if not vectors:
        return row_sum(row)
    lanes = row_sum(row[:vectors * WIDTH].reshape(vectors, WIDTH))
    total = row.dtype.type(0)
    for v in (*row[vectors * WIDTH:], *lanes):
        total = total + v
    return total


def outer_sum(block: np.ndarray) -> np.ndarray:
    """``block`` (reduced, kept), the kept axis contiguous: ``vectorized_outer_sum`` or ``scalar_outer_sum``."""
    kept, out, j = block.shape[1], np.zeros(block.shape[1], dtype=block.dtype), 0
    spans = (4 * WIDTH, WIDTH) if kept >= WIDTH else (4,)
    for span in spans:
        while j + span <= kept:
            part = block[:, j:j + span]
            out[j:j + span] = multi_row_sum(part) if span != WIDTH else row_sum(part)
            j += span
    for c in range(j, kept):
        out[c] = row_sum(block[:, c].copy())
    return out


def cascade_sums(shares: np.ndarray, reduced: tuple[bool, ...]) -> np.ndarray:
    """Per kept index (memory order), the ``shares`` (the input's shape, in the accumulator's dtype) summed
    over the ``reduced`` axes as torch's ``at::sum`` does on CPU."""
    dims, kinds = merged(shares.shape, reduced)
    if len(dims) < 2:
        dims, kinds = (1, *dims), (False, *kinds)
    t = np.ascontiguousarray(shares).reshape(dims)
    out_shape = tuple(n for n, r in zip(dims, kinds) if not r)
    out = np.zeros(out_shape or (1,), dtype=shares.dtype)
    for outer in np.ndindex(*dims[:-2]):
        at = tuple(i for i, r in zip(outer, kinds) if not r)
        if kinds[-1]:
            sums = np.array([inner_sum(r) for r in t[outer]], dtype=shares.dtype)
        else:
            sums = outer_sum(t[outer])
        out[at] = out[at] + sums if out_shape else out + sums
    return out.reshape(-1)

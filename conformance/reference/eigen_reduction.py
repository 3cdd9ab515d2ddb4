"""dweight's sum as TensorFlow adds it on CPU: Eigen's tensor reduction, in the input's 16-bit dtype.

TensorFlow's ``Sum`` first simplifies the shape (``tensorflow/core/kernels/reduction_ops_common.cc``,
``ReductionHelper::Simplify``: axes of length 1 dropped, adjacent axes both reduced or both kept merged),
then hands it to Eigen (``unsupported/Eigen/CXX11/src/Tensor/TensorReduction.h``), whose order depends
on where the reduced axes are:

- one reduced axis, the innermost (``InnerMostDimReducer``, vectorised): lanes of ``PACKET`` elements
  (Eigen's ``Packet8h``), four packet accumulators once a row has ``4 * PACKET`` elements (each taking
  every fourth packet, then added into the first in order), the remaining whole packets into the first,
  the elements after the last whole packet into a scalar sum; the first accumulator's lanes summed in
  float32 by ``predux`` (halves folded: lanes i + 4, then (0 + 2) + (1 + 3)) and rounded, then added to
  the scalar sum.  A row longer than ``PACKET * 200`` (``LeafSize<half>``) is split at a packet boundary
  into two halves reduced alone, the halves then added;
- two reduced axes or more (``GenericDimReducer``): one element at a time, the **last** reduced axis in
  the outermost loop and the first in the innermost (NCHW with a weight per channel: over N for each
  position of H*W in turn).

Every addition is a float16 one (Eigen's ``half`` adds in float32 and rounds), the accumulator starting
at +0.  Measured against tensorflow-cpu 2.21 on float16 (docs/reference/prelu.md).  A reduced axis with
kept axes after it (``InnerMostDimPreserver``, channels last) is summed as the generic reducer does, not
verified.
"""
from __future__ import annotations

import numpy as np

PACKET = 8  # Eigen's Packet8h: 8 float16 lanes (AVX/AVX2 builds)
LEAF = 200  # Eigen's LeafSize<half>()
ACCUMULATORS = 4  # packet accumulators of InnerMostDimReducer


def merged(shape: tuple[int, ...], reduced: tuple[bool, ...]) -> tuple[tuple[int, ...], tuple[bool, ...]]:
    """``shape`` as TensorFlow's ``ReductionHelper`` simplifies it: axes of length 1 dropped, adjacent
    axes of one kind (reduced or kept) merged; with each merged axis's kind."""
    dims: list[int] = []
    kinds: list[bool] = []
    for n, r in zip(shape, reduced):
        if n == 1:
            continue
        if kinds and kinds[-1] == r:
            dims[-1] *= n
        else:
            dims.append(n)
            kinds.append(r)
    return tuple(dims), tuple(kinds)


def _add(total: np.generic, value: np.generic, acc: np.dtype) -> np.generic:
    """One addition in ``acc``: computed in float32, rounded to ``acc``."""
    return acc.type(np.float32(total) + np.float32(value))


def _sequential(values: np.ndarray, acc: np.dtype) -> np.generic:
    total = acc.type(0)
    for v in values:
        total = _add(total, v, acc)
    return total


def _predux(lanes: np.ndarray) -> np.float32:
    """Eigen's ``predux`` of a float16 packet: its lanes in float32, halves folded, rounded at the end."""
    a = lanes.astype(np.float32)
    while a.size > 4:
        a = (a[: a.size // 2] + a[a.size // 2:]).astype(np.float32)
    return np.float32(np.float32(a[0] + a[2]) + np.float32(a[1] + a[3]))


def _packet_add(p: np.ndarray, q: np.ndarray, acc: np.dtype) -> np.ndarray:
    return (p.astype(np.float32) + q.astype(np.float32)).astype(acc)


def innermost(row: np.ndarray, acc: np.dtype, *, first: int = 0) -> np.generic:
    """One row reduced by Eigen's vectorised ``InnerMostDimReducer`` (``first``: the row's flat offset,
    where a long row is split)."""
    n = row.size
    if n > PACKET * LEAF:
        split = PACKET * -(-(first + -(-n // 2)) // PACKET)
        left = min(split - first, n)
        total = _add(acc.type(0), innermost(row[:left], acc, first=first), acc)
        return _add(total, innermost(row[left:], acc, first=split), acc) if left < n else total
    packets = [row[j:j + PACKET] for j in range(0, (n // PACKET) * PACKET, PACKET)]
    first_acc = np.zeros(PACKET, dtype=acc)
    start = 0
    if n >= ACCUMULATORS * PACKET:
        unrolled = (n // (ACCUMULATORS * PACKET)) * ACCUMULATORS
        accs = [np.zeros(PACKET, dtype=acc) for _ in range(ACCUMULATORS)]
        for j in range(unrolled):
            accs[j % ACCUMULATORS] = _packet_add(accs[j % ACCUMULATORS], packets[j], acc)
        first_acc = accs[0]
        for other in accs[1:]:
            first_acc = _packet_add(first_acc, other, acc)
        start = unrolled
    for p in packets[start:]:
        first_acc = _packet_add(first_acc, p, acc)
    scalar = _sequential(row[len(packets) * PACKET:], acc)
    return _add(scalar, acc.type(_predux(first_acc)), acc)


def eigen_sums(shares: np.ndarray, reduced: tuple[bool, ...], acc: np.dtype) -> np.ndarray:
    """Per kept index (in memory order), the ``shares`` (an array of the input's shape) summed over the
    ``reduced`` axes as TensorFlow's CPU ``Sum`` does in ``acc``."""
    dims, kinds = merged(shares.shape, reduced)
    t = np.ascontiguousarray(shares).reshape(dims)
    kept = [k for k, r in enumerate(kinds) if not r]
    summed = [k for k, r in enumerate(kinds) if r]
    rows = np.transpose(t, kept + summed[::-1]).reshape(int(np.prod([dims[k] for k in kept])), -1)
    if summed == [len(dims) - 1]:
        width = rows.shape[1]
        return np.array([innermost(r, acc, first=g * width) for g, r in enumerate(rows)], dtype=acc)
    return np.array([_sequential(r, acc) for r in rows], dtype=acc)

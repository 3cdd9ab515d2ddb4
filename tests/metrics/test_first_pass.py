"""The compiled scan's first pass cut into ranges on several threads is the one pass over the chunk,
bit for bit: the mismatches, the special matching elements, the counts, the largest magnitude,
the golden it computes and the cosine sums."""
from __future__ import annotations

import numpy as np
import pytest

from conformance import jit
from conformance.judge import chunked
from conformance.metrics import chunk_golden, first_pass
from conformance.metrics.exact import DOT_PIECE
from conformance.records import Chunk
from conformance.reference import golden

pytestmark = pytest.mark.skipif(not jit.enabled(), reason="the compiled paths are off")

N = 3 * DOT_PIECE + 1_000  # whole pieces summed from blocks, and a short last one


def _chunk(*, special: bool) -> tuple[Chunk, np.ndarray]:
    """fp32 with a torch-default-slope defect on every 53rd element (and NaN and infinities)."""
    x = np.random.default_rng(5).standard_normal(N).astype(np.float32)
    if special:
        x[::997], x[5::1009], x[11::1013] = np.nan, np.inf, np.float32(-1e-40)
    exact = golden.forward(x, 0.2)
    actual = exact.copy()
    actual[::53] = golden.forward(x[::53], 0.01)
    return Chunk(7, x, None, actual), exact


def _found(chunk: Chunk, *, ranges: int, monkeypatch: pytest.MonkeyPatch) -> tuple:
    """What the first pass gives on ``ranges`` threads, the golden computed in the scan."""
    with monkeypatch.context() as m:
        m.setenv("CONFORMANCE_THREADS", str(ranges))
        m.setattr(first_pass, "RANGE", 1)
        expected = np.zeros(N, dtype=np.float32)  # the memory the scan computes the golden into
        bits, masks = chunked._operands(chunk, expected)
        scan = chunk_golden.scan_golden(chunk, expected, direction="forward", alpha=0.2, out_dtype="float32")
        where = np.full(N + 9, -1, dtype=np.int32)  # the kept column of a tensor under 2^31 elements
        room = first_pass.Room()
        end, top, kinds, sums = first_pass.find(bits, scan, offset=chunk.offset, where=where, start=3, room=room,
                                                masks=(*masks.out, masks.x_exp))
    return (end, int(top), kinds.tolist(), sums.tobytes(), where[3:end].tolist(), room.at[:kinds[0]].tolist(),
            expected.tobytes())


@pytest.mark.parametrize("special", [False, True], ids=["finite", "nan-inf-subnormal"])
def test_the_first_pass_on_several_threads_is_the_one_pass(special: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    chunk, exact = _chunk(special=special)
    one = _found(chunk, ranges=1, monkeypatch=monkeypatch)
    for ranges in (2, 3):
        assert _found(chunk, ranges=ranges, monkeypatch=monkeypatch) == one, ranges
    end, _, kinds, _, where, special_at, expected = one
    differ = np.flatnonzero(chunk.actual.view(np.uint32) != exact.view(np.uint32))
    differ = differ[~(np.isnan(chunk.actual[differ]) & np.isnan(exact[differ]))]
    assert where == (differ + chunk.offset).tolist() and end == 3 + differ.size  # written after ``start``
    assert expected == exact.tobytes() and kinds[0] == len(special_at) and (kinds[0] > 0) == special


def test_ranges_are_whole_runs_one_per_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    from conformance.metrics._compiled.metric_loops import RUN

    monkeypatch.setenv("CONFORMANCE_THREADS", "2")
    n = 2 * first_pass.RANGE + 777
    assert first_pass._cuts(n) == [(0, n // 2 // RUN * RUN), (n // 2 // RUN * RUN, n)]
    assert first_pass._cuts(first_pass.RANGE - 1) == [(0, first_pass.RANGE - 1)]  # short: one range
    monkeypatch.setattr(first_pass, "RANGE", 1)
    assert first_pass._cuts(RUN // 2) == [(0, RUN // 2)]  # less than a run: one range

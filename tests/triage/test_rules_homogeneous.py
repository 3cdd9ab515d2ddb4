"""A batch with no contrasting evidence (one chunk of an exhaustive sweep: subnormals only)
names the narrowest rule that reproduces it, the same as a batch spanning every value."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.config import default_config
from conformance.judge.evaluate import evaluate
from conformance.records import BackendResult
from conformance.reference import golden as ref
from conformance.reference.semantics import Semantics

CHUNK = 1 << 16
# (id, first fp32 pattern): positive subnormals, negative subnormals, negative normals whose
# product with 0.2 is subnormal
RANGES = [("positive-subnormal-x", 0x00000001), ("negative-subnormal-x", 0x80000001),
          ("subnormal-products", 0x80800000)]


@pytest.mark.parametrize("first", [r[1] for r in RANGES], ids=[r[0] for r in RANGES])
def test_a_chunk_of_flushed_subnormals_is_subnormal_flush(first: int) -> None:
    x = np.arange(first, first + CHUNK, dtype=np.uint32).view(np.float32)
    flushed = ref.forward(x, 0.2, semantics=Semantics(daz=True, ftz=True))
    assert np.count_nonzero(flushed.view(np.uint32) != ref.forward(x, 0.2).view(np.uint32)) > CHUNK // 2
    row = evaluate(x, 0.2, BackendResult(flushed), direction="forward", backend="tensorflow",
                   config=default_config())
    assert [f.category for f in row.findings] == ["subnormal-flush"]
    # the same behaviour with contrasting values in the batch is named the same
    mixed = np.concatenate([x, np.linspace(-100, 100, CHUNK, dtype=np.float32)])
    row = evaluate(mixed, 0.2, BackendResult(ref.forward(mixed, 0.2, semantics=Semantics(daz=True, ftz=True))),
                   direction="forward", backend="tensorflow", config=default_config())
    assert {f.category for f in row.findings} == {"subnormal-flush"}

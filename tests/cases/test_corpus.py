"""The Case record's readable id, .npz reproducers and exhaustive sweeps."""
from __future__ import annotations

import numpy as np
import pytest

from conformance.cases import corpus
from conformance.cases.exhaustive import exhaustive16, float32_chunks, random_bits, shuffled16
from conformance.dtypes import bfloat16, to_bits
from conformance.errors import CorpusError


@pytest.mark.parametrize("case, text", [
    (corpus.Case(np.array([-0.0], np.float16), 0.2, expected=np.array([-0.0], np.float16)),
     "leaky_relu(x=-0.0, alpha=0.2) -> -0.0"),
    (corpus.Case(np.array(np.nan, np.float32), 0.01), "leaky_relu(x=nan, alpha=0.01)"),
    (corpus.Case(np.zeros(3, bfloat16), 0.3, "backward", dy=np.ones(3, bfloat16)),
     "leaky_relu_backward(dy=bf16[3], x=bf16[3], alpha=0.3)"),
    (corpus.Case(np.array([-70000.0], np.float32), 0.2, out_dtype="float16",
                 expected=np.array([-14000.0], np.float16)),
     "leaky_relu(x=-70000.0, alpha=0.2, out=fp16) -> -14000.0"),
])
def test_case_str_is_the_pytest_id(case: corpus.Case, text: str) -> None:
    assert str(case) == text


def _roundtrip(tmp_path, rep: corpus.Reproducer) -> corpus.Reproducer:
    return corpus.load(corpus.save(rep, tmp_path / "r.npz"))


def test_reproducer_roundtrip_keeps_bits_and_metadata(tmp_path) -> None:
    x = np.array([0x7F81, 0xFFC1, 0x8001, 0x0000, 0x8000], np.uint16).view(bfloat16)  # sNaN, -qNaN, -sub, +-0
    dy = np.array([1, 2, 3, 4, 5], np.float32).astype(bfloat16)
    rep = corpus.Reproducer(corpus.Case(x, 0.2, "backward", dy=dy), "cann", "ascend910b1", "tail-overrun",
                            "tail-block", "summary text", "label")
    back = _roundtrip(tmp_path, rep)
    assert to_bits(back.case.x).tolist() == to_bits(x).tolist()
    assert to_bits(back.case.dy).tolist() == to_bits(dy).tolist()
    assert back.case.x.dtype == bfloat16 and back.case.direction == "backward"
    assert (back.backend, back.profile, back.variant, back.category) == ("cann", "ascend910b1", "tail-overrun",
                                                                         "tail-block")
    assert back.case.out_dtype is None and back.case.alpha == 0.2


def test_reproducer_loads_without_pickle(tmp_path) -> None:
    path = corpus.save(corpus.Reproducer(corpus.Case(np.ones(2, np.float16), 1.5), "torch"), tmp_path / "a.npz")
    with np.load(path, allow_pickle=False) as data:
        assert all(data[k].dtype != object for k in data.files)


@pytest.mark.parametrize("content, message", [
    (None, "does not exist"),
    (b"not a zip", "cannot read"),
])
def test_bad_reproducer_files_give_one_line_errors(tmp_path, content, message: str) -> None:
    path = tmp_path / "bad.npz"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(CorpusError, match=message) as err:
        corpus.load(path)
    assert "\n" not in str(err.value)


def test_pickled_or_foreign_npz_is_refused(tmp_path) -> None:
    path = tmp_path / "obj.npz"
    np.savez(path, x_bits=np.array([object()], dtype=object))
    with pytest.raises(CorpusError, match="cannot read reproducer .*allow_pickle=False"):
        corpus.load(path)
    np.savez(tmp_path / "other.npz", a=np.ones(2))
    with pytest.raises(CorpusError, match="not a leakyrelu-reproducer"):
        corpus.load(tmp_path / "other.npz")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_exhaustive16_and_shuffle_cover_every_pattern(dtype: str) -> None:
    assert np.array_equal(to_bits(exhaustive16(dtype)), np.arange(1 << 16, dtype=np.uint16))
    shuffled = shuffled16(dtype, seed=1)
    assert np.array_equal(np.sort(to_bits(shuffled)), np.arange(1 << 16, dtype=np.uint16))
    assert not np.array_equal(to_bits(shuffled), to_bits(exhaustive16(dtype)))


def test_float32_chunks_tile_the_range() -> None:
    chunks = list(float32_chunks(start=0x7F7FFFF0, stop=0x7F800010, chunk=7))
    bits = np.concatenate([c.view(np.uint32) for c in chunks])
    assert np.array_equal(bits, np.arange(0x7F7FFFF0, 0x7F800010, dtype=np.uint32))
    with pytest.raises(ValueError, match=r"0 <= start <= stop <= 2\*\*32, got \[5, 4\)"):
        next(float32_chunks(start=5, stop=4))


def test_random_bits_are_seeded_and_full_width() -> None:
    a, b = random_bits("float64", 1000, seed=4), random_bits("float64", 1000, seed=4)
    assert np.array_equal(to_bits(a), to_bits(b))
    assert (to_bits(a) >> np.uint64(63)).any()  # the sign bit is reached

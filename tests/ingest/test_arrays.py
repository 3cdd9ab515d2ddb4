"""The array reader's own rules: which ``.npz`` member a flag reads, compressed members of every
order and size read whole and exactly, and a member shorter than its header declares refused by
the size check, naming the member."""
from __future__ import annotations

import io
import os
import re
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
from numpy.lib import format as npy_format

from conformance.dtypes import info
from conformance.errors import UsageError
from conformance.ingest import arrays
from conformance.ingest.arrays import _fill, load, load_array, read, table_dtype

A = np.arange(15, dtype=np.float32).reshape(3, 5) / 7
B = -np.arange(4, dtype=np.float32)


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _npz(path: Path, members: dict[str, bytes], *, compress: int = zipfile.ZIP_DEFLATED) -> str:
    with zipfile.ZipFile(path, "w", compression=compress) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return str(path)


@pytest.mark.parametrize("compress", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_an_npz_of_several_arrays_gives_the_one_named_after_the_flag(tmp_path: Path, compress: int) -> None:
    path = _npz(tmp_path / "both.npz", {"x.npy": _npy(B), "y.npy": _npy(A)}, compress=compress)
    np.testing.assert_array_equal(load_array(path, flag="--y", bits_dtype=None), A)
    np.testing.assert_array_equal(load_array(path, flag="--x", bits_dtype=None), B)


def test_an_npz_of_one_array_gives_it_whatever_its_name_and_folders_are_not_arrays(tmp_path: Path) -> None:
    path = _npz(tmp_path / "one.npz", {"dumps/": b"", "dumps/output.npy": _npy(A)})
    np.testing.assert_array_equal(load_array(path, flag="--y", bits_dtype=None), A)


def test_an_npz_of_several_arrays_none_named_after_the_flag_lists_them(tmp_path: Path) -> None:
    path = _npz(tmp_path / "two.npz", {"a.npy": _npy(A), "b.npy": _npy(B)})
    with pytest.raises(UsageError) as caught:
        load_array(path, flag="--y", bits_dtype=None)
    assert str(caught.value).startswith(f"--y {path}: .npz holds a, b; store one array or one named 'y'")


def test_a_member_named_without_npy_is_named_by_its_whole_name(tmp_path: Path) -> None:
    path = _npz(tmp_path / "plain.npz", {"y": _npy(A), "x.npy": _npy(B)})
    np.testing.assert_array_equal(load_array(path, flag="--y", bits_dtype=None), A)


def test_only_a_compressed_member_is_held_to_the_inflation_limit(tmp_path: Path, monkeypatch) -> None:
    from conformance.ingest import bounded

    monkeypatch.setattr(bounded, "MAX_INFLATED", 100)  # A's .npy is 188 bytes
    stored = _npz(tmp_path / "stored.npz", {"y.npy": _npy(A)}, compress=zipfile.ZIP_STORED)
    np.testing.assert_array_equal(load_array(stored, flag="--y", bits_dtype=None), A)
    packed = _npz(tmp_path / "packed.npz", {"y.npy": _npy(A)})
    with pytest.raises(UsageError) as caught:
        load_array(packed, flag="--y", bits_dtype=None)
    assert str(caught.value).startswith(f"--y {packed}: member y.npy declares")


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_a_header_longer_than_numpys_default_limit_is_read(tmp_path: Path, version: tuple[int, int]) -> None:
    text = repr({"descr": "<f4", "fortran_order": False, "shape": (4,)}) + " " * 20000 + "\n"
    size = (len(text).to_bytes(2, "little") if version == (1, 0) else len(text).to_bytes(4, "little"))
    path = tmp_path / "long_header.npy"
    path.write_bytes(b"\x93NUMPY" + bytes(version) + size + text.encode() + B.tobytes())
    np.testing.assert_array_equal(load_array(str(path), flag="--y", bits_dtype=None), B)


def test_a_pickle_is_refused_as_a_pickle(tmp_path: Path) -> None:
    import pickle

    path = tmp_path / "y.npy"
    path.write_bytes(pickle.dumps([1.0, 2.0]))
    with pytest.raises(UsageError, match="holds a pickled object"):
        load_array(str(path), flag="--y", bits_dtype=None)


def test_a_one_byte_body_is_read_from_the_file(tmp_path: Path) -> None:
    saved = [np.array([v], dtype=np.int8) for v in (-5, 7, 100)]  # held: no freed byte holds them
    for i, a in enumerate(saved):
        np.save(tmp_path / f"q{i}.npy", a)
    assert [read(str(tmp_path / f"q{i}.npy"), flag="--y").tolist() for i in range(3)] == [[-5], [7], [100]]


def test_a_torch_file_that_is_not_one_tensor_is_named_with_the_hint(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    path = tmp_path / "two.pt"
    torch.save({"a": torch.zeros(2), "b": torch.ones(2)}, path)
    with pytest.raises(UsageError) as caught:
        load_array(str(path), flag="--y", bits_dtype=None)
    assert str(caught.value).startswith(f"--y {path}") and "torch.save(tensor, path)" in str(caught.value)


def test_reading_a_large_dump_does_not_read_it_into_memory(tmp_path: Path) -> None:
    np.save(tmp_path / "big.npy", np.zeros(1 << 22, dtype=np.float32))  # 16 MiB
    tracemalloc.start()
    try:
        dump = load(str(tmp_path / "big.npy"), flag="--y", bits_dtype=None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert dump.size == 1 << 22 and peak < 1 << 20


@pytest.mark.parametrize("compress", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_a_fortran_ordered_member_keeps_its_element_order(tmp_path: Path, compress: int) -> None:
    values = np.random.default_rng(compress).standard_normal((7, 13)).astype(np.float32)
    stored = np.asfortranarray(values)  # held, so no buffer of these values is free for the reader to reuse
    path = _npz(tmp_path / "f.npz", {"y.npy": _npy(stored)}, compress=compress)
    got = load_array(path, flag="--y", bits_dtype=None)
    np.testing.assert_array_equal(got, values)
    assert got.flags.c_contiguous


@pytest.mark.parametrize("compress", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_an_empty_member_is_an_empty_array(tmp_path: Path, compress: int) -> None:
    path = _npz(tmp_path / "e.npz", {"y.npy": _npy(np.zeros((0, 4), np.float32))}, compress=compress)
    got = load_array(path, flag="--y", bits_dtype=None)
    assert got.shape == (0, 4) and got.dtype == np.float32


@pytest.mark.parametrize("compress", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_a_member_one_element_short_is_refused_by_the_size_check_naming_the_member(tmp_path: Path,
                                                                                   compress: int) -> None:
    data = _npy(A)[:-A.itemsize]
    path = _npz(tmp_path / "short.npz", {"y.npy": data}, compress=compress)
    with pytest.raises(UsageError, match=r"\(member y\.npy\): the header declares shape \(3, 5\)"):
        load_array(path, flag="--y", bits_dtype=None)


def test_a_member_with_bytes_after_its_body_gives_the_body(tmp_path: Path) -> None:
    path = _npz(tmp_path / "long.npz", {"y.npy": _npy(A) + b"trailing bytes"})
    np.testing.assert_array_equal(load_array(path, flag="--y", bits_dtype=None), A)


@pytest.mark.parametrize("step", [1, 3, 4, 10, 64])
def test_fill_reads_exactly_the_view_in_bounded_pieces(step: int) -> None:
    out = bytearray(10)
    _fill(memoryview(out), io.BytesIO(b"0123456789" + b"after"), name="m", step=step)
    assert bytes(out) == b"0123456789"


def test_fill_refuses_a_stream_that_ends_early_naming_the_member() -> None:
    with pytest.raises(EOFError, match="member y.npy ends early"):
        _fill(memoryview(bytearray(10)), io.BytesIO(b"0123"), name="y.npy", step=3)


def _bad_files(d: Path) -> dict[str, tuple[str, str]]:
    """A bad file of each kind and the place its message must name (flag, path, member)."""
    good = _npy(A)
    (d / "cut.npy").write_bytes(good[:-A.itemsize])
    (d / "text.npy").write_bytes(b"not an array at all")
    stored = _npz(d / "stored.npz", {"y.npy": good[:-A.itemsize]}, compress=zipfile.ZIP_STORED)
    packed = _npz(d / "packed.npz", {"y.npy": b"not an array at all"})
    unknown = b"\x93NUMPY\x09\x00" + good[8:]  # format version 9.0
    (d / "v9.npy").write_bytes(unknown)
    stored_v9 = _npz(d / "stored_v9.npz", {"y.npy": unknown}, compress=zipfile.ZIP_STORED)
    return {"npy-truncated": (str(d / "cut.npy"), ""), "npy-not-numpy": (str(d / "text.npy"), ""),
            "npy-unknown-version": (str(d / "v9.npy"), ""),
            "npz-stored-member": (stored, " (member y.npy)"), "npz-packed-member": (packed, " (member y.npy)"),
            "npz-stored-unknown-version": (stored_v9, " (member y.npy)")}


@pytest.mark.parametrize("case", ["npy-truncated", "npy-not-numpy", "npy-unknown-version", "npz-stored-member",
                                  "npz-packed-member", "npz-stored-unknown-version"])
def test_what_is_wrong_with_a_file_names_its_flag_path_and_member(tmp_path: Path, case: str) -> None:
    path, member = _bad_files(tmp_path)[case]
    with pytest.raises(UsageError) as caught:
        load_array(path, flag="--y", bits_dtype=None)
    assert str(caught.value).startswith(f"--y {path}{member}: ")


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_every_npy_format_version_is_read(tmp_path: Path, version: tuple[int, int]) -> None:
    path = tmp_path / "v.npy"
    with open(path, "wb") as handle:
        npy_format.write_array(handle, A, version=version)
    np.testing.assert_array_equal(load_array(str(path), flag="--y", bits_dtype=None), A)


@pytest.mark.parametrize("stored, bits_dtype, read_as", [
    (np.dtype("<f2"), None, "float16"), (np.dtype(">f2"), None, "float16"), (np.dtype("<V2"), None, "bfloat16"),
    (np.dtype("<u2"), "bfloat16", "bfloat16"), (np.dtype(">i2"), "float16", "float16"),
    (np.dtype("<f4"), "bfloat16", "float32"),
])
def test_the_table_dtype_of_each_stored_dtype(stored: np.dtype, bits_dtype, read_as: str) -> None:
    assert table_dtype(np.zeros(2, stored), flag="--y", bits_dtype=bits_dtype) == np.dtype(info(read_as).dtype)


@pytest.mark.parametrize("stored, says", [
    (np.dtype("<u2"), "pass --dtype bfloat16"), (np.dtype("<i2"), "pass --dtype bfloat16"),
    (np.dtype("V4"), "unsupported dtype"), (np.dtype([("a", "<u1"), ("b", "<u1")]), "unsupported dtype"),
    (np.dtype("O"), "object arrays"), (np.dtype("<i8"), "unsupported dtype"),
])
def test_a_stored_dtype_the_table_cannot_read_is_refused(stored: np.dtype, says: str) -> None:
    with pytest.raises(UsageError, match=re.escape(says)):
        table_dtype(np.zeros(2, stored), flag="--y", bits_dtype=None)


@pytest.mark.parametrize("compress", [None, zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_chunks_are_the_flat_elements_and_an_empty_range_is_empty(tmp_path: Path, compress) -> None:
    big = A.astype(">f4")
    if compress is None:
        np.save(tmp_path / "y.npy", big)
        path = str(tmp_path / "y.npy")
    else:
        path = _npz(tmp_path / "y.npz", {"y.npy": _npy(big)}, compress=compress)
    dump = load(path, flag="--y", bits_dtype=None)
    np.testing.assert_array_equal(dump.chunk(2, 7), A.reshape(-1)[2:7])
    np.testing.assert_array_equal(dump.chunk(10, 99), A.reshape(-1)[10:])
    assert dump.chunk(4, 4).size == 0 and dump.chunk(4, 4).dtype == np.float32
    assert dump.chunk(0, 3).dtype.isnative


def test_a_dtype_the_table_cannot_read_is_named_with_the_flag(tmp_path: Path) -> None:
    np.save(tmp_path / "y.npy", np.arange(3, dtype=np.int64))
    with pytest.raises(UsageError) as caught:
        load(str(tmp_path / "y.npy"), flag="--y", bits_dtype=None)
    assert str(caught.value).startswith("--y") and "unsupported dtype int64" in str(caught.value)


# ----------------------------------------------------------------------------- chunks read in place

def test_a_mapped_chunk_is_read_in_place_and_holds_what_a_copy_holds(tmp_path: Path) -> None:
    path = tmp_path / "x.npy"
    np.save(path, np.arange(1 << 16, dtype=np.float32))
    dump = load(str(path), flag="--x", bits_dtype=None)
    part = dump.mapped(1000, 40_000)
    assert np.shares_memory(part, dump.raw) and not part.flags.writeable
    np.testing.assert_array_equal(part, dump.chunk(1000, 40_000))


def test_a_mapped_chunk_of_another_byte_order_is_a_native_copy(tmp_path: Path) -> None:
    path = tmp_path / "x.npy"
    np.save(path, np.arange(4096, dtype=">f4"))
    dump = load(str(path), flag="--x", bits_dtype=None)
    part = dump.mapped(8, 4096)
    assert part.dtype.isnative and not np.shares_memory(part, dump.raw)
    np.testing.assert_array_equal(part, np.arange(8, 4096, dtype=np.float32))


def test_a_mapped_chunk_of_a_file_that_shrank_is_an_error_not_a_sigbus(tmp_path: Path) -> None:
    """Its pages are mapped before it is handed on: the OS says they are gone."""
    path = tmp_path / "x.npy"
    np.save(path, np.arange(1 << 16, dtype=np.float32))
    dump = load(str(path), flag="--x", bits_dtype=None)
    assert dump.mapped(0, 8).tolist() == list(range(8))
    os.truncate(path, 4096)
    with pytest.raises(UsageError, match="shrank while it was read") as caught:
        dump.mapped(1 << 15, 1 << 16)
    assert str(caught.value).startswith(str(path)) and "elements 32768 to 65536 are gone" in str(caught.value)
    assert str(caught.value).endswith("do not change an input while the harness reads it, then run again")


def test_a_mapped_chunk_before_where_the_file_was_cut_is_still_read_in_place(tmp_path: Path) -> None:
    """Only the chunk's own pages are mapped first: a cut after them is not the chunk's error."""
    path = tmp_path / "x.npy"
    np.save(path, np.arange(1 << 16, dtype=np.float32))
    dump = load(str(path), flag="--x", bits_dtype=None)
    os.truncate(path, 3 * 4096)
    part = dump.mapped(1024, 1030)  # on the file's second page, well before the cut
    assert np.shares_memory(part, dump.raw)
    assert part.tolist() == list(range(1024, 1030))


def test_where_the_os_lacks_the_advice_a_mapped_chunk_is_a_copy(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """An advice the OS does not know is refused (EINVAL, not EFAULT): the chunk is read as a copy."""
    path = tmp_path / "x.npy"
    np.save(path, np.arange(4096, dtype=np.float32).reshape(64, 64))
    dump = load(str(path), flag="--x", bits_dtype=None)
    monkeypatch.setattr(arrays, "_POPULATE_READ", 12345)
    part = dump.mapped(100, 300)
    assert not np.shares_memory(part, dump.raw)
    assert part.tolist() == list(range(100, 300))


def test_a_mapped_chunk_of_a_matrix_is_its_flat_elements(tmp_path: Path) -> None:
    path = tmp_path / "x.npy"
    np.save(path, np.arange(4096, dtype=np.float32).reshape(64, 64))
    dump = load(str(path), flag="--x", bits_dtype=None)
    part = dump.mapped(100, 300)
    assert np.shares_memory(part, dump.raw) and part.shape == (200,)
    assert part.tolist() == list(range(100, 300))

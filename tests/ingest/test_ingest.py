"""The array-file loader (conformance/ingest/arrays.py): byte order is data, sizes are
checked before anything is allocated, and every bad file is one line and exit 2."""
from __future__ import annotations

import json
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
from numpy.lib import format as npy_format

from conformance.dtypes import all_patterns
from conformance.errors import UsageError
from conformance.ingest.arrays import load, load_array
from conformance.reference import golden as ref
from tests.helpers import assert_same_bits, assert_usage_error, run_cli

X16 = all_patterns("float16")
X32 = np.random.default_rng(3).standard_normal(5000).astype(np.float32)


def _rows(d: Path, capsys: pytest.CaptureFixture[str], *files: str, extra: tuple[str, ...] = ()) -> list:
    """compare's JSON rows for x and y files in ``d`` (file names kept out of the rows)."""
    x, y = files
    result = run_cli(["compare", "--x", x, "--y", y, "--alpha", "0.2", *extra, "--json", "r.json"],
                     capsys, cwd=d)
    assert result.code in (0, 1), result.text
    rows = json.loads((d / "r.json").read_text())["rows"]
    for row in rows:
        row.pop("parts")
        for finding in row["findings"]:
            for example in finding["examples"]:
                example.pop("part")
    return rows


@pytest.mark.parametrize("x, y", [(X16, ref.forward(X16, 0.01)), (X32, ref.forward(X32, 0.01))],
                         ids=["float16", "float32"])
def test_big_endian_and_mixed_byte_order_give_the_little_endian_rows(
        x: np.ndarray, y: np.ndarray, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    big_x, big_y = x.astype(x.dtype.newbyteorder(">")), y.astype(y.dtype.newbyteorder(">"))
    for name, array in (("x", x), ("y", y), ("bx", big_x), ("by", big_y)):
        np.save(tmp_path / f"{name}.npy", array)
    little = _rows(tmp_path, capsys, "x.npy", "y.npy")
    assert little[0]["findings"], "the defect must give findings to compare"
    assert _rows(tmp_path, capsys, "bx.npy", "by.npy") == little
    assert _rows(tmp_path, capsys, "bx.npy", "y.npy") == little
    assert _rows(tmp_path, capsys, "x.npy", "by.npy") == little


def test_big_endian_raw_bfloat16_bits_are_read_as_bfloat16(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    bf = all_patterns("bfloat16")
    np.save(tmp_path / "x.npy", bf.view(np.uint16).astype(">u2"))
    np.save(tmp_path / "y.npy", ref.forward(bf, 0.2).view(np.uint16))
    result = run_cli(["compare", "--x", "x.npy", "--y", "y.npy", "--alpha", "0.2", "--dtype", "bfloat16"],
                     capsys, cwd=tmp_path)
    assert result.code == 0, result.text
    assert_same_bits(load_array(str(tmp_path / "x.npy"), flag="--x", bits_dtype="bfloat16"), bf)


def test_big_endian_data_stays_mapped_and_is_converted_a_chunk_at_a_time(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", X32.astype(">f4"))
    dump = load(str(tmp_path / "x.npy"), flag="--x", bits_dtype=None)
    assert dump.raw.dtype.byteorder == ">" and not dump.raw.flags.writeable  # the read-only map
    piece = dump.chunk(100, 200)
    assert piece.dtype == np.float32 and piece.dtype.isnative and piece.size == 100
    assert_same_bits(piece, X32[100:200])


def test_stored_npz_members_are_mapped_and_compressed_ones_read(tmp_path: Path) -> None:
    np.savez(tmp_path / "stored.npz", y=X32)
    np.savez_compressed(tmp_path / "packed.npz", y=X32)
    stored = load(str(tmp_path / "stored.npz"), flag="--y", bits_dtype=None)
    packed = load(str(tmp_path / "packed.npz"), flag="--y", bits_dtype=None)
    assert not stored.raw.flags.writeable and packed.raw.flags.writeable
    assert_same_bits(stored.whole(), X32)
    assert_same_bits(packed.whole(), X32)


def test_fortran_ordered_arrays_keep_their_element_order(tmp_path: Path) -> None:
    a = np.asfortranarray(X32[:4000].reshape(40, 100))
    np.save(tmp_path / "f.npy", a)
    assert_same_bits(load_array(str(tmp_path / "f.npy"), flag="--x", bits_dtype=None), a)


def _huge_header(path: Path, *, elements: int = 10 ** 13) -> None:
    """A valid .npy header declaring ``elements`` float32 values, followed by 64 bytes."""
    with open(path, "wb") as handle:
        npy_format.write_array_header_1_0(handle, {"descr": "<f4", "fortran_order": False,
                                                   "shape": (elements,)})
        handle.write(b"\0" * 64)


def test_a_header_declaring_ten_trillion_elements_is_refused_before_allocating(tmp_path: Path) -> None:
    _huge_header(tmp_path / "huge.npy")
    tracemalloc.start()
    try:
        with pytest.raises(UsageError, match="declares shape .10000000000000,. .* only 64 bytes"):
            load(str(tmp_path / "huge.npy"), flag="--y", bits_dtype=None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def _npz_with(path: Path, members: dict[str, bytes], *, compress: int = zipfile.ZIP_STORED) -> None:
    with zipfile.ZipFile(path, "w", compression=compress) as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def _npy_bytes(path: Path, array: np.ndarray) -> bytes:
    np.save(path, array)
    return path.read_bytes()


def _cases(d: Path) -> dict[str, tuple[list[str], str]]:
    """Bad inputs: argv for compare and a word of the one-line message."""
    np.save(d / "x.npy", X32)
    good = _npy_bytes(d / "y_ok.npy", ref.forward(X32, 0.2))
    _huge_header(d / "huge.npy")
    (d / "cut.npy").write_bytes(good[: len(good) - 100])
    _npz_with(d / "text.npz", {"y.txt": b"1,2,3\n"})
    _npz_with(d / "notnpy.npz", {"y.npy": b"this is not an array"})
    _npz_with(d / "cut.npz", {"y.npy": good[:-100]})
    _npz_with(d / "cut_packed.npz", {"y.npy": good[:-100]}, compress=zipfile.ZIP_DEFLATED)
    one = X32.dtype.itemsize  # exactly one element short: the size check's boundary
    (d / "short.npy").write_bytes(good[:-one])
    _npz_with(d / "short.npz", {"y.npy": good[:-one]})
    _npz_with(d / "short_packed.npz", {"y.npy": good[:-one]}, compress=zipfile.ZIP_DEFLATED)
    huge = (d / "huge.npy").read_bytes()
    _npz_with(d / "huge_packed.npz", {"y.npy": huge}, compress=zipfile.ZIP_DEFLATED)
    (d / "broken.npz").write_bytes(b"PK\x03\x04" + b"\0" * 40)
    _npz_with(d / "garbled.npz", {"y.npy": good}, compress=zipfile.ZIP_DEFLATED)
    garbled = bytearray((d / "garbled.npz").read_bytes())
    garbled[60:70] = b"\xff" * 10  # inside the deflate stream
    (d / "garbled.npz").write_bytes(bytes(garbled))
    with open(d / "pickled_dtype.npy", "wb") as handle:
        npy_format.write_array_header_1_0(handle, {"descr": "|O", "fortran_order": False, "shape": (2,)})
    base = ["compare", "--x", "x.npy", "--alpha", "0.2", "--y"]
    return {
        "header-declares-1e13-elements": (base + ["huge.npy"], "declares shape"),
        "truncated-body": (base + ["cut.npy"], "truncated"),
        "npz-member-not-npy-name": (base + ["text.npz"], "no numpy header"),
        "npz-member-not-npy-bytes": (base + ["notnpy.npz"], "no numpy header"),
        "npz-stored-member-truncated": (base + ["cut.npz"], "truncated"),
        "npz-compressed-member-truncated": (base + ["cut_packed.npz"], "truncated"),
        "npy-one-element-short": (base + ["short.npy"], "truncated"),
        "npz-stored-member-one-element-short": (base + ["short.npz"], "truncated"),
        "npz-compressed-member-one-element-short": (base + ["short_packed.npz"], "truncated"),
        "npz-compressed-member-declares-1e13": (base + ["huge_packed.npz"], "declares shape"),
        "npz-not-a-zip": (base + ["broken.npz"], "cannot read"),
        "npz-garbled-deflate-stream": (base + ["garbled.npz"], "cannot read"),
        "object-dtype-header": (base + ["pickled_dtype.npy"], "object"),
    }


BAD = ["header-declares-1e13-elements", "truncated-body", "npz-member-not-npy-name",
       "npz-member-not-npy-bytes", "npz-stored-member-truncated", "npz-compressed-member-truncated",
       "npy-one-element-short", "npz-stored-member-one-element-short", "npz-compressed-member-one-element-short",
       "npz-compressed-member-declares-1e13", "npz-not-a-zip", "npz-garbled-deflate-stream",
       "object-dtype-header"]


@pytest.mark.parametrize("name", BAD)
def test_bad_array_files_exit_2_with_one_line(name: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    argv, says = _cases(tmp_path)[name]
    assert_usage_error(run_cli(argv, capsys, cwd=tmp_path), mentions=says)


def test_every_bad_case_is_listed(tmp_path: Path) -> None:
    """A meta-test: the parametrisation covers every case the builder makes."""
    assert sorted(BAD) == sorted(_cases(tmp_path))


def _torch_files(d: Path) -> dict[str, str]:
    torch = pytest.importorskip("torch")
    x = torch.linspace(-3, 3, 1001, dtype=torch.bfloat16)
    files = {"x": x, "y": torch.nn.functional.leaky_relu(x, 0.2), "torch_default": torch.nn.functional.leaky_relu(x),
             "dict": {"y": x}}
    for name, value in files.items():
        torch.save(value, d / f"{name}.pt")
    return {name: str(d / f"{name}.pt") for name in files}


def test_compare_reads_torch_save_tensors_bfloat16_bit_for_bit(tmp_path: Path, capsys) -> None:
    pt = _torch_files(tmp_path)
    ok = run_cli(["compare", "--x", pt["x"], "--y", pt["y"], "--alpha", "0.2"], capsys, cwd=tmp_path)
    assert ok.code == 0, ok.err
    wrong = run_cli(["compare", "--x", pt["x"], "--y", pt["torch_default"], "--alpha", "0.2", "--json", "r.json"],
                    capsys, cwd=tmp_path)
    assert wrong.code == 1
    row = json.loads((tmp_path / "r.json").read_text())["rows"][0]
    assert row["dtype"] == "bfloat16" and {f["category"] for f in row["findings"]} == {"alpha-mismatch"}


def test_a_torch_file_without_one_tensor_or_without_torch_is_one_line(tmp_path: Path, capsys, monkeypatch) -> None:
    pt = _torch_files(tmp_path)
    result = run_cli(["compare", "--x", pt["x"], "--y", pt["dict"], "--alpha", "0.2"], capsys, cwd=tmp_path)
    assert_usage_error(result, mentions="holds a dict, not a tensor; save one tensor with torch.save")
    from conformance import extras

    real = extras.importlib.import_module
    monkeypatch.setattr(extras.importlib, "import_module",
                        lambda name, *a: (_ for _ in ()).throw(ImportError("no torch")) if name == "torch"
                        else real(name, *a))
    result = run_cli(["compare", "--x", pt["x"], "--y", pt["y"], "--alpha", "0.2"], capsys, cwd=tmp_path)
    assert_usage_error(result, mentions="pip install 'conformance[torch]'")

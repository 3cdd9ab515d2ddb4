"""Arrays from outside: ``.npy`` and ``.npz`` dumps, memory-mapped and checked before use.

- A ``.npy`` header is parsed here (``numpy.lib.format``); the declared shape times the
  item size is checked against the bytes the file holds *before* anything is allocated,
  so a header declaring 10^13 elements is a one-line error, not a ``MemoryError``.
- The body is memory-mapped, never read whole.  An ``.npz`` member stored without
  compression is memory-mapped at its data offset inside the zip; a compressed member
  has its declared uncompressed size checked against ``bounded.MAX_INFLATED`` and its
  array header against that size, then is read.  Encrypted members and unknown
  compression methods are refused.
- The body is read defensively: :meth:`Dump.chunk` reads a memory-mapped file's
  bytes with ``pread`` and checks that they are all there, so a file truncated while
  it is judged is a one-line error, never a ``SIGBUS``; :meth:`Dump.mapped` reads them in
  place once the OS has mapped their pages, which it refuses for pages the file no longer
  holds (a one-line error too, unless the file shrinks while those pages are read:
  docs/safety.md).
- Pickles and object dtypes are refused (``allow_pickle`` is never on).
- Byte order is data, not an error: ``>f4`` or ``>f2`` (and x and y in different byte
  orders) are valid.  :meth:`Dump.chunk` returns native-order pieces, converted one
  chunk at a time, so a big-endian dump is never copied whole.
- bfloat16 arrives as ml_dtypes' ``.npy`` (numpy writes it as ``'<V2'``) or as raw
  uint16 bits read with ``bits_dtype="bfloat16"``.
- :meth:`Dump.release` lets the OS drop the mapped pages of elements already judged from
  the process's resident memory (they are read from the file again if touched), so
  reading a dump chunk by chunk keeps about one chunk of it resident.
"""
from __future__ import annotations

import errno
import lzma
import math
import mmap
import os
import struct
import tokenize
import zipfile
import zlib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import BinaryIO, Optional

import numpy as np
from numpy.lib import format as npy_format

try:  # numpy 2 keeps the header reader of every version in a private module, numpy 1.26 in format
    from numpy.lib import _format_impl as _npy_impl
except ImportError:
    _npy_impl = npy_format

from conformance.dtypes import DTYPES, info
from conformance.errors import UsageError, one_line
from conformance.ingest import bounded
from conformance.ingest.torch_files import is_torch_file, torch_tensor

_MAGIC = b"\x93NUMPY"
_MAX_HEADER = 1 << 20  # bytes of header text numpy may parse (its own default is 10,000)
_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22)  # Linux 5.14: map a range's pages, or fail
_LOCAL_HEADER = struct.Struct("<4s22sHH")  # zip local file header: signature .. name/extra lengths


@dataclass(frozen=True)
class Dump:
    """One checked array: ``raw`` as stored (maybe big-endian, maybe raw bits) and the
    native table dtype its elements are read as."""

    raw: np.ndarray
    dtype: np.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.raw.shape)

    @property
    def size(self) -> int:
        return int(self.raw.size)

    @property
    def nbytes(self) -> int:
        return int(self.raw.nbytes)

    def chunk(self, start: int, stop: int) -> np.ndarray:
        """Flat elements ``start:stop`` in native byte order and the table dtype (read from the
        file when ``raw`` is mapped from one, so a file that shrank is an error, not a SIGBUS)."""
        stop = min(stop, self.size)
        part = self.raw.reshape(-1)[start:stop] if self._file is None else self._pread(start, stop)
        if not part.dtype.isnative:
            part = part.byteswap().view(part.dtype.newbyteorder("="))
        return part.view(self.dtype)

    def mapped(self, start: int, stop: int) -> np.ndarray:
        """:meth:`chunk` without a copy where it can be: a native, mapped dump's elements
        ``start:stop`` read in place, once the OS has mapped every page of them from the file
        (``MADV_POPULATE_READ``), which fails instead of raising ``SIGBUS`` where the file has
        shrunk (an error like :meth:`chunk`'s).  Elsewhere (no mapping, another byte order, an
        OS without that advice), :meth:`chunk`."""
        stop = min(stop, self.size)
        if self._mapping is None or self._file is None or not self.raw.dtype.isnative or stop <= start:
            return self.chunk(start, stop)
        mapping, first = self._mapping
        lo = (first + start * self.raw.itemsize) // mmap.PAGESIZE * mmap.PAGESIZE
        try:
            mapping.madvise(_POPULATE_READ, lo, first + stop * self.raw.itemsize - lo)
        except OSError as exc:
            if exc.errno != errno.EFAULT:  # not a page the file no longer holds (no such advice here): read it
                return self.chunk(start, stop)
            raise _shrank(self._file[0], start, stop) from None
        return np.asarray(self.raw).reshape(-1)[start:stop].view(self.dtype)

    def whole(self) -> np.ndarray:
        """Every element, native, in the stored shape (a copy only when byte order needs one)."""
        return self.chunk(0, self.size).reshape(self.shape)

    def release(self, start: int, stop: int) -> None:
        """Drop the mapped pages that only hold elements ``start:stop`` from resident memory
        (``madvise``; a hint, a no-op where the dump is not mapped or the OS lacks it)."""
        if self._mapping is None:
            return
        mapping, first = self._mapping
        item, page = self.raw.itemsize, mmap.PAGESIZE
        lo = -(-(first + start * item) // page) * page  # whole pages inside the range only
        hi = (first + stop * item) // page * page
        if hi > lo:
            try:
                mapping.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
            except OSError:  # a hint the OS may refuse: the pages then stay resident
                pass

    def _pread(self, start: int, stop: int) -> np.ndarray:
        assert self._file is not None
        path, first = self._file
        item = self.raw.itemsize
        want = max(0, stop - start) * item
        with open(path, "rb", buffering=0) as handle:
            data = os.pread(handle.fileno(), want, first + start * item)
        if len(data) < want:
            raise _shrank(path, start, stop)
        return np.frombuffer(data, dtype=self.raw.dtype)

    @cached_property
    def _file(self) -> Optional[tuple[str, int]]:
        """The file ``raw`` is memory-mapped from and where its first element is in it."""
        if not self.raw.flags.c_contiguous:
            return None
        owner = self.raw
        while owner is not None and not isinstance(owner, np.memmap):
            owner = getattr(owner, "base", None)
        if owner is None or owner.filename is None:
            return None
        return str(owner.filename), int(owner.offset) + self.raw.ctypes.data - owner.ctypes.data

    @cached_property
    def _mapping(self) -> Optional[tuple[mmap.mmap, int]]:
        """The read-only mapping ``raw`` lies in and where its first element is in it."""
        if not hasattr(mmap, "MADV_DONTNEED") or not self.raw.flags.c_contiguous:
            return None
        owner = self.raw
        while owner is not None and not isinstance(getattr(owner, "_mmap", None), mmap.mmap):
            owner = getattr(owner, "base", None)
        if owner is None:
            return None
        mapping = owner._mmap
        start = np.frombuffer(mapping, dtype=np.uint8)[:1].ctypes.data
        return mapping, self.raw.ctypes.data - start


def _shrank(path: str, start: int, stop: int) -> UsageError:
    return UsageError(f"{path}: the file shrank while it was read (elements {start} to {stop} are gone); do not "
                      "change an input while the harness reads it, then run again")


# ----------------------------------------------------------------------------- headers

@dataclass(frozen=True)
class _Header:
    shape: tuple[int, ...]
    fortran: bool
    dtype: np.dtype
    offset: int  # where the body starts, from the start of the file

    @property
    def body_bytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize  # Python ints: no overflow


def _read_header(handle: BinaryIO, *, base: int, where: str) -> _Header:
    """Parse an ``.npy`` header at the handle's position (``base`` bytes into the file)."""
    start = handle.tell()
    if handle.read(6) != _MAGIC:
        raise UsageError(f"{where}: not an .npy array (no numpy header); save it with numpy.save")
    handle.seek(start)
    version = npy_format.read_magic(handle)
    if version == (1, 0):
        shape, fortran, dtype = npy_format.read_array_header_1_0(handle, max_header_size=_MAX_HEADER)
    elif version == (2, 0):
        shape, fortran, dtype = npy_format.read_array_header_2_0(handle, max_header_size=_MAX_HEADER)
    elif version == (3, 0):  # a utf-8 header; numpy reads it with the 2.0 layout
        shape, fortran, dtype = _npy_impl._read_array_header(handle, version, max_header_size=_MAX_HEADER)
    else:
        raise UsageError(f"{where}: .npy format version {version[0]}.{version[1]} is unknown "
                         "(1.0, 2.0 and 3.0 are read); save the array again with numpy.save")
    if any(n < 0 for n in shape):
        raise UsageError(f"{where}: the header declares a negative shape {tuple(shape)}; "
                         "save the array again with numpy.save")
    if dtype.hasobject:
        raise UsageError(f"{where}: holds a pickled or object array; save a plain numeric array "
                         "with numpy.save")
    return _Header(tuple(int(n) for n in shape), bool(fortran), dtype, base + handle.tell() - start)


def _check_size(header: _Header, *, available: int, where: str) -> None:
    """The body the header declares must be there (checked before allocating anything)."""
    if header.body_bytes > available:
        raise UsageError(f"{where}: the header declares shape {header.shape} of {header.dtype.str} "
                         f"({header.body_bytes} bytes) but only {available} bytes follow it; "
                         "the file is truncated or its header is wrong")


def _mapped(path: Path, header: _Header) -> np.ndarray:
    """The body memory-mapped read-only (C order; a Fortran-ordered array is made C order)."""
    if header.body_bytes == 0:
        return np.empty(header.shape, dtype=header.dtype)
    order = "F" if header.fortran else "C"
    body = np.memmap(path, dtype=header.dtype, mode="r", offset=header.offset,
                     shape=header.shape, order=order)
    return np.ascontiguousarray(body) if header.fortran and body.ndim > 1 else np.asarray(body)


# ----------------------------------------------------------------------------- files

def _open_npy(path: Path, *, where: str) -> np.ndarray:
    with open(path, "rb") as handle:
        header = _read_header(handle, base=0, where=where)
    _check_size(header, available=path.stat().st_size - header.offset, where=where)
    return _mapped(path, header)


def _member_name(names: list[str], *, flag: str, where: str) -> str:
    """The member named after the flag, or the only member."""
    arrays = {n[:-4] if n.endswith(".npy") else n: n for n in names if not n.endswith("/")}
    name = flag.lstrip("-")
    if name in arrays:
        return arrays[name]
    if len(arrays) == 1:
        return next(iter(arrays.values()))
    raise UsageError(f"{where}: .npz holds {', '.join(arrays) or 'nothing'}; "
                     f"store one array or one named {name!r}")


def _stored_offset(path: Path, member: zipfile.ZipInfo) -> int:
    """Where a stored member's bytes start: after its local header, name and extra field."""
    with open(path, "rb") as handle:
        handle.seek(member.header_offset)
        sig, _, name_len, extra_len = _LOCAL_HEADER.unpack(handle.read(_LOCAL_HEADER.size))
    if sig != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"bad local header for {member.filename}")
    return member.header_offset + _LOCAL_HEADER.size + name_len + extra_len


def _read_member(archive: zipfile.ZipFile, member: zipfile.ZipInfo, *, where: str) -> np.ndarray:
    """A compressed member: header first, size checked, then the body read into one buffer."""
    with archive.open(member) as stream:
        header = _read_header(stream, base=0, where=where)
        _check_size(header, available=member.file_size - header.offset, where=where)
        out = np.empty(header.shape, dtype=header.dtype, order="F" if header.fortran else "C")
        _fill(memoryview(out.reshape(-1, order="A")).cast("B") if out.size else memoryview(b""),
              stream, name=member.filename)
    return np.ascontiguousarray(out)


def _fill(view: memoryview, stream: BinaryIO, *, name: str, step: int = 1 << 24) -> None:
    """Read exactly ``len(view)`` bytes into ``view``, a bounded piece at a time."""
    done = 0
    while done < len(view):
        piece = stream.read(min(step, len(view) - done))
        if not piece:
            raise EOFError(f"member {name} ends early")
        view[done:done + len(piece)] = piece
        done += len(piece)


def _open_npz(path: Path, *, flag: str, where: str) -> np.ndarray:
    with zipfile.ZipFile(path) as archive:
        member = archive.getinfo(_member_name(archive.namelist(), flag=flag, where=where))
        inner = f"{where} (member {member.filename})"
        compressed = member.compress_type != zipfile.ZIP_STORED
        bounded.check_member(member, limit=bounded.MAX_INFLATED if compressed else member.file_size, where=where)
        if compressed:
            return _read_member(archive, member, where=inner)
    start = _stored_offset(path, member)
    with open(path, "rb") as handle:
        handle.seek(start)
        header = _read_header(handle, base=start, where=inner)
    _check_size(header, available=member.file_size - (header.offset - start), where=inner)
    return _mapped(path, header)


def _check_file(file: Path, *, where: str) -> bytes:
    """Exists, is a regular file, and starts like a .npy or a zip; returns the magic bytes."""
    if not file.exists():
        raise UsageError(f"{where}: file does not exist; pass the path of a .npy, .npz or .pt file")
    if not file.is_file():
        raise UsageError(f"{where}: not a regular file; pass the path of a .npy, .npz or .pt file")
    try:
        with open(file, "rb") as handle:
            magic = handle.read(6)
    except OSError as exc:  # permission denied, an I/O error
        raise UsageError(f"{where}: cannot read it ({exc.strerror or exc}); pass a file you can read") from None
    if magic.startswith(b"\x80"):  # a pickle protocol header
        raise UsageError(f"{where}: holds a pickled object; save a plain numeric array with numpy.save")
    if magic and not (magic.startswith(_MAGIC) or magic.startswith(b"PK")):
        raise UsageError(f"{where}: not a .npy or .npz file (no numpy header); save it with numpy.save")
    return magic


def read(path: str, *, flag: str) -> np.ndarray:
    """One array from a .npy, or from a .npz holding one array or one named after the flag,
    memory-mapped where the storage allows it; as stored (byte order untouched)."""
    file, where = Path(path), f"{flag} {path}"
    magic = _check_file(file, where=where)
    if magic.startswith(b"PK") and is_torch_file(file):
        return torch_tensor(file, limit=file.stat().st_size, where=where,
                            hint="save one tensor with torch.save(tensor, path)")
    try:
        if magic.startswith(b"PK"):
            return _open_npz(file, flag=flag, where=where)
        return _open_npy(file, where=where)
    except UsageError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, SyntaxError, struct.error, zlib.error,
            lzma.LZMAError, RuntimeError, NotImplementedError,  # zip: encrypted, unknown method
            tokenize.TokenError) as exc:  # a header that is not a Python literal
        raise UsageError(f"{where}: cannot read it ({one_line(exc, named=False)}); the file may be truncated") from None


# ----------------------------------------------------------------------------- dtypes

def table_dtype(a: np.ndarray, *, flag: str, bits_dtype: Optional[str]) -> np.dtype:
    """The native table dtype to read ``a``'s elements as (uint16 bits when --dtype says so)."""
    stored = a.dtype
    if stored.kind == "O":
        raise UsageError(f"{flag}: object arrays are not supported; save a numeric array")
    if stored.kind == "V" and stored.itemsize == 2 and stored.fields is None:
        return info("bfloat16").dtype  # numpy.save writes ml_dtypes bfloat16 as '<V2'
    native = stored.newbyteorder("=")
    if native in (np.dtype(np.uint16), np.dtype(np.int16)):
        if bits_dtype is None:
            raise UsageError(f"{flag}: raw {native} array; pass --dtype bfloat16 (or float16) "
                             "to read it as bit patterns")
        return info(bits_dtype).dtype
    if native in (np.dtype(np.int8), np.dtype(np.uint8)):
        raise UsageError(f"{flag}: {native} codes; a quantized LeakyReLU's dump is compared with "
                         "--quant S_IN:Z_IN:S_OUT:Z_OUT (its per-tensor scales and zero points)")
    if native.name not in DTYPES:
        raise UsageError(f"{flag}: unsupported dtype {native}; use one of {', '.join(DTYPES)}")
    return native


def is_raw_bits(dump: Dump) -> bool:
    """Whether ``dump`` is stored as raw 16-bit integers read as bit patterns (``--dtype``)."""
    return dump.raw.dtype.newbyteorder("=") in (np.dtype(np.uint16), np.dtype(np.int16))


def load(path: str, *, flag: str, bits_dtype: Optional[str]) -> Dump:
    """A checked, memory-mapped dump and the dtype its elements are read as; what is wrong with
    it names ``flag`` and ``path``."""
    raw = read(path, flag=flag)
    return Dump(raw, table_dtype(raw, flag=f"{flag} {path}", bits_dtype=bits_dtype))


def load_array(path: str, *, flag: str, bits_dtype: Optional[str]) -> np.ndarray:
    """The whole array, native byte order, in its table dtype."""
    return load(path, flag=flag, bits_dtype=bits_dtype).whole()

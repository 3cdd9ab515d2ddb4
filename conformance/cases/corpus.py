"""The ``Case`` record and ``.npz`` reproducers.

A reproducer is a plain ``.npz`` (loaded with ``allow_pickle=False``): the
inputs as unsigned bit patterns (so bfloat16 and NaN payloads survive), the
dtype names and the metadata as 0-d string/float arrays, and a ``digest``:
sha256 over the format tag, every metadata string, alpha and the bit arrays in
a fixed order.  :func:`load` refuses a file whose digest is missing or does not
match (an edited or corrupted reproducer is not replayed), then checks that the
contents make sense (known dtypes, forward/backward, a finite alpha, bit arrays
of the dtype's width, dy for backward).
"""
from __future__ import annotations

import hashlib
import hmac
import math
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Optional

import numpy as np

from conformance.dtypes import DTYPES, from_bits, info, to_bits
from conformance.errors import CorpusError
from conformance.records import Direction, RowKey

FORMAT = "leakyrelu-reproducer/2"  # /1 had no digest
MAX_ELEMENTS = 1 << 24  # per array: a shrunk reproducer is far smaller; bounds what a file can make us allocate
_MAX_MEMBERS = 32
_OLD_FORMATS = ("leakyrelu-reproducer/1",)
_STRINGS = ("format", "dtype", "out_dtype", "direction", "backend", "profile", "variant",
            "category", "summary", "label")
_NUMBERS = ("alpha", "x_bits", "dy_bits")  # digested after the strings, in this order
_OPTIONAL = ("worker",)  # digested last, and only when present (files without it keep their digest)
_DIRECTIONS = ("forward", "backward")
_RECREATE = "re-create it with 'conformance run'"


def _scalar_text(a: np.ndarray) -> str:
    """One element as Python would spell it (``-0.0``, ``nan``, ``inf``)."""
    return repr(float(a.reshape(-1)[0].astype(np.float64)))


def _arg_text(a: np.ndarray) -> str:
    """A scalar's value, or ``dtype[shape]`` for anything bigger."""
    if a.size == 1:
        return _scalar_text(a)
    return f"{info(a.dtype).short}[{','.join(str(n) for n in a.shape)}]"


@dataclass(frozen=True)
class Case:
    """One LeakyReLU call: inputs, slope, direction, and (when known) the expected output."""

    x: np.ndarray
    alpha: float
    direction: Direction = "forward"
    dy: Optional[np.ndarray] = None
    out_dtype: Optional[str] = None
    expected: Optional[np.ndarray] = None

    @property
    def dtype(self) -> str:
        return info(self.x.dtype).name

    def __str__(self) -> str:
        args = [f"x={_arg_text(self.x)}", f"alpha={self.alpha!r}"]
        if self.direction == "backward" and self.dy is not None:
            args.insert(0, f"dy={_arg_text(self.dy)}")
        if self.out_dtype is not None and self.out_dtype != self.dtype:
            args.append(f"out={info(self.out_dtype).short}")
        name = "leaky_relu" if self.direction == "forward" else "leaky_relu_backward"
        text = f"{name}({', '.join(args)})"
        return text if self.expected is None else f"{text} -> {_arg_text(self.expected)}"


@dataclass(frozen=True)
class Reproducer:
    """A minimal failing case and where it failed (backend, profile, variant, category)."""

    case: Case
    backend: str
    profile: Optional[str] = None
    variant: Optional[str] = None
    category: str = ""
    summary: str = ""
    label: str = ""  # the row's one spelling when it was saved (``str(key)``)
    worker: Optional[str] = None  # the worker command of a row served by a worker; None: in-process

    @property
    def key(self) -> RowKey:
        """The row this case failed in: the backend's names and the case's dtypes, direction and slope."""
        case = self.case
        return RowKey(self.backend, self.profile, self.variant, case.dtype, case.out_dtype or case.dtype,
                      case.direction, case.alpha)


def _text(value: Optional[str]) -> np.ndarray:
    return np.array("" if value is None else str(value))


def _canonical(key: str, a: np.ndarray) -> bytes:
    """One field as bytes: its name, kind, shape and content (numbers little-endian)."""
    if key in _STRINGS or key in _OPTIONAL:
        body = str(a).encode("utf-8", "surrogatepass")
        head = f"{key}|str|{a.shape}|{len(body)}|"
    else:
        a = np.asarray(a)
        little = a.dtype.newbyteorder("<") if a.dtype.byteorder != "|" else a.dtype
        body = np.ascontiguousarray(a, dtype=little).tobytes()
        head = f"{key}|{little.str}|{a.shape}|{len(body)}|"
    return head.encode() + body


def digest(arrays: Mapping[str, np.ndarray]) -> str:
    """``sha256:<hex>`` over the format tag, every metadata string, alpha and the bit arrays."""
    h = hashlib.sha256()
    for key in (*_STRINGS, *_NUMBERS):
        h.update(_canonical(key, arrays[key]) if key in arrays else f"{key}|absent|".encode())
    for key in _OPTIONAL:
        if key in arrays:
            h.update(_canonical(key, arrays[key]))
    return "sha256:" + h.hexdigest()


def save(rep: Reproducer, path: Path | str) -> Path:
    """Write ``rep`` as a pickle-free ``.npz`` and return its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    case = rep.case
    arrays = {name: _text(value) for name, value in zip(_STRINGS, (
        FORMAT, case.dtype, case.out_dtype, case.direction, rep.backend, rep.profile, rep.variant,
        rep.category, rep.summary, rep.label))}
    arrays["alpha"] = np.array(float(case.alpha), dtype=np.float64)
    arrays["x_bits"] = to_bits(np.ascontiguousarray(case.x))
    if case.dy is not None:
        arrays["dy_bits"] = to_bits(np.ascontiguousarray(case.dy))
    if rep.worker is not None:
        arrays["worker"] = _text(rep.worker)
    arrays["digest"] = np.array(digest(arrays))
    with path.open("wb") as fh:
        np.savez(fh, **arrays)
    return path


def _read(path: Path) -> dict[str, np.ndarray]:
    """Every array of an ``.npz``, refusing pickles and non-array members, with one-line errors."""
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise CorpusError(f"reproducer {path} {what}; pass a .npz written by 'conformance run'")
    try:
        path.open("rb").close()  # unreadable: say so (is_zipfile would call it no zip)
        if not zipfile.is_zipfile(path):  # a .npy, a pickle, text: np.load would read it whole
            raise ValueError("not an .npz (zip) file, or a truncated one")
        _check_sizes(path)
        with np.load(path, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
    except (ValueError, OSError, zipfile.BadZipFile, EOFError, zlib.error, MemoryError) as exc:
        raise CorpusError(f"cannot read reproducer {path}: {_first_line(exc)}; pass a .npz written by "
                          "'conformance run'") from None
    odd = [key for key, value in arrays.items() if not isinstance(value, np.ndarray)]
    if odd:
        raise CorpusError(f"reproducer {path}: member {odd[0]!r} is not a .npy array; {_RECREATE}")
    return arrays


def _claimed_elements(member: IO[bytes]) -> int:
    """The element count an ``.npy`` member's header claims (read before any data is); a member
    that is no ``.npy`` counts its bytes (it is refused later, by name)."""
    try:
        version = np.lib.format.read_magic(member)
    except ValueError:
        return MAX_ELEMENTS + 1 if member.read(MAX_ELEMENTS + 1)[MAX_ELEMENTS:] else 0
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, _ = read_header(member)
    return math.prod(shape)


def _check_sizes(path: Path) -> None:
    """Every member's declared and claimed size is within :data:`MAX_ELEMENTS`, before a byte of
    data is inflated (a deflate bomb is refused by its declarations; a lying one by its CRC)."""
    with zipfile.ZipFile(path) as archive:
        members = archive.infolist()
        if len(members) > _MAX_MEMBERS:
            raise ValueError(f"{len(members)} members; a reproducer has at most {_MAX_MEMBERS}")
        for info_ in members:
            with archive.open(info_) as member:
                claimed = _claimed_elements(member)
            if claimed > MAX_ELEMENTS or info_.file_size > 8 * MAX_ELEMENTS + 4096:
                raise ValueError(f"member {info_.filename!r} claims {claimed:,} elements in "
                                 f"{info_.file_size:,} bytes; a reproducer holds at most "
                                 f"{MAX_ELEMENTS:,} elements per array")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def _string(data: Mapping[str, np.ndarray], key: str, *, path: Path) -> str:
    value = data[key]
    if value.ndim != 0 or value.dtype.kind != "U":
        raise CorpusError(f"{path}: {key} is not a text field; {_RECREATE}")
    return str(value)


def _check_integrity(data: Mapping[str, np.ndarray], *, path: Path) -> None:
    """The format tag is this version's and the digest matches the contents."""
    if "format" not in data:
        raise CorpusError(f"{path} is not a {FORMAT} file (missing format tag); pass a .npz written by "
                          "'conformance run'")
    fmt = _string(data, "format", path=path)
    if fmt not in (FORMAT, *_OLD_FORMATS):
        raise CorpusError(f"{path} is not a {FORMAT} file (format {fmt[:40]!r}); pass a .npz written by "
                          "'conformance run'")
    if "digest" not in data or fmt != FORMAT:
        raise CorpusError(f"{path} fails its integrity check (it has no digest); {_RECREATE}")
    missing = [k for k in (*_STRINGS, "alpha", "x_bits") if k not in data]
    if missing:
        raise CorpusError(f"{path} is not a {FORMAT} file (missing {', '.join(missing)}); {_RECREATE}")
    recorded = str(data["digest"]) if data["digest"].dtype.kind == "U" else ""
    if not hmac.compare_digest(recorded, digest(data)):
        raise CorpusError(f"{path} fails its integrity check (edited or corrupted since it was saved); "
                          f"{_RECREATE}")


def _bits(data: Mapping[str, np.ndarray], key: str, dtype: str, *, path: Path) -> np.ndarray:
    """``key``'s bit patterns as ``dtype``, refusing another width or an empty array."""
    bits, rec = data[key], info(dtype)
    if bits.dtype.kind != "u" or bits.dtype.itemsize != rec.uint.itemsize or bits.size == 0:
        raise CorpusError(f"{path}: {key} must hold one or more {rec.uint} bit patterns of {dtype}, "
                          f"got {bits.dtype}[{bits.size}]; {_RECREATE}")
    return from_bits(bits, dtype)


def _dtype_name(text: str, *, key: str, path: Path) -> str:
    if text not in DTYPES:
        raise CorpusError(f"{path}: {key} {text[:40]!r} is unknown (use one of {', '.join(DTYPES)}); "
                          f"{_RECREATE}")
    return text


def _case(data: Mapping[str, np.ndarray], *, path: Path) -> Case:
    """The case, each field checked: known dtypes and direction, finite alpha, dy for backward."""
    text = {key: _string(data, key, path=path) for key in _STRINGS}
    dtype = _dtype_name(text["dtype"], key="dtype", path=path)
    out = _dtype_name(text["out_dtype"], key="out_dtype", path=path) if text["out_dtype"] else None
    if text["direction"] not in _DIRECTIONS:
        raise CorpusError(f"{path}: direction {text['direction'][:40]!r} is unknown; a reproducer is "
                          f"forward or backward; {_RECREATE}")
    alpha = data["alpha"]
    if alpha.shape != () or alpha.dtype != np.float64 or not math.isfinite(float(alpha)):
        raise CorpusError(f"{path}: alpha must be one finite float64, got {alpha.dtype}{list(alpha.shape)}"
                          f" {alpha.reshape(-1)[:1].tolist()}; {_RECREATE}")
    x = _bits(data, "x_bits", dtype, path=path)
    dy = _bits(data, "dy_bits", dtype, path=path) if "dy_bits" in data else None
    if text["direction"] == "backward" and (dy is None or dy.shape != x.shape):
        raise CorpusError(f"{path}: a backward reproducer needs dy_bits of x's shape {list(x.shape)}; "
                          f"{_RECREATE}")
    return Case(x, float(alpha), text["direction"], dy=dy, out_dtype=out)  # type: ignore[arg-type]


def load(path: Path | str) -> Reproducer:
    """Read a reproducer written by :func:`save`; a CorpusError when it fails its digest or checks."""
    path = Path(path)
    data = _read(path)
    _check_integrity(data, path=path)
    case = _case(data, path=path)
    text = {key: _string(data, key, path=path) for key in _STRINGS}
    worker = _string(data, "worker", path=path) if "worker" in data else None
    return Reproducer(case, text["backend"], text["profile"] or None, text["variant"] or None,
                      text["category"], text["summary"], text["label"], worker or None)

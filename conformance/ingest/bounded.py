"""Outside data read within limits: zip members and JSON documents.

A size a file declares is checked before anything is inflated or allocated, and a
document's nesting is bounded, so a small hostile file cannot take gigabytes of
memory or end in a ``RecursionError``.  The limits (documented in docs/safety.md):

- ``MAX_INFLATED``: bytes a compressed ``.npz`` member (a ``compare`` input) may inflate
  to; stored members are memory-mapped and have no such limit.
- ``MAX_CONFIG``: bytes of a ``.keras`` file's config.json.
- ``MAX_JSON_DEPTH``: nesting of any JSON document read here.
- ``TENSOR_HEADROOM``: bytes a tensor file (``.pt``) may hold beyond the tensor its
  dump's metadata declares; ``MAX_TENSOR_FILE`` when the metadata declares none.

Encrypted members and compression methods other than stored, deflate, bzip2 and
lzma are refused by name rather than attempted.
"""
from __future__ import annotations

import json
import math
import zipfile
from collections.abc import Iterable
from typing import Any

from conformance.errors import UsageError

MAX_INFLATED = 1 << 30
MAX_CONFIG = 64 << 20
MAX_JSON_DEPTH = 200
TENSOR_HEADROOM = 1 << 20
MAX_TENSOR_FILE = 1 << 32
_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate", zipfile.ZIP_BZIP2: "bzip2",
            zipfile.ZIP_LZMA: "lzma"}


def check_member(member: zipfile.ZipInfo, *, limit: int, where: str) -> None:
    """A member that is not encrypted, uses a known method, and declares at most ``limit`` bytes."""
    name = member.filename[:80]
    if member.flag_bits & 0x1:
        raise UsageError(f"{where}: member {name} is encrypted; save it again without a password")
    if member.compress_type not in _METHODS:
        raise UsageError(f"{where}: member {name} uses zip compression method {member.compress_type}, "
                         f"which is not read ({', '.join(_METHODS.values())} are); save it again")
    if member.file_size > limit:
        raise UsageError(f"{where}: member {name} declares {member.file_size} bytes uncompressed, beyond "
                         f"the {limit} read here; store it uncompressed or check the file")


def check_archive(members: Iterable[zipfile.ZipInfo], *, limit: int, where: str) -> None:
    """Every member checked, and all of them together at most ``limit`` bytes uncompressed."""
    total = 0
    for member in members:
        check_member(member, limit=limit, where=where)
        total += member.file_size
    if total > limit:
        raise UsageError(f"{where}: its members declare {total} bytes uncompressed, beyond the {limit} "
                         "its content needs; check the file")


def read_member(archive: zipfile.ZipFile, name: str, *, limit: int, where: str) -> bytes:
    """One member's bytes, its declared size checked first and its real size bounded too."""
    member = archive.getinfo(name)
    check_member(member, limit=limit, where=where)
    with archive.open(member) as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise UsageError(f"{where}: member {name[:80]} inflates beyond the {limit} bytes read here")
    return data


def tensor_file_limit(shape: Any, itemsize: int) -> int:
    """Bytes a tensor file may hold: the declared tensor plus headroom, or ``MAX_TENSOR_FILE``."""
    if not isinstance(shape, list) or not all(isinstance(n, int) and n >= 0 for n in shape):
        return MAX_TENSOR_FILE
    return min(MAX_TENSOR_FILE, math.prod(shape) * itemsize + TENSOR_HEADROOM)


# ----------------------------------------------------------------------------- JSON

def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {key[:60]!r} appears twice in one object")
        out[key] = value
    return out


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} does not fit a float")
    return value


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def depth(doc: Any) -> int:
    """How deeply lists and objects nest in ``doc`` (iterative: any depth is measured)."""
    deepest, stack = 0, [(doc, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def parse_json(text: str, *, where: str, fix: str, finite: bool = True) -> Any:
    """A JSON document with no repeated keys, at most ``MAX_JSON_DEPTH`` deep, and (when ``finite``)
    only finite numbers; a UsageError naming ``where`` and ending with ``fix`` otherwise."""
    numbers: dict[str, Any] = {"parse_float": _finite, "parse_constant": _refuse_constant} if finite else {}
    try:
        doc = json.loads(text, object_pairs_hook=_unique, **numbers)
    except RecursionError:
        raise UsageError(f"{where}: nested deeper than {MAX_JSON_DEPTH} levels; {fix}") from None
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        raise UsageError(f"{where}: not valid JSON ({' '.join(str(exc).split())[:120]}); {fix}") from None
    if depth(doc) > MAX_JSON_DEPTH:
        raise UsageError(f"{where}: nested deeper than {MAX_JSON_DEPTH} levels; {fix}")
    return doc

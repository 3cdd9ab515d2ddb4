"""Hostile zip files for the safety tests: members with a lying method or an encryption flag."""
from __future__ import annotations

import zipfile
from pathlib import Path


def write_zip(path: Path, members: dict[str, bytes], *, compress: bool = False) -> Path:
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def patch_members(path: Path, *, method: int | None = None, encrypted: bool = False) -> Path:
    """Rewrite every member's compression method and/or set its encryption flag, in place."""
    data = bytearray(path.read_bytes())
    for signature, flag_at, method_at in ((b"PK\x03\x04", 6, 8), (b"PK\x01\x02", 8, 10)):
        at = data.find(signature)
        while at >= 0:
            if encrypted:
                data[at + flag_at] |= 0x1
            if method is not None:
                data[at + method_at:at + method_at + 2] = method.to_bytes(2, "little")
            at = data.find(signature, at + 4)
    path.write_bytes(bytes(data))
    return path

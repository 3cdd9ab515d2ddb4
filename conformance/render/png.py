"""A tiny PNG encoder (zlib and struct only): the HTML report's cell maps as images of one
pixel per cell, which the browser scales up without smoothing."""
from __future__ import annotations

import base64
import struct
import zlib

import numpy as np


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_bytes(pixels: np.ndarray) -> bytes:
    """An RGB image (``pixels``: rows x columns x 3, uint8) as PNG bytes."""
    rows, cols, _ = pixels.shape
    raw = b"".join(b"\x00" + pixels[r].astype(np.uint8).tobytes() for r in range(rows))  # filter 0 per line
    header = struct.pack(">IIBBBBB", cols, rows, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(raw, 9))
            + _chunk(b"IEND", b""))


def data_uri(pixels: np.ndarray) -> str:
    """``data:image/png;base64,...`` of ``pixels``."""
    return "data:image/png;base64," + base64.b64encode(png_bytes(pixels)).decode("ascii")

"""How the console names a row: its short label, and the detail a short label leaves out.

A quantized row's variant is its setting (``S_IN:Z_IN:S_OUT:Z_OUT``, scales in full
precision), which would make the backend column 60 characters wide; the console names the row
``tflite[xnnpack]`` and gives the setting on a line of its own.  The JSON keeps the variant.
"""
from __future__ import annotations

from typing import Optional

from conformance.records import DEFAULT_OP, RowKey, backend_label
from conformance.reference.quantized import QDTYPES
from conformance.render.text import short_float


def short_label(row: RowKey) -> str:
    """``cann[ascend910b1/reference]``; a quantized row without its setting, ``tflite[xnnpack]``
    (the setting is in :func:`setting_line` and in the JSON row's variant)."""
    return backend_label(row.backend, row.profile, None if is_quantized(row) else row.variant)


def row_label(row: RowKey) -> str:
    """What a table's backend column shows: the short label, then the operator when it is not the
    default (``torch prelu``), as the row's spelling has it."""
    return short_label(row) + ("" if row.op == DEFAULT_OP else f" {row.op}")


def is_quantized(row: RowKey) -> bool:
    """A row of codes, whose variant is its quantization setting ``S_IN:Z_IN:S_OUT:Z_OUT``."""
    return row.dtype in QDTYPES and row.variant is not None and row.variant.count(":") == 3


def setting_line(row: RowKey) -> Optional[str]:
    """A quantized row's setting in words (full precision, as the JSON has it); None for others."""
    if not is_quantized(row):
        return None
    s_in, z_in, s_out, z_out = str(row.variant).split(":")
    return f"setting: input scale {s_in}, zero point {z_in}; output scale {s_out}, zero point {z_out}"


def setting_short(row: RowKey) -> str:
    """A quantized row's setting in a table cell: ``0.05:0→0.0299:-85`` (scales to 3 digits)."""
    s_in, z_in, s_out, z_out = str(row.variant).split(":")
    return f"{short_float(float(s_in))}:{z_in}→{short_float(float(s_out))}:{z_out}"


def panel_title(row: RowKey) -> str:
    """The row's spelling with its short label: a quantized row's setting is its panel's first line."""
    return short_label(row) + str(row)[len(row.label):]

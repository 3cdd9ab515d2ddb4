"""Small arrays of given values, one dtype each, for the golden's hand-checked tests."""
from __future__ import annotations

import numpy as np


def f32(*values: float) -> np.ndarray:
    """``values`` as a float32 array."""
    return np.array(values, dtype=np.float32)


def f16(*values: float) -> np.ndarray:
    """``values`` as a float16 array."""
    return np.array(values, dtype=np.float16)

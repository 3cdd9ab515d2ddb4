"""Process-wide memos of generated inputs: bounded, least recently used dropped first.

Every input the suite builds (edge pools, hypothesis-drawn examples, sweep and boundary
batches) is a pure function of its parameters, so a process that runs the suite many times
(the pytest plugin, ``conformance.check`` in a loop, the test suite) builds each once.  The
arrays a memo holds are made read-only before they are handed out, so no caller can change
what a later caller gets: a write raises, and the suite gives every backend its own copy.
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

import numpy as np

T = TypeVar("T")


def read_only(array: np.ndarray) -> np.ndarray:
    """``array`` with its writeable flag cleared (the same object)."""
    array.flags.writeable = False
    return array


def slopes_key(alphas: Iterable[float]) -> tuple[str, ...]:
    """Slopes as a memo key: their exact bits (+0.0 and -0.0 are two keys, as are 1/3 rounded two ways)."""
    return tuple(float(a).hex() for a in alphas)


class Memo(Generic[T]):
    """Values by key, at most ``entries`` of them and ``budget`` bytes (by ``weight``)."""

    def __init__(self, *, entries: int, budget: int, weight: Callable[[T], int]):
        self.entries, self.budget, self.weight = entries, budget, weight
        self._kept: OrderedDict[Hashable, tuple[T, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        os.register_at_fork(after_in_child=self._new_lock)  # a fork mid-get must not leave it held

    def _new_lock(self) -> None:
        self._lock = threading.Lock()

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        """The value kept for ``key``, else ``build()``'s, kept for the next caller."""
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                self._kept.move_to_end(key)
                return found[0]
        value = build()
        self._keep(key, value)
        return value

    def _keep(self, key: Hashable, value: T) -> None:
        size = self.weight(value)
        with self._lock:
            if key in self._kept or size > self.budget:
                return
            self._kept[key] = (value, size)
            self._bytes += size
            while len(self._kept) > self.entries or self._bytes > self.budget:
                _, (_, dropped) = self._kept.popitem(last=False)
                self._bytes -= dropped

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._kept)

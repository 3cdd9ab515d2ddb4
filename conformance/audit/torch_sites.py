"""Where each LeakyReLU of a built torch model was written, so that a factory's audit names
the same file:line and the same implicit defaults as the audit of its source.

- a module: the ``nn.LeakyReLU(...)``, ``nn.PReLU(...)`` or ``nn.RReLU(...)`` construction, recorded
  while the factory runs (a scoped wrapper of each class's ``__init__``), and whether it passed a slope
  (``negative_slope``; PReLU's ``init``; RReLU's ``lower`` or ``upper``);
- a functional call: the caller's frame in the fx trace's stack, and the call's own text at that
  line, read by the source audit (fx fills in the defaults a call left out, so the traced
  arguments cannot say whether a slope was written).
"""
from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from conformance.audit.record import Activation
from conformance.errors import UsageError

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<scope>\S+)')


#: A source file's path as the audit shows it, from the path Python ran it from.
Shown = Callable[[str], str]


@dataclass(frozen=True)
class Site:
    """A place in the user's source: file (as shown), line, the class/function around it, and for
    a module construction whether it passed a slope (None: not known)."""

    file: str
    line: int
    scope: str = ""
    passed: Optional[bool] = None

    @property
    def where(self) -> str:
        """``model.py:8 (Net.__init__)``, as the source audit writes it."""
        scope = self.scope.replace(".<locals>", "")
        return f"{self.file}:{self.line}" + ("" if scope in ("", "<module>") else f" ({scope})")


def shown_as(given: Mapping[str, str]) -> Shown:
    """How a path Python ran is shown: as the user wrote it (``given``: resolved path -> as
    written, for a ``file.py:factory`` target), else relative to the current directory when
    under it, else as it is."""
    def shown(file: str) -> str:
        if file in given:
            return given[file]
        try:
            relative = os.path.relpath(file)
        except ValueError:  # another drive
            return file
        return file if relative.startswith("..") else relative

    return shown


#: torch.nn class -> (the position of its first slope argument, the names of its slope arguments), as
#: torch/nn/modules/activation.py declares them.
SLOPE_ARGUMENTS: dict[str, tuple[int, tuple[str, ...]]] = {
    "LeakyReLU": (0, ("negative_slope",)),
    "PReLU": (1, ("init",)),
    "RReLU": (0, ("lower", "upper")),
}


def _recording(original: Callable[..., None], *, slope: tuple[int, tuple[str, ...]], sites: dict[int, Site],
               shown: Shown) -> Callable[..., None]:
    """``original`` (an ``__init__``), recording where it was called and whether it passed a slope."""
    position, names = slope

    @functools.wraps(original)
    def recording(self: Any, *args: Any, **kwargs: Any) -> None:
        code = sys._getframe(1)
        passed = len(args) > position or any(n in kwargs for n in names)
        sites[id(self)] = Site(shown(code.f_code.co_filename), code.f_lineno,
                               getattr(code.f_code, "co_qualname", ""), passed)
        original(self, *args, **kwargs)

    return recording


@contextlib.contextmanager
def constructions(*, shown: Shown) -> Iterator[dict[int, Site]]:
    """``id(module) -> Site`` of every ``nn.LeakyReLU``, ``nn.PReLU`` and ``nn.RReLU`` built inside the
    block (the wrappers are removed on leaving it)."""
    import torch

    sites: dict[int, Site] = {}
    originals = {name: getattr(torch.nn, name).__init__ for name in SLOPE_ARGUMENTS}
    for name, slope in SLOPE_ARGUMENTS.items():
        getattr(torch.nn, name).__init__ = _recording(originals[name], slope=slope, sites=sites, shown=shown)
    try:
        yield sites
    finally:
        for name, original in originals.items():
            getattr(torch.nn, name).__init__ = original


def call_site(stack_trace: Optional[str], *, shown: Shown) -> Optional[Site]:
    """The user's frame of an fx node's stack trace: the last one outside torch and this package."""
    import torch

    inside = (str(Path(torch.__file__).parent), str(Path(__file__).parents[1]))
    frames = [m for m in _FRAME.finditer(stack_trace or "") if not m["file"].startswith(inside)]
    if not frames:
        return None
    last = frames[-1]
    return Site(shown(last["file"]), int(last["line"]), last["scope"])


def _written(file: str) -> tuple[Activation, ...]:
    """The source audit of ``file`` (as shown: the path it is read from; nothing when it cannot be read),
    read again when the file it names is another (a relative path from another directory) or has changed."""
    try:
        stat = Path(file).stat()
    except OSError:
        return ()
    return _scanned(file, version=(str(Path(file).resolve()), stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=64)
def _scanned(file: str, *, version: tuple[str, int, int]) -> tuple[Activation, ...]:
    """The source audit of ``file`` as it is at ``version`` (its real path, modification time and size)."""
    from conformance.audit.source import read_source, scan

    try:
        return tuple(scan(read_source(Path(file)), filename=file))
    except UsageError:
        return ()


def written_at(site: Site, *, api: str) -> Optional[Activation]:
    """What the source audit reads of ``api`` at ``site``'s line (its where names the scope as written)."""
    prefix = f"{site.file}:{site.line}"
    return next((a for a in _written(site.file)
                 if a.api == api and (a.where == prefix or a.where.startswith(prefix + " "))), None)

"""Where each call of an msprobe dump was made: ``stack.json`` and ``construct.json`` beside dump.json.

``stack.json`` holds each call's Python stack, innermost frame first, as msprobe writes it:
``{"0": [["Functional.leaky_relu.0.forward", ...], ["File F, line L, in FN, \\n CODE", ...]]}``
(mindstudio-probe 26), or ``{"Functional.leaky_relu.0.forward": ["File ...", ...]}`` (older
releases).  ``construct.json`` maps a call to the module that made it (``Module.act.LeakyReLU.
forward.0``) when the dump's level records modules; with level L1 it is ``{}``.  Both files are
optional: a missing or unreadable one gives no location, never an error.

:func:`where_notes` turns them into a row's notes: the first frame outside installed packages
(the user's source line), the module, and the framework module the call went through
(``torch.nn.LeakyReLU``), saying so when its slope is that module's default, as ``conformance
audit`` does.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

from conformance.errors import UsageError
from conformance.ingest import bounded
from conformance.reference.defaults import DEFAULTS, DefaultSlope

MAX_STACK_JSON = 1 << 28  # bytes of one stack.json or construct.json
_FRAME = re.compile(r"^File (?P<file>.+?), line (?P<line>\d+), in (?P<function>[^,\n]+),?\s*(?P<code>.*)$", re.S)
_INSTALLED = ("site-packages/", "dist-packages/")
_FRAMEWORK = {"pytorch": "torch", "mindspore": "MindSpore"}  # the defaults table's framework names


@dataclass(frozen=True)
class Frame:
    """One frame of a call's stack."""

    file: str
    line: int
    function: str
    code: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line} in {self.function}" + (f": {self.code}" if self.code else "")

    @property
    def package_path(self) -> str:
        """The file's path inside its installed package (``torch/nn/modules/activation.py``)."""
        path = self.file.replace("\\", "/")
        for part in _INSTALLED:
            path = path.rsplit(part, 1)[-1]
        return path

    @property
    def installed(self) -> bool:
        """The frame is in an installed package (a framework), not the user's code."""
        return any(part in self.file.replace("\\", "/") for part in _INSTALLED)


@dataclass(frozen=True)
class Origin:
    """Where a call was made: its stack (innermost first) and the module that made it, if known."""

    stack: tuple[Frame, ...] = ()
    module: Optional[str] = None

    @property
    def caller(self) -> Optional[Frame]:
        """The innermost frame of the user's code."""
        return next((f for f in self.stack if not f.installed), None)


def parse_frame(text: Any) -> Optional[Frame]:
    """``File F, line L, in FN, \\n CODE`` as a frame (None when it is not one)."""
    match = _FRAME.match(text.strip()) if isinstance(text, str) else None
    if match is None:
        return None
    return Frame(match["file"], int(match["line"]), match["function"].strip(), " ".join(match["code"].split()))


def _read(file: Path) -> Any:
    """A JSON side file of the dump, or None when it is absent, too large or not JSON."""
    try:
        if not file.is_file() or file.stat().st_size > MAX_STACK_JSON:
            return None
        return bounded.parse_json(file.read_text(encoding="utf-8"), where=str(file), fix="", finite=False)
    except (OSError, UnicodeDecodeError, UsageError):
        return None


def _frames(items: Any) -> tuple[Frame, ...]:
    found = (parse_frame(t) for t in items) if isinstance(items, list) else ()
    return tuple(f for f in found if f is not None)


def read_stacks(dump_json: Path) -> dict[str, tuple[Frame, ...]]:
    """Call name -> its frames, from the ``stack.json`` beside ``dump_json`` (either layout)."""
    doc = _read(dump_json.with_name("stack.json"))
    stacks: dict[str, tuple[Frame, ...]] = {}
    for key, value in (doc.items() if isinstance(doc, dict) else ()):
        if isinstance(value, list) and len(value) == 2 and all(isinstance(v, list) for v in value):
            names, frames = value  # mindstudio-probe 26: [[names], [frames]]
            stacks.update({n: _frames(frames) for n in names if isinstance(n, str)})
        elif isinstance(value, list):
            stacks[key] = _frames(value)
    return stacks


def read_modules(dump_json: Path) -> dict[str, str]:
    """Call name -> the module that made it, from the ``construct.json`` beside ``dump_json``."""
    doc = _read(dump_json.with_name("construct.json"))
    return {k: v for k, v in doc.items() if isinstance(v, str)} if isinstance(doc, dict) else {}


def _module_api(origin: Origin, *, framework: str) -> Optional[tuple[DefaultSlope, Frame]]:
    """The framework module the call went through (its frame is in the module's declared source)."""
    name = _FRAMEWORK.get(framework)
    for frame in (f for f in origin.stack if f.installed):
        for entry in DEFAULTS:
            if entry.framework == name and ".nn." in entry.api and entry.source \
                    and frame.package_path.endswith(entry.source):
                return entry, frame
    return None


def where_notes(origin: Origin, *, alpha: float, framework: str, implicit: bool) -> tuple[str, ...]:
    """The notes of a call's row: its source line, its module, a module default slope it used.
    ``implicit`` says the call passed no slope (its own note already says so)."""
    notes = []
    if origin.caller is not None:
        notes.append(f"called at {origin.caller}")
    if origin.module is not None:
        notes.append(f"in module {origin.module}")
    through = _module_api(origin, framework=framework)
    if through is not None:
        entry, frame = through
        default = not implicit and np.float32(alpha) == np.float32(entry.declared)  # as frameworks store it
        notes.append(f"through {entry.api} ({frame.package_path}:{frame.line})"
                     + (f"; slope {alpha!r} is its {entry.framework} default, as when the module is built "
                        "without one" if default else ""))
    return tuple(notes)

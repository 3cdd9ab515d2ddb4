"""mindstudio-probe (msprobe) tensor dumps: every LeakyReLU call, as the arrays to judge.

A dump made with ``PrecisionDebugger`` (task ``tensor``, level ``L1``) is a
``step*/proc*/dump.json`` (``rank*`` when distributed) beside ``dump_tensor_data/``.
Each call is an entry named ``<Api>.<n>.<forward|backward>``:

- forward: ``input_args[0]`` is x, ``output[0]`` is y; the slope comes from
  ``input_kwargs.negative_slope`` (or ``alpha``), else from a float in
  ``input_args`` (``nn.LeakyReLU`` passes it positionally), else the call had
  none and the framework default applies (``reference.defaults``).
- backward: ``input[0]`` is dy and ``output[0]`` is dx; x and the slope come
  from the forward entry with the same number.
- aten ``leaky_relu_backward``'s forward entry is itself a backward:
  ``(grad_output, self, negative_slope, self_is_result)`` -> grad_input.

Tensors are read relative to dump.json (``dump_data_dir`` is an absolute path
on the machine that dumped, so it is never used): ``.pt`` only through
``torch.load(weights_only=True)``, ``.npy`` through ``ingest.arrays`` (never
unpickled).  File names come from the dump and must be plain names; a tensor
file that resolves outside the dump directory (a symlink out of it) is refused,
and so is one whose dtype or shape disagrees with what dump.json says of it.
dump.json itself must be at most ``MAX_DUMP_JSON`` bytes, with no repeated keys
and no deeper nesting than ``ingest.bounded.MAX_JSON_DEPTH``; a ``.pt`` is a zip
checked against the tensor its entry declares before torch reads it.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

import numpy as np

from conformance.dtypes import DTYPES
from conformance.errors import UsageError
from conformance.ingest import bounded
from conformance.ingest.arrays import Dump, load, table_dtype
from conformance.ingest.msprobe_stack import Origin, read_modules, read_stacks, where_notes
from conformance.ingest.torch_files import torch_tensor
from conformance.reference.defaults import entry_for

REDUMP = ("re-dump with mindstudio-probe's PrecisionDebugger, task \"tensor\", level \"L1\" "
          "(data_mode [\"all\"])")
_CALL = re.compile(r"^(?P<api>(?:\w+\.)*?(?P<op>leaky_relu_backward|leaky_relu_|leaky_relu|LeakyReLU)"
                   r"(?:\.\w+)?)\.(?P<n>\d+)\.(?P<dir>forward|backward)$")
_SLOPE_KEYS = ("negative_slope", "alpha")
_DEFAULT_API = {"pytorch": "torch.nn.functional.leaky_relu", "mindspore": "mindspore.ops.leaky_relu"}
MAX_DUMP_JSON = 1 << 30  # bytes of one dump.json


@dataclass(frozen=True)
class Call:
    """One LeakyReLU call of a dump: its arrays, slope, and how the slope was found."""

    name: str  # msprobe's API name, e.g. "Functional.leaky_relu.1.backward"
    direction: str
    alpha: float
    x: Dump
    out: Dump
    dy: Optional[Dump] = None
    out_file: str = ""
    note: Optional[str] = None  # e.g. the default slope used for a call that passed none
    where: tuple[str, ...] = ()  # where it was made: source line, module (``ingest.msprobe_stack``)


# ----------------------------------------------------------------------------- finding dump.json

def find_dumps(path: str, *, flag: str = "--msprobe") -> list[Path]:
    """The dump.json files under ``path`` (a dump.json, its directory, or a dump root), given as ``flag``."""
    root = Path(path)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise UsageError(f"{flag} {path}: no such directory; pass msprobe's dump_path "
                         "(holding step*/proc*/dump.json) or a directory holding dump.json")
    if (root / "dump.json").is_file():
        return [root / "dump.json"]
    found = sorted(root.glob("step*/*/dump.json")) or sorted(root.glob("*/dump.json"))
    if not found:
        raise UsageError(f"{flag} {path}: no dump.json under it (looked for step*/proc*/dump.json); {REDUMP}")
    return found


def read_header(file: Path) -> dict:
    """dump.json parsed and checked: a tensor dump of a framework this reader knows."""
    try:
        if not file.is_file():  # a FIFO or device would block the read
            raise UsageError(f"{file}: not a regular file; {REDUMP}")
        if file.stat().st_size > MAX_DUMP_JSON:
            raise UsageError(f"{file}: dump.json is larger than {MAX_DUMP_JSON} bytes; dump fewer "
                             f"steps or APIs; {REDUMP}")
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{file}: not a readable dump.json ({exc.__class__.__name__}); {REDUMP}") from None
    doc = bounded.parse_json(text, where=str(file), fix=REDUMP, finite=False)
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), dict) or "task" not in doc:
        raise UsageError(f"{file}: unknown dump.json layout (no top-level task and data); "
                         f"it may come from another msprobe version; {REDUMP}")
    if doc["task"] != "tensor" or doc.get("dump_data_dir") is None:
        raise UsageError(f"{file}: a {doc['task']} dump holds statistics only, no tensors; {REDUMP}")
    if not isinstance(doc.get("framework"), str) or doc["framework"] not in _DEFAULT_API:
        raise UsageError(f"{file}: framework {str(doc.get('framework'))[:40]!r} is not read "
                         f"(pytorch and mindspore are); {REDUMP}")
    return doc


# ----------------------------------------------------------------------------- tensors

def _declared_dtype(entry: dict) -> Optional[str]:
    """The table dtype an entry's metadata names (``torch.float16``, ``Float16``), if any."""
    name = entry.get("dtype")
    if not isinstance(name, str):
        return None
    short = name.rsplit(".", 1)[-1].lower()
    return short if short in DTYPES else None


def _check_metadata(dump: Dump, entry: dict, *, where: str) -> Dump:
    """The tensor file agrees with the dtype and shape dump.json declares for it."""
    shape, dtype = entry.get("shape"), _declared_dtype(entry)
    if isinstance(shape, list) and tuple(shape) != dump.shape:
        raise UsageError(f"{where}: dump.json says shape {shape} but the tensor file holds {list(dump.shape)}; "
                         f"the dump is inconsistent; {REDUMP}")
    if dtype is not None and dtype != dump.dtype.name:
        raise UsageError(f"{where}: dump.json says {dtype} but the tensor file holds {dump.dtype.name}; "
                         f"the dump is inconsistent; {REDUMP}")
    return dump


def _tensor_path(base: Path, name: Any, *, where: str) -> Path:
    """The file a ``data_name`` names: a plain name, inside the dump directory once resolved."""
    if not isinstance(name, str) or not name:
        raise UsageError(f"{where}: no data_name string (a statistics-only entry?); {REDUMP}")
    if Path(name).name != name or name in (".", ".."):
        raise UsageError(f"{where}: data_name {name[:80]!r} is not a plain file name; {REDUMP}")
    file = base / "dump_tensor_data" / name
    if not file.resolve().is_relative_to(base.resolve()):
        raise UsageError(f"{where}: {name[:80]} is a link out of the dump directory, which is not "
                         f"followed; copy the tensor into the dump or {REDUMP}")
    return file


def load_tensor(entry: Any, *, base: Path, where: str) -> Dump:
    """The tensor an entry's ``data_name`` names, read from the dump's data directory."""
    if not isinstance(entry, dict) or "type" not in entry:
        raise UsageError(f"{where}: not a tensor entry; unknown layout; {REDUMP}")
    name = entry.get("data_name")
    file = _tensor_path(base, name, where=where)
    if not file.is_file():
        raise UsageError(f"{where}: tensor file {file} is missing; copy the whole dump directory or {REDUMP}")
    if file.suffix == ".npy":
        return _check_metadata(load(str(file), flag=where, bits_dtype=None), entry, where=where)
    if file.suffix != ".pt":
        raise UsageError(f"{where}: {name} is neither .pt nor .npy; {REDUMP}")
    declared = _declared_dtype(entry)
    itemsize = np.dtype(np.float64).itemsize if declared is None else DTYPES[declared].dtype.itemsize
    raw = torch_tensor(file, hint=REDUMP, limit=bounded.tensor_file_limit(entry.get("shape"), itemsize), where=where)
    return _check_metadata(Dump(raw, table_dtype(raw, flag=where, bits_dtype=None)), entry, where=where)


# ----------------------------------------------------------------------------- slopes

def _scalar(arg: Any) -> Optional[float]:
    """The value of a float/int argument entry (bools are not slopes)."""
    if isinstance(arg, dict) and arg.get("type") in ("float", "int") and isinstance(arg.get("value"), (int, float)) \
            and not isinstance(arg["value"], bool):
        try:
            value = float(arg["value"])
        except OverflowError:
            value = math.inf
        if not math.isfinite(value):
            raise UsageError(f"the slope {str(arg['value'])[:40]} in dump.json is not a finite number; {REDUMP}")
        return value
    return None


def slope(entry: dict, *, skip: int = 1) -> Optional[float]:
    """The slope a forward entry passed: keyword first, then the first number after ``skip`` args."""
    kwargs = entry.get("input_kwargs") or {}
    for key in _SLOPE_KEYS:
        if key in kwargs and _scalar(kwargs[key]) is not None:
            return _scalar(kwargs[key])
    numbers = [_scalar(a) for a in (entry.get("input_args") or [])[skip:]]
    return next((v for v in numbers if v is not None), None)


def default_slope(framework: str) -> tuple[float, str]:
    """The framework's default slope and the note that says it was used."""
    value = entry_for(_DEFAULT_API[framework]).declared
    return value, f"no slope passed: the framework default {value!r} was used"


# ----------------------------------------------------------------------------- calls

def _args(entry: dict, key: str, *, where: str) -> list:
    value = entry.get(key)
    if not isinstance(value, list) or not value:
        raise UsageError(f"{where}: no {key} list; unknown layout (another msprobe version?); {REDUMP}")
    return value


def _slope_of(entry: dict, *, framework: str, skip: int) -> tuple[float, Optional[str]]:
    found = slope(entry, skip=skip)
    return (found, None) if found is not None else default_slope(framework)


def _forward(name: str, entry: dict, *, base: Path, framework: str) -> Call:
    x = load_tensor(_args(entry, "input_args", where=name)[0], base=base, where=f"{name} input 0")
    out_entry = _args(entry, "output", where=name)[0]
    out = load_tensor(out_entry, base=base, where=f"{name} output 0")
    alpha, note = _slope_of(entry, framework=framework, skip=1)
    return Call(name, "forward", alpha, x, out, out_file=out_entry["data_name"], note=note)


def _aten_backward(name: str, entry: dict, *, base: Path, framework: str) -> Call:
    """aten ``leaky_relu_backward(grad_output, self, negative_slope, self_is_result)``."""
    args = _args(entry, "input_args", where=name)
    if len(args) < 2:
        raise UsageError(f"{name}: expected grad_output and self in input_args; {REDUMP}")
    dy = load_tensor(args[0], base=base, where=f"{name} input 0")
    x = load_tensor(args[1], base=base, where=f"{name} input 1")
    out_entry = _args(entry, "output", where=name)[0]
    alpha, note = _slope_of(entry, framework=framework, skip=2)
    return Call(name, "backward", alpha, x, load_tensor(out_entry, base=base, where=f"{name} output 0"),
                dy=dy, out_file=out_entry["data_name"], note=note)


def _backward(name: str, entry: dict, forward: Optional[dict], *, base: Path, framework: str) -> Call:
    """A backward entry: dy in, dx out; x and the slope from its forward entry."""
    if forward is None:
        raise UsageError(f"{name}: its forward entry (x and the slope) is not in the dump; "
                         f"dump forward and backward together; {REDUMP}")
    fwd_name = name.rsplit(".", 1)[0] + ".forward"
    x = load_tensor(_args(forward, "input_args", where=fwd_name)[0], base=base, where=f"{fwd_name} input 0")
    dy = load_tensor(_args(entry, "input", where=name)[0], base=base, where=f"{name} input 0")
    out_entry = _args(entry, "output", where=name)[0]
    alpha, note = _slope_of(forward, framework=framework, skip=1)
    return Call(name, "backward", alpha, x, load_tensor(out_entry, base=base, where=f"{name} output 0"),
                dy=dy, out_file=out_entry["data_name"], note=note)


def _calls(doc: dict, *, base: Path) -> Iterator[Call]:
    """Every LeakyReLU call of a checked dump.json document, in the dump's order."""
    data, framework = doc["data"], doc["framework"]
    for name, entry in data.items():
        match = _CALL.match(name)
        if match is None:
            continue
        if not isinstance(entry, dict):
            raise UsageError(f"{name}: entry is not an object; unknown layout; {REDUMP}")
        if match["op"] == "leaky_relu_backward":
            if match["dir"] == "forward":
                yield _aten_backward(name, entry, base=base, framework=framework)
            continue  # the gradient of a gradient is not a LeakyReLU call
        if match["dir"] == "forward":
            yield _forward(name, entry, base=base, framework=framework)
        else:
            yield _backward(name, entry, data.get(f"{match['api']}.{match['n']}.forward"),
                            base=base, framework=framework)


def calls(file: Path) -> Iterator[Call]:
    """Every LeakyReLU call of one dump.json, in the dump's order, with where it was made
    (a backward call was made where its forward was)."""
    doc = read_header(file)
    stacks, modules = read_stacks(file), read_modules(file)
    for call in _calls(doc, base=file.parent):
        forward = call.name.rsplit(".", 1)[0] + ".forward"
        origin = Origin(stacks.get(call.name) or stacks.get(forward, ()),
                        modules.get(call.name) or modules.get(forward))
        yield replace(call, where=where_notes(origin, alpha=call.alpha, framework=doc["framework"],
                                              implicit=call.note is not None))


def read_calls(path: str, *, flag: str = "--msprobe") -> list[Call]:
    """Every LeakyReLU call under ``path``, given as ``flag`` (names prefixed by step/proc when
    there are several dump.json files); a dump with none is an input error."""
    files = find_dumps(path, flag=flag)
    found = [c if len(files) == 1 else replace(c, name=f"{file.parent.parent.name}/{file.parent.name}/{c.name}")
             for file in files for c in calls(file)]
    if not found:
        raise UsageError(f"{flag} {path}: the dump holds no LeakyReLU call "
                         f"(Functional.leaky_relu, leaky_relu_, aten leaky_relu*); check the dump's "
                         f"scope/list filters; {REDUMP}")
    return found

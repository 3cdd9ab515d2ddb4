"""The gate configuration a run is judged under, read from the defaults, pyproject.toml and ``--config``.

Defaults first (torch.testing's tolerances, max ULP 1, and the policy each backend declares,
see ``BackendBase.allowed``), then ``[tool.conformance]`` of ``./pyproject.toml``, then a
``--config`` TOML file (top-level keys or a ``[tool.conformance]`` table).  This is where the
backend registry meets the gate: ``judge`` receives the resulting :class:`GateConfig` as data.
"""
from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

from conformance.backends import builtin_policy
from conformance.backends import names as backend_names
from conformance.dtypes import DTYPES
from conformance.errors import UsageError
from conformance.frameworks.quantized_profiles import quantized_policy
from conformance.judge.gate import CATEGORIES, GateConfig, split_key

_KEYS = ("tolerances", "max_ulp", "strict_zeros", "policy")


def default_config() -> GateConfig:
    """torch.testing's tolerances, max ULP 1 and every registered backend's declared policy,
    the quantized profiles' own among them."""
    return GateConfig(policy={**builtin_policy(), **quantized_policy()})


def _number(value: Any, *, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0:
        raise UsageError(f"{where} must be a finite number >= 0, got {value!r}")
    return float(value)


def _max_ulp(value: Any, *, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"{where} must be an integer >= 0, got {value!r}")
    return value


def _tolerances(table: Any, base: Mapping[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    if not isinstance(table, dict):
        raise UsageError("tolerances must be a table like float16 = { rtol = 1e-3, atol = 1e-5 }")
    out = dict(base)
    for name, entry in table.items():
        if name not in DTYPES or not isinstance(entry, dict) or set(entry) - {"rtol", "atol"}:
            raise UsageError(f"tolerances.{name}: use a dtype of {', '.join(DTYPES)} "
                             "with keys rtol and atol")
        rtol, atol = out[name]
        out[name] = (_number(entry.get("rtol", rtol), where=f"tolerances.{name}.rtol"),
                     _number(entry.get("atol", atol), where=f"tolerances.{name}.atol"))
    return out


def policy_backends() -> tuple[str, ...]:
    """Every backend name a row can carry: the registered backends and ``dump``."""
    return (*backend_names(), "dump")


def _categories(cats: Any, *, backend: str) -> frozenset[str]:
    """A policy entry: a list of category names, nothing else (TOML tables and nested lists refused)."""
    if not isinstance(cats, list) or not all(isinstance(c, str) for c in cats):
        raise UsageError(f'policy.{backend} must be a list of category names, like ["rounding"]')
    unknown = set(cats) - set(CATEGORIES)
    if unknown:
        raise UsageError(f"policy.{backend}: unknown categories {sorted(unknown)}; "
                         f"choose from {', '.join(CATEGORIES)}")
    return frozenset(cats)


def _check_profile(backend: str, profile: str, *, key: str) -> None:
    """A ``backend[profile]`` key of a registered backend names a profile it declares; the key of
    an import path is a name to match, never imported (a config file must not run code)."""
    from conformance.backends import is_import_path, profiles_of

    if is_import_path(backend):
        return
    try:
        choices = profiles_of(backend)[0]
    except UsageError:  # a backend that cannot load here declares nothing we can check
        return
    if profile not in choices:
        raise UsageError(f"policy.{key}: {backend} has no profile {profile!r}; "
                         f"choose from {', '.join(choices) or 'none (it takes no profile)'}")


def _policy(table: Any, base: Mapping[str, frozenset[str]]) -> dict[str, frozenset[str]]:
    if not isinstance(table, dict):
        raise UsageError('policy must be a table like tensorflow = ["alpha-precision"]')
    out = dict(base)
    known = policy_backends()
    for key, cats in table.items():
        backend, profile = split_key(key)
        if key in base:  # an entry a backend declares (the quantized profiles among them)
            out[key] = _categories(cats, backend=key)
            continue
        if backend not in known and ":" not in backend:  # "module:factory": a user's own backend
            raise UsageError(f"policy.{key}: unknown backend; choose from {', '.join(known)} "
                             "(a profile as backend[profile], e.g. keras[numpy])")
        if profile is not None:
            _check_profile(backend, profile, key=key)
        out[key] = _categories(cats, backend=key)
    return out


def apply_table(config: GateConfig, table: Mapping[str, Any], *, source: str) -> GateConfig:
    """Overlay one ``[tool.conformance]``-shaped table on ``config``."""
    unknown = set(table) - set(_KEYS)
    if unknown:
        raise UsageError(f"{source}: unknown keys {sorted(unknown)}; allowed: {', '.join(_KEYS)}")
    changes: dict[str, Any] = {}
    if "tolerances" in table:
        changes["tolerances"] = _tolerances(table["tolerances"], config.tolerances)
    if "max_ulp" in table:
        changes["max_ulp"] = _max_ulp(table["max_ulp"], where=f"{source}: max_ulp")
    if "strict_zeros" in table:
        if not isinstance(table["strict_zeros"], bool):
            raise UsageError(f"{source}: strict_zeros must be true or false")
        changes["strict_zeros"] = table["strict_zeros"]
    if "policy" in table:
        changes["policy"] = _policy(table["policy"], config.policy)
    return replace(config, **changes)


def _read_toml(path: Path) -> dict:
    if not path.exists():
        raise UsageError(f"config file {path} does not exist; pass an existing TOML file")
    if path.is_dir() or not (path.is_file() or path.resolve() == Path(os.devnull)):  # /dev/zero never ends
        raise UsageError(f"config file {path} is not a regular file; pass a TOML file")
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise UsageError(f"config file {path} cannot be read ({exc.strerror}); pass a readable TOML file") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"config file {path} is not valid TOML ({exc}); fix or remove it") from None
    except RecursionError:
        raise UsageError(f"config file {path} nests too deeply to read; a gate configuration is a few "
                         "flat tables") from None


def _conformance_table(doc: dict, *, source: str) -> Optional[dict]:
    """The ``[tool.conformance]`` table, None when the file has none; a UsageError when it is no table."""
    tool = doc.get("tool")
    table = tool.get("conformance") if isinstance(tool, dict) else None
    if table is not None and not isinstance(table, dict):
        raise UsageError(f"{source}: tool.conformance must be a table ([tool.conformance]), "
                         f"got {type(table).__name__}")
    return table


def allowed_categories(names: Optional[Iterable[str]], *, flag: str = "--allow") -> frozenset[str]:
    """Category names checked against the registry; a UsageError naming the choices otherwise."""
    chosen = frozenset(names or ())
    unknown = sorted(chosen - set(CATEGORIES))
    if unknown:
        raise UsageError(f"{flag} {', '.join(unknown)}: unknown category; choose from {', '.join(CATEGORIES)}")
    return chosen


def with_tolerances(config: GateConfig, *, rtol: Optional[float] = None, atol: Optional[float] = None,
                    max_ulp: Optional[int] = None, dtypes: Optional[Iterable[str]] = None,
                    prefix: str = "") -> GateConfig:
    """``config`` with ``rtol`` and ``atol`` (given together, as torch.testing takes them) for
    ``dtypes`` (default: every output dtype) and ``max_ulp``; a UsageError naming the argument
    (``prefix`` + its name: ``--rtol`` on the command line) when one is not a number >= 0."""
    if (rtol is None) != (atol is None):
        raise UsageError(f"pass {prefix}rtol and {prefix}atol together, or neither "
                         "(as torch.testing.assert_close takes them)")
    if rtol is not None:
        pair = (_number(rtol, where=f"{prefix}rtol"), _number(atol, where=f"{prefix}atol"))
        chosen = list(config.tolerances) if dtypes is None else list(dtypes)
        config = replace(config, tolerances={**config.tolerances, **dict.fromkeys(chosen, pair)})
    if max_ulp is not None:
        config = replace(config, max_ulp=_max_ulp(max_ulp, where=f"{prefix}max_ulp"))
    return config


def load_config(path: Optional[str] = None, *, pyproject: Optional[str] = None,
                strict_zeros: Optional[bool] = None, strict: bool = False,
                allow: Optional[Iterable[str]] = None) -> GateConfig:
    """Defaults, then ``[tool.conformance]`` in pyproject.toml, then the ``--config`` file; then
    ``strict`` (any bit difference fails) and ``allow`` (categories every backend may show)."""
    config = default_config()
    project = Path(pyproject) if pyproject is not None else Path("pyproject.toml")
    if project.is_file():
        table = _conformance_table(_read_toml(project), source=str(project))
        if table is not None:
            config = replace(apply_table(config, table, source=str(project)), sources=(str(project),))
    if path is not None:
        if not path.strip():
            raise UsageError("--config needs a file path (got an empty one)")
        doc = _read_toml(Path(path))
        table = _conformance_table(doc, source=path)
        if table is None and "tool" in doc:
            raise UsageError(f"{path}: no [tool.conformance] table; put the gate settings there "
                             f"or at the top level ({', '.join(_KEYS)})")
        config = apply_table(config, table if table is not None else doc, source=path)
        config = replace(config, sources=(*config.sources, path))
    config = replace(config, strict=strict, allowed=allowed_categories(allow))
    return replace(config, strict_zeros=True) if strict_zeros else config



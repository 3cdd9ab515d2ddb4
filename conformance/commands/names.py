"""The names a command takes, checked against what is registered: a choice among a list, a
backend, the backends to compare with, a backend's profile and variant."""
from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Optional

from conformance.commands.args import items
from conformance.errors import UsageError


def choice(value: Optional[str], choices: Sequence[str], *, flag: str) -> Optional[str]:
    """``value`` when it is one of ``choices`` (or None); a UsageError listing them otherwise."""
    if value is not None and value not in choices:
        raise UsageError(f"{flag} {value!r} is unknown; choose from {', '.join(choices)}")
    return value


def checked_backend(name: str, *, flag: str) -> str:
    """A backend name or import path, validated (an import path that does not load is exit 2
    before any work)."""
    from conformance.backends import is_import_path, load
    from conformance.backends import names as backend_names

    if is_import_path(name):
        load(name)
        return name
    return choice(name, backend_names(), flag=flag) or name


def profiled(names: Sequence[str], *, profile: Optional[str],
             variant: Optional[str]) -> tuple[tuple[str, ...], Optional[str], Optional[str]]:
    """The backends ``names``, validated, spelled as a report prints them (``cann[ascend910b3/reference]``)
    or not: their bare names, and the profile and variant their brackets give, with --profile and
    --variant (a UsageError when two of them differ)."""
    from conformance.records import label_parts

    found = []
    for name in names:
        base, given_profile, given_variant = label_parts(name)
        found.append(checked_backend(base, flag="--backend"))
        profile = _one(profile, given_profile, flag="--profile", name=name)
        variant = _one(variant, given_variant, flag="--variant", name=name)
    return tuple(dict.fromkeys(found)), profile, variant


def _one(flag_value: Optional[str], bracket_value: Optional[str], *, flag: str, name: str) -> Optional[str]:
    if flag_value is not None and bracket_value is not None and flag_value != bracket_value:
        raise UsageError(f"--backend {name} and {flag} {flag_value} differ; give one of them")
    return bracket_value if bracket_value is not None else flag_value


def references_from(values: Optional[Sequence[str]]) -> tuple[str, ...]:
    """The --reference backends (repeated or comma-separated), validated as --backend is."""
    names = items(values, flag="--reference") or ()
    return tuple(dict.fromkeys(checked_backend(n, flag="--reference") for n in names))


def check_profile(args: argparse.Namespace, backends: Sequence[str]) -> tuple[Optional[str], Optional[str]]:
    """``--profile`` and ``--variant`` checked against what ``backends`` declare; (None, None)
    without them."""
    if not (args.profile or args.variant):
        return None, None
    profiles, variants = _profile_choices(backends)
    if not (profiles or variants):
        raise UsageError(_profile_hint(args.profile, args.variant))
    return (choice(args.profile, profiles, flag="--profile"),
            choice(args.variant, variants, flag="--variant"))


def _profile_choices(backends: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The --profile and --variant values the selected backends declare."""
    from conformance.backends import profiles_of

    found = [profiles_of(name) for name in backends]
    return (tuple(dict.fromkeys(p for ps, _ in found for p in ps)),
            tuple(dict.fromkeys(v for _, vs in found for v in vs)))


def _profile_hint(profile: Optional[str], variant: Optional[str]) -> str:
    """Which backend a --profile/--variant value belongs to, as a fix to suggest."""
    from conformance.backends import names as backend_names

    declared = {n: _safe_profiles(n) for n in backend_names()}
    having = [n for n, (ps, vs) in declared.items() if profile in ps or variant in vs] or \
        [n for n, pv in declared.items() if any(pv)] or ["NAME"]
    return (f"--profile/--variant apply to the {' or '.join(having)} backend; "
            f"add --backend {having[0]}")


def _safe_profiles(name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    from conformance.backends import profiles_of

    try:
        return profiles_of(name)
    except UsageError:
        return (), ()

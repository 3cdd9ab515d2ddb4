"""Install requirements into the Python running this script, with uv when it can, else with pip.

``make setup`` runs ``.venv/bin/python tools/install.py -- $(TORCH_SPEC) -e ".[dev,all]"``.
uv resolves and installs in one pass, byte-compiling on every core (``--compile-bytecode``);
pip does the same work in about twice the time (docs/setup.md has the figures).  uv is told what
pip would use: the indexes, find-links, constraints and trusted hosts of pip's own configuration
(``pip config list``: its files and the ``PIP_*`` environment), with pip's way of taking the best
version across all indexes, and nothing of uv's own configuration (its ``uv.toml`` files and
``UV_*`` settings pip never sees).  A pip setting uv has no equivalent for, uv missing and not
installable, or uv failing: the same requirements go to pip (``--no-compile``, then
``compileall`` on every core), and one line says why.  uv itself is installed beside the
environment (``<venv>/.uv``), never into it, so the environment holds the same packages either way.
"""
from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from pathlib import Path

#: pip settings whose values list several items (split on whitespace, as pip splits them; the
#: binary choices on commas too, as pip reads them).
_MANY = frozenset({"extra-index-url", "find-links", "constraint", "trusted-host", "only-binary", "no-binary"})
_COMMA_LISTS = frozenset({"only-binary", "no-binary"})
#: uv's own environment that changes neither what is installed nor from where.
_UV_KEPT = frozenset({"UV_CACHE_DIR"})
#: The uv pip installs when none is on the PATH: the release line whose options this script uses.
UV_SPEC = "uv>=0.13,<0.14"
#: pip settings that change neither what is installed nor from where.
_COSMETIC = frozenset({"disable-pip-version-check", "no-python-version-warning", "progress-bar", "quiet",
                       "verbose", "no-color", "log", "log-file", "root-user-action", "no-warn-script-location",
                       "no-warn-conflicts", "no-input", "cache-dir", "no-cache-dir", "retries", "compile",
                       "no-compile", "upgrade-strategy", "exists-action", "python-version-warning"})
#: pip settings uv reads from the environment, and the variable it reads.
_AS_ENVIRONMENT = {"cert": "SSL_CERT_FILE", "default-timeout": "UV_HTTP_TIMEOUT", "timeout": "UV_HTTP_TIMEOUT",
                   "proxy": "ALL_PROXY"}
#: pip's precedence: the ``install`` section over ``global``, the ``PIP_*`` environment over both.
_SECTIONS = ("global", "install", ":env:")
_TRUE = frozenset({"1", "yes", "true", "on", "y", "t"})


class NoUv(Exception):
    """uv cannot stand in for pip here; the message says why."""


def pip_settings(listing: str) -> dict[str, str]:
    """The settings ``pip install`` applies, from ``pip config list``'s output (``section.key='value'``)."""
    found: dict[str, dict[str, str]] = {section: {} for section in _SECTIONS}
    for line in listing.splitlines():
        name, sep, value = line.partition("=")
        section, _, key = name.rpartition(".")
        if sep and section in found:
            try:
                found[section][key] = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                raise NoUv(f"pip config list printed a line it cannot be read from: {line!r}") from None
    return {key: value for section in _SECTIONS for key, value in found[section].items()}


def _flag(value: str) -> bool:
    return value.strip().lower() in _TRUE


def _option(key: str, value: str) -> list[str]:
    """uv's arguments for one pip setting; NoUv when uv has no equivalent."""
    items = (value.replace(",", " ") if key in _COMMA_LISTS else value).split() if key in _MANY else [value]
    if key == "index-url":
        return ["--default-index", value]
    if key in ("extra-index-url", "find-links", "only-binary", "no-binary"):
        return [arg for item in items for arg in (f"--{key}", item)]
    if key == "constraint":
        return [arg for item in items for arg in ("--constraints", item)]
    if key == "trusted-host":
        return [arg for item in items for arg in ("--allow-insecure-host", item)]
    if key in ("no-index", "require-hashes", "no-build-isolation"):
        return [f"--{key}"] if _flag(value) else []
    if key == "pre":
        return ["--prerelease", "allow"] if _flag(value) else []
    raise NoUv(f"pip setting {key!r} has no uv equivalent here")


def uv_arguments(settings: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """uv's command-line arguments and environment variables for pip's settings."""
    arguments = ["--index-strategy", "unsafe-best-match"]  # pip takes the best version across indexes
    environment: dict[str, str] = {}
    for key, value in settings.items():
        if key in _AS_ENVIRONMENT:
            environment[_AS_ENVIRONMENT[key]] = value
        elif key not in _COSMETIC:
            arguments += _option(key, value)
    return arguments, environment


def _pip_install(python: str, *arguments: str) -> list[str]:
    return [python, "-m", "pip", "install", "--disable-pip-version-check", "--root-user-action=ignore", *arguments]


def find_uv(python: str, *, home: Path) -> str:
    """uv on the PATH, or installed by pip into ``home`` (beside the environment, not in it)."""
    on_path = shutil.which("uv")
    if on_path:
        return on_path
    uv = home / "bin" / "uv"
    if not uv.exists():
        done = subprocess.run(_pip_install(python, "-qq", "--no-compile", "--target", str(home), UV_SPEC),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if done.returncode != 0 or not uv.exists():
            raise NoUv("uv is not installed and pip could not install it")
    return str(uv)


def install_with_uv(python: str, requirements: Sequence[str], *, home: Path) -> None:
    """``uv pip install`` of ``requirements`` under pip's settings, byte-compiled; NoUv when it cannot."""
    listed = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True)
    if listed.returncode != 0:
        raise NoUv("pip config list failed")
    listing = listed.stdout
    arguments, environment = uv_arguments(pip_settings(listing))
    uv = find_uv(python, home=home)
    command = [uv, "pip", "install", "-q", "--no-config", "--compile-bytecode", "--python", python, *arguments,
               *requirements]
    own = {name: value for name, value in os.environ.items() if not name.startswith("UV_") or name in _UV_KEPT}
    if subprocess.run(command, env={**own, **environment}).returncode != 0:  # pip's settings over the rest
        raise NoUv("uv failed")


def install_with_pip(python: str, requirements: Sequence[str]) -> None:
    """``pip install`` of ``requirements``, then byte-compiled on every core (pip does one file at a time)."""
    subprocess.run(_pip_install(python, "-q", "--no-compile", *requirements), check=True)
    # a file that does not compile (a package's Python 2 test data) is skipped, as pip skips it
    subprocess.run([python, "-m", "compileall", "-q", "-j", "0", sysconfig.get_path("purelib")],
                   stdout=subprocess.DEVNULL, check=False)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--installer", choices=("uv", "pip"), default="uv",
                        help="uv (falling back to pip when it cannot), or pip only")
    parser.add_argument("requirements", nargs="+", help="what `pip install` takes (after --)")
    args = parser.parse_args(argv)
    try:
        return _install(sys.executable, args.requirements, installer=args.installer)
    except KeyboardInterrupt:
        print("set-up: interrupted; run `make setup` again to finish", file=sys.stderr)
        return 130


def _install(python: str, requirements: Sequence[str], *, installer: str) -> int:
    """Install with ``installer`` (uv falling back to pip, or pip); the exit status."""
    if installer == "uv":
        try:
            install_with_uv(python, requirements, home=Path(sys.prefix) / ".uv")
            return 0
        except NoUv as why:
            print(f"set-up: {why}; installing with pip", file=sys.stderr)
    try:
        install_with_pip(python, requirements)
    except subprocess.CalledProcessError as failed:
        print(f"set-up: pip install failed (exit {failed.returncode}); see its messages above", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

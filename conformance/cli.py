"""The conformance command line: one sub-command per task, each in ``conformance/commands/``.

Each sub-command lives in ``conformance/commands/<name>.py``; this module only
builds the parser and maps errors to exit codes: 0 pass, 1 gate failure,
2 usage or input error (one line, never a traceback), 3 internal error (one
line and the path of the saved traceback; the finished rows are written as a
partial report), 130 on Ctrl-C, 143 on SIGTERM (which goes the same way as
Ctrl-C: partial reports, see ``conformance.interrupts``).  Output whose reader went away
(``conformance run | head -1``) is dropped from there on while the command finishes: its
reports are written whole and its exit code is its verdict's.
"""
from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import metadata
from typing import Any, NoReturn, Optional, TextIO

from conformance import jit
from conformance.errors import UsageError, one_line
from conformance.interrupts import describe, exit_code, exit_now, os_exit_raises, sigterm_as_interrupt

COMMANDS = ("run", "compare", "diff", "audit", "export-cases", "tiling", "defaults", "replay", "selftest",
            "worker", "sweep", "quantized", "agree")


class _Parser(argparse.ArgumentParser):
    """argparse with exit code 2 and a single line on bad arguments."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (see {self.prog} --help)")


DESCRIPTION = ("Prove LeakyReLU implementations bit-exact against an exact reference, and name the cause "
               "of every element that differs. Exit codes: 0 pass, 1 gate failure, 2 usage or input error, "
               "3 internal error, 130/143 interrupted.")


def version() -> str:
    """The installed package's version ("unknown" when run from a checkout that was never installed)."""
    try:
        return metadata.version("conformance")
    except metadata.PackageNotFoundError:
        return "unknown"


def build_parser(*, only: Optional[str] = None) -> argparse.ArgumentParser:
    """The whole command line; with ``only``, every command is still a choice but only that
    one's module is imported and configured (a worker starts without loading every command)."""
    parser = _Parser(prog="conformance", description=DESCRIPTION,
                     epilog="Run 'conformance COMMAND --help' for the options of one command.")
    parser.add_argument("--version", action="version", version=f"conformance {version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMANDS:
        if only is not None and name != only:
            sub.add_parser(name)
            continue
        module = importlib.import_module(f"conformance.commands.{name.replace('-', '_')}")
        child = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.configure(child)
        child.set_defaults(_execute=module.execute)
    return parser


def named_command(argv: Sequence[str]) -> Optional[str]:
    """The command ``argv`` names before any top-level option (``--help``, ``--version``) that
    would list every command; None when there is none."""
    for token in argv:
        if token.startswith("-"):
            return None
        return token if token in COMMANDS else None
    return None


_NEGATIVE_VALUE = re.compile(r"^-([\d.]|inf|nan)", re.IGNORECASE)  # -1/3, -1e-3, -.5, -inf: values


def join_negative_values(argv: Sequence[str]) -> list[str]:
    """``--alpha -1/3`` as ``--alpha=-1/3``: argparse only knows plain negative numbers."""
    out: list[str] = []
    for token in argv:
        if out and out[-1].startswith("--") and "=" not in out[-1] and _NEGATIVE_VALUE.match(token):
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out


class _Reader:
    """A text stream whose writes go nowhere once its reader has gone (a closed pipe): the
    descriptor is pointed at the null device, so neither this command nor the interpreter's
    flush at exit sees the broken pipe again."""

    def __init__(self, stream: TextIO):
        self.stream, self.gone = stream, False

    def _drop(self) -> None:
        self.gone = True
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), self.stream.fileno())
        except (OSError, ValueError, AttributeError):  # a stream with no descriptor (a test's capture)
            pass

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self.stream.write(text)
            except BrokenPipeError:
                self._drop()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._drop()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextmanager
def _closed_pipes_dropped() -> Iterator[None]:
    """stdout and stderr as :class:`_Reader` streams while the command runs."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Reader(saved[0]), _Reader(saved[1])  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def run() -> NoReturn:
    """The ``conformance`` program (the console script, ``python -m conformance``): :func:`main`,
    then the process ends by :func:`conformance.interrupts.exit_now`."""
    exit_now(main())


def main(argv: Optional[Sequence[str]] = None) -> int:
    with sigterm_as_interrupt(), os_exit_raises(), _closed_pipes_dropped():
        return _main(argv)


def _main(argv: Optional[Sequence[str]]) -> int:
    try:
        args = _parsed(join_negative_values(sys.argv[1:] if argv is None else argv))
        jit.threads()  # a bad CONFORMANCE_THREADS is exit 2 before any work, not in a forked lane
        return _executed(args)
    except UsageError as exc:
        print(f"conformance: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM as interrupts.Terminated
        print(f"conformance: {describe(exc)}", file=sys.stderr)
        return exit_code(exc)
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as exc:  # a bug: one line, the traceback in a file
        print(f"conformance: internal error: {one_line(exc)} (a bug in conformance; traceback saved to "
              f"{_save_traceback(exc)}; finished rows, if any, were written as a partial report)",
              file=sys.stderr)
        return INTERNAL_ERROR


INTERNAL_ERROR = 3


def _parsed(argv: Sequence[str]) -> argparse.Namespace:
    """The arguments; one that no option takes is named with the help of its sub-command."""
    args, extra = build_parser(only=named_command(argv)).parse_known_args(argv)
    if extra:
        raise UsageError(f"unrecognized arguments: {' '.join(extra)} (see conformance {args.command} --help)")
    return args


def _executed(args: argparse.Namespace) -> int:
    """The sub-command's exit code; ``sys.exit`` called by loaded code (a kernel file ending in
    ``sys.exit(main())``, a plug-in) is exit 2, never the exit code it asked for."""
    try:
        return int(args._execute(args))
    except SystemExit as exc:
        if isinstance(exc.__context__, BrokenPipeError):  # rich's answer to output piped into `head`
            raise exc.__context__ from None
        raise UsageError(f"code it loaded (a backend, kernel or model factory) called {one_line(exc)}; "
                         "code must not exit when imported or called (guard it with if __name__ == '__main__')"
                         ) from None



def _save_traceback(exc: BaseException) -> str:
    """Write ``exc``'s traceback to a new temporary file and return its path."""
    import tempfile  # only a bug needs them: a worker's start-up goes without
    import traceback

    try:
        fd, path = tempfile.mkstemp(prefix="conformance-traceback-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write("".join(traceback.format_exception(exc)))
        return path
    except OSError as err:
        return f"nowhere ({err.strerror})"


if __name__ == "__main__":
    sys.exit(main())

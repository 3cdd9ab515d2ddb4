"""Report files: where a report may go, and how it is written.

The rules every command that writes reports follows (``run``, ``compare``, ``sweep``;
``render.export.placeholder`` holds a failing report at each path while they run):

- :func:`prepare` checks the report paths before any work and creates nothing:
  a report path is a file path whose directory is writable or can be created;
  it equals no input path, no other report path and no reproducer of
  ``--results-dir`` (same resolved path, or the same file through a hard or
  symbolic link).  Then it removes older reports at those paths, so a run that
  fails later leaves no stale report behind for CI to read.
- :func:`write_atomic` writes a temporary file in the target's directory,
  fsyncs it and renames it over the target: readers see the old file or the
  whole new one, never an empty or half-written one.  A target that is not a
  plain file (``/dev/stdout``, ``/dev/full``, a FIFO) is written in place.
  A failed write is a :class:`UsageError` (exit 2, one line).
"""
from __future__ import annotations

import errno
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from conformance.errors import UsageError

_STREAM_DIRS = ("/dev/", "/proc/")  # /dev/stdout, /dev/fd/3, /proc/self/fd/1: descriptors, not files


@dataclass(frozen=True)
class ReportPaths:
    """Where the JSON, JUnit, HTML and CSV reports go (None: not asked for)."""

    json: Optional[str] = None
    junit: Optional[str] = None
    html: Optional[str] = None
    csv: Optional[str] = None

    def named(self) -> list[tuple[str, str]]:
        """``(flag, path)`` of each report asked for."""
        return [(flag, path) for flag, path in (("--json", self.json), ("--junit", self.junit),
                                                ("--html", self.html), ("--csv", self.csv)) if path is not None]


# ----------------------------------------------------------------------------- checks

def is_stream(path: str) -> bool:
    """An existing target that is not a plain file (a device, a FIFO) or a descriptor path such
    as ``/dev/stdout``: it is written in place, never replaced, never removed."""
    if not os.path.exists(path):
        return False
    return not os.path.isfile(path) or os.path.abspath(path).startswith(_STREAM_DIRS)


def _nearest_existing(path: Path) -> Path:
    return next(p for p in (path, *path.parents) if p.exists())


def _can_create_in(directory: Path) -> bool:
    """``directory`` exists and is writable, or can be created under a writable ancestor."""
    existing = _nearest_existing(directory)
    return existing.is_dir() and os.access(existing, os.W_OK | os.X_OK)


def check_report_path(path: str, *, flag: str) -> None:
    """A report can be written to ``path``; nothing is created, opened or truncated."""
    if not path.strip() or path.endswith(os.sep) or os.path.isdir(path):
        example = {"--junit": "junit.xml", "--html": "report.html", "--csv": "calls.csv"}.get(flag, "out.json")
        raise UsageError(f"{flag} {path!r} is not a file path; pass one such as reports/{example}")
    if is_stream(path):
        if not os.access(path, os.W_OK):
            raise UsageError(f"{flag} {path}: cannot write there (permission denied); pass a writable path")
        return
    target = Path(os.path.realpath(path))
    if not _can_create_in(target.parent):
        raise UsageError(f"{flag} {path}: cannot write there (its directory is not writable or "
                         "cannot be created); pass a writable path")


def check_directory(path: Optional[str], *, flag: str) -> None:
    """``path`` is, or can become, a writable directory (nothing is created here)."""
    if path is None:
        return
    target = Path(path).absolute()
    existing = _nearest_existing(target)
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        what = "is not a directory" if existing == target else f"cannot be created under {existing}"
        raise UsageError(f"{flag} {path} {what}; pass a writable directory")


def same_file(a: str, b: str) -> bool:
    """Same resolved path, or (both existing) the same file through a hard or symbolic link."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _in_reproducer_dir(path: str, results_dir: str) -> bool:
    """Reproducers are ``<results_dir>/<name>.npz``: a report there could be overwritten."""
    if same_file(path, results_dir):
        return True
    return path.endswith(".npz") and same_file(os.path.dirname(os.path.abspath(path)), results_dir)


def check_collisions(paths: ReportPaths, *, inputs: Mapping[str, Optional[str]],
                     results_dir: Optional[str] = None) -> None:
    """No report on an input, on another report, or where a reproducer may be written."""
    named = paths.named()
    for i, (flag, path) in enumerate(named):
        for in_flag, in_path in inputs.items():
            if in_path is not None and same_file(path, in_path):
                raise UsageError(f"{flag} {path} is the {in_flag} input: the report would overwrite it; "
                                 "pass another report path")
        for other_flag, other in named[i + 1:]:
            if same_file(path, other):
                raise UsageError(f"{flag} {path} and {other_flag} {other} are the same file: one report "
                                 "would overwrite the other; pass two different paths")
        if results_dir is not None and _in_reproducer_dir(path, results_dir):
            raise UsageError(f"{flag} {path} lies where --results-dir {results_dir} writes reproducers "
                             "(*.npz); pass another report path")


def remove_stale(paths: ReportPaths) -> None:
    """Remove older reports at ``paths`` (never a stream such as ``/dev/stdout``)."""
    for flag, path in paths.named():
        if is_stream(path):
            continue
        try:
            os.unlink(os.path.realpath(path))
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise UsageError(f"{flag} {path}: cannot remove the older report there ({exc.strerror}); "
                             "pass a writable path") from None


def prepare(paths: ReportPaths, *, inputs: Mapping[str, Optional[str]],
            results_dir: Optional[str] = None) -> ReportPaths:
    """Check the report paths (and ``results_dir``), then remove older reports there."""
    for flag, path in paths.named():
        check_report_path(path, flag=flag)
    check_directory(results_dir, flag="--results-dir")
    check_collisions(paths, inputs=inputs, results_dir=results_dir)
    remove_stale(paths)
    return paths


# ----------------------------------------------------------------------------- writing

def _fsync_directory(directory: Path) -> None:
    """Make the rename durable; best effort (some file systems refuse to open directories)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _replace(target: Path, data: bytes) -> None:
    """Temporary file beside ``target``, fsync, rename over it; the temporary never survives."""
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as for any file
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException:  # an OSError, Ctrl-C or SIGTERM: leave no temporary file behind
        temp.unlink(missing_ok=True)
        raise
    _fsync_directory(target.parent)


def write_atomic(path: str | Path, data: bytes, *, flag: str) -> None:
    """``data`` to ``path`` all at once (see the module docstring); UsageError when it fails."""
    text = str(path)
    try:
        if is_stream(text):
            with open(text, "ab") as handle:  # append: a redirected stdout keeps what was printed
                handle.write(data)
        else:
            _replace(Path(os.path.realpath(text)), data)
    except OSError as exc:
        raise UsageError(f"{flag} {text}: cannot write the report ({exc.strerror or exc}); "
                         f"{_fix_for(exc, Path(text))}") from None


def _fix_for(exc: OSError, path: Path) -> str:
    """What to do about a failed write, from its cause (only a full disk asks for space)."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return "free some space or pass another path"
    if exc.errno in (errno.EEXIST, errno.ENOTDIR):
        blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), path.parent)
        return f"{blocker} is not a directory; remove it or pass another path"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "the directory is not writable; pass a writable path"
    return "pass another path"

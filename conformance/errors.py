"""Every exception the package raises, under one root: :class:`ConformanceError`.

Each class keeps the built-in base its callers catch it as (a ``CorpusError``
is still a ``ValueError``).  The CLI turns a :class:`UsageError` into exit code
2 and its one-line message.
"""


class ConformanceError(Exception):
    """The root: anything this package raises on purpose."""


class UsageError(ConformanceError):
    """Bad arguments, a bad file or a bad alpha: the message says what to fix."""


class BackendUnavailable(UsageError):
    """A backend cannot run here (framework not installed, worker would not start): one line why."""


class Unsupported(ConformanceError):
    """A backend does not implement this (dtype, out_dtype, direction): skip, never fake."""


class CorpusError(ConformanceError, ValueError):
    """A reproducer file that cannot be read; the message says why and what to do."""


class UnknownCategory(ConformanceError, ValueError):
    """A category name the registry does not hold."""


class HostValidationError(ConformanceError, ValueError):
    """The emulated kernel's host entry refused the call; the message is one line saying what to fix."""


class MissingInstruction(ConformanceError, RuntimeError):
    """The emulated kernel used an instruction the chip does not have (e.g. DataCopyPad on 910A)."""


class GmFault(ConformanceError, RuntimeError):
    """An emulated access beyond a tensor's red zone: the emulator cannot model where it lands."""


class UbOverflowError(ConformanceError, MemoryError):
    """An emulated kernel asked for more Unified Buffer than the profile's usable capacity."""


class ProtocolError(ConformanceError):
    """The bytes are not a frame of the worker protocol (one line saying what was wrong)."""


class WorkerFailure(ConformanceError):
    """The worker died, hung or sent garbage; the message says which (one line)."""


class PoolFailure(ConformanceError, RuntimeError):
    """A process forked to run rows (``run --jobs``) ended before it answered."""


class RemoteTraceback(ConformanceError):
    """The traceback of an exception raised in a forked process, as its text."""

    def __str__(self) -> str:
        return f"in a forked suite process:\n{self.args[0]}"


def one_line(exc: BaseException, *, named: bool = True) -> str:
    """The one way an exception becomes a line a user reads.

    ``named``: ``TypeError: <its first line>`` (at most 200 characters), ``sys.exit(2)`` for
    a SystemExit, the subclass's own text for one that words itself (``os._exit(3)``).
    Otherwise its whole text on one line (at most 200 characters), or its type's name when
    it has no text: for a message that names the cause's kind itself."""
    if not named:
        return " ".join(str(exc).split())[:200] or type(exc).__name__
    if isinstance(exc, SystemExit):
        return f"sys.exit({exc.code!r})" if type(exc).__str__ is BaseException.__str__ else str(exc)
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__

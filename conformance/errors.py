"""The one error type the CLI turns into exit code 2 and a one-line message."""


class UsageError(Exception):
    """Bad arguments, a bad file or a bad alpha: the message says what to fix."""

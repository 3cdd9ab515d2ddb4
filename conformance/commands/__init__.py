"""One module per CLI sub-command.  Each exposes ``HELP``, ``configure(parser)`` and ``execute(args) -> int``."""

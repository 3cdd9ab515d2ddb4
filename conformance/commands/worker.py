"""`conformance worker`: serve one backend over stdin/stdout for a client in another process.

Started by ``conformance run --worker CMD`` (or a backend's default worker);
not meant to be typed by hand.  Stdout carries only protocol frames.
"""
from __future__ import annotations

import argparse
import os
import sys

from conformance.errors import UsageError

HELP = "serve one backend over stdin/stdout (started by 'run --worker'; binary frames, not text)"


def configure(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--backend", required=True, metavar="NAME", help="the backend to serve, e.g. torch_npu")
    add("--profile", help="its profile, for backends that have one")
    add("--variant", help="its variant, for backends that have one")


def execute(args: argparse.Namespace) -> int:
    from conformance.backends import get_backend
    from conformance.frameworks.default_probes import probe_message
    from conformance.worker.server import frames_only_stdout, refuse, serve

    if os.isatty(1):  # the descriptor the frames go to
        raise UsageError("worker writes binary protocol frames to stdout, not text for a terminal; "
                         "it is started by 'conformance run --worker CMD' (or pipe its stdout)")
    frames = frames_only_stdout()
    try:
        backend = get_backend(args.backend, profile=args.profile, variant=args.variant)
    except Exception as exc:  # not installed, unknown profile, ...: one line to the client
        text = str(exc) if isinstance(exc, UsageError) else f"{type(exc).__name__}: {exc}"
        return refuse(text if args.backend in text else f"backend {args.backend}: {text}", stdout=frames)
    return serve(backend, stdin=sys.stdin.buffer, stdout=frames, probe=probe_message)

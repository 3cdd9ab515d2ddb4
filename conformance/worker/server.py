"""The worker side: serve one in-process backend over a pair of byte streams.

The worker writes its hello first, then answers each ``call`` with a ``result``
or an ``error`` until its input ends.  A call names its op when it is not LeakyReLU
(``prelu``, ``rrelu``): the backend's method of that name computes it (:func:`computed`).
A backend exception becomes an ``error`` reply for that call; the worker goes on.
Only frames go to the frame stream: :func:`frames_only_stdout` moves everything else
that writes to stdout (Python prints, C++ framework logs on file descriptor 1) to stderr.
"""
from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable
from importlib import metadata
from typing import BinaryIO, Optional

from conformance import machine
from conformance.backends import Backend, BackendBase, boundary_sizes, call, skip_reason, suite_pairs
from conformance.dtypes import DTYPES
from conformance.errors import Unsupported
from conformance.ops import ops_of, prelu_runs
from conformance.records import DEFAULT_OP, BackendResult
from conformance.worker.protocol import (
    PROTOCOL_VERSION,
    Message,
    ProtocolError,
    error_message,
    read_frame,
    result_message,
    write_frame,
)

DIRECTIONS = ("forward", "backward")


def frames_only_stdout() -> BinaryIO:
    """A private stream to the real stdout; file descriptor 1 and ``sys.stdout`` now go to stderr."""
    frames = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return frames


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def versions(backend: Backend) -> dict[str, str]:
    """Python, the harness's own packages and the backend's declared distributions."""
    dists = ("conformance", "numpy", "ml_dtypes", *getattr(backend, "packages", ()))
    return {"python": platform.python_version(), **{d: _version(d) for d in dists}}


def own_machine(backend: Backend) -> dict:
    """This worker's machine and FTZ/DAZ state (:func:`conformance.machine.describe`), and the
    device its backend computes on when it names one (``npu:0``)."""
    device = getattr(backend, "device", None)
    return {**machine.describe(), **({"device": str(device)} if device is not None else {})}


def own_boundary_sizes(backend: Backend) -> bool:
    """Whether ``backend`` declares boundary sizes of its own; the default ones (the default chip's
    core boundaries) the client computes itself, so a worker need not plan the emulated kernel."""
    declared = getattr(backend, "boundary_sizes", None)  # looked up as backends.boundary_sizes does
    return declared is not None and getattr(declared, "__func__", declared) is not BackendBase.boundary_sizes


def hello(backend: Backend) -> Message:
    """The handshake: protocol version, who this is, and every fact the suite plans with."""
    triples = [(d, o, r) for d in DTYPES for o in DTYPES for r in DIRECTIONS]
    supported = [t for t in triples if backend.supports(*t)]
    sized = supported if own_boundary_sizes(backend) else []
    return Message({
        "type": "hello", "protocol": PROTOCOL_VERSION, "backend": backend.name,
        "profile": backend.profile, "variant": backend.variant,
        "supports": supported,
        "skip_reasons": {f"{d}->{o} {r}": skip_reason(backend, d, o, r) for d, o, r in triples
                         if (d, o, r) not in supported},
        "suite_pairs": [list(p) for p in suite_pairs(backend)],
        "boundary_sizes": {f"{d}->{o} {r}": list(boundary_sizes(backend, d, o, r)) for d, o, r in sized},
        "versions": versions(backend),
        "machine": own_machine(backend),
        **op_facts(backend),
    })


def op_facts(backend: Backend) -> dict:
    """The hello's facts of a backend computing more ops than LeakyReLU: its ops, the (dtype, direction)
    pairs of its PReLU/RReLU rows (``prelu_supports``, else its LeakyReLU ``supports``) and what its
    PReLU shows by design (``prelu_allowed``); {} for a LeakyReLU backend, whose hello stays as it was."""
    ops = ops_of(backend)
    if ops == (DEFAULT_OP,):
        return {}
    return {"ops": list(ops),
            "prelu_supports": [[d, r] for d in DTYPES for r in DIRECTIONS if prelu_runs(backend, d, r)],
            "prelu_allowed": sorted(getattr(backend, "prelu_allowed", ()))}


def computed(backend: Backend, message: Message) -> BackendResult:
    """A call's result: LeakyReLU by :func:`conformance.backends.call`, another op the backend declares
    by its method of that name; Unsupported for an op it does not declare."""
    h, arrays = message.header, message.arrays
    op = h.get("op", DEFAULT_OP)
    if op == DEFAULT_OP:
        return call(backend, h["direction"], arrays["x"], h["alpha"], dy=arrays.get("dy"),
                    out_dtype=h.get("out_dtype"))
    if op not in ops_of(backend) or op not in ("prelu", "rrelu"):
        raise Unsupported(f"backend {backend.name} does not compute {str(op)[:40]!r}; it computes "
                          f"{', '.join(ops_of(backend))}")
    if op == "rrelu":
        return backend.rrelu(h["direction"], arrays["x"], dy=arrays.get("dy"))  # type: ignore[attr-defined]
    return backend.prelu(h["direction"], arrays["x"], arrays["weight"], dy=arrays.get("dy"))  # type: ignore[attr-defined]


Prober = Callable[[str], Message]  # a ``probe`` message's API -> the reply


def answer(backend: Backend, message: Message, *, probe: Optional[Prober] = None) -> Message:
    """The reply to one message: a ``result``, or an ``error`` saying what went wrong; a
    ``probe`` is answered by ``probe`` (the command that starts the worker gives it)."""
    if message.type == "probe":
        api = str(message.header.get("api"))
        return probe(api) if probe is not None else error_message("unavailable", f"probing {api}: not served here")
    if message.type != "call":
        return error_message("error", f"unknown message type {message.type!r}; expected 'call' or 'probe'")
    try:
        return result_message(computed(backend, message))
    except Unsupported as exc:
        return error_message("unsupported", str(exc))
    except Exception as exc:  # the backend failed on this call; the worker goes on
        return error_message("error", f"{type(exc).__name__}: {exc}")


def serve(backend: Backend, *, stdin: BinaryIO, stdout: BinaryIO, probe: Optional[Prober] = None) -> int:
    """Hello, then answer calls until ``stdin`` ends or the client goes away (0), or garbage arrives (1)."""
    try:
        return _loop(backend, stdin=stdin, stdout=stdout, probe=probe)
    except BrokenPipeError:  # the client closed its end: nothing left to answer
        return 0


def _loop(backend: Backend, *, stdin: BinaryIO, stdout: BinaryIO, probe: Optional[Prober]) -> int:
    write_frame(stdout, hello(backend))
    while True:
        try:
            message: Optional[Message] = read_frame(stdin)
        except ProtocolError as exc:
            print(f"conformance worker: {exc}", file=sys.stderr)
            return 1
        if message is None:
            return 0
        write_frame(stdout, answer(backend, message, probe=probe))


def refuse(reason: str, *, stdout: BinaryIO) -> int:
    """The backend cannot run here: an ``unavailable`` error frame, the reason on stderr, exit 2."""
    write_frame(stdout, error_message("unavailable", reason))
    print(f"conformance worker: {reason}", file=sys.stderr)
    return 2

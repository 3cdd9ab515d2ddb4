"""Replaying a saved reproducer (``conformance replay FILE``): on the backend and worker its file
names, or those the command line names instead, judged as the row that saved it."""
from __future__ import annotations

from typing import Optional

from conformance.backends import WorkerSpec, default_worker, is_import_path
from conformance.cases import corpus
from conformance.cases.batches import InputBatch
from conformance.errors import Unsupported, UsageError
from conformance.judge.gate import GateConfig
from conformance.records import Row
from conformance.suite import RowSpec, backend_for, run_batch

__all__ = ["replay", "replay_backend"]


def replay_backend(rep: corpus.Reproducer, *, backend: Optional[str] = None,
                   worker: Optional[WorkerSpec] = None) -> tuple[str, Optional[WorkerSpec]]:
    """The backend name and worker a reproducer replays on.  The file's fields name only built-in
    or registered backends: an import path runs only when the command line names it (``backend``),
    and a row served by a worker replays only through a worker given again (``worker``), or the
    backend's own default worker when its command is the recorded one.  A UsageError otherwise."""
    name = backend or rep.backend
    if is_import_path(rep.backend) and backend is None:
        raise UsageError(f"the reproducer names the import path {rep.backend!r}; a file never chooses "
                         f"code to run: name it yourself with replay FILE --backend {rep.backend}")
    if worker is not None:
        return name, worker
    default = default_worker(name, profile=rep.profile, variant=rep.variant)
    if rep.worker is not None and (default is None or default.command != rep.worker):
        raise UsageError(f"the reproducer came from a row served by the worker {rep.worker!r}; replay it "
                         f"through a worker again: replay FILE --worker CMD")
    return name, default


def replay(rep: corpus.Reproducer, *, config: GateConfig, backend: Optional[str] = None,
           worker: Optional[WorkerSpec] = None) -> Row:
    """Re-run a saved reproducer on its backend (see :func:`replay_backend`) and judge it.

    Raises ValueError for an unknown backend, profile or variant, and ``Unsupported``
    when the backend has no such (dtype, out_dtype, direction).
    """
    case = rep.case
    name, worker = replay_backend(rep, backend=backend, worker=worker)
    spec = RowSpec(name, rep.profile, rep.variant, case.dtype, case.out_dtype or case.dtype, case.direction,
                   case.alpha, worker)
    found = backend_for(spec.backend, spec.profile, spec.variant, worker)
    if not found.supports(spec.dtype, spec.out_dtype, spec.direction):
        who = spec.backend + (f"/{found.profile}" if getattr(found, "profile", None) else "")
        raise Unsupported(f"{who} has no {spec.direction} for {spec.dtype}->{spec.out_dtype}")
    return run_batch(spec, InputBatch("reproducer", case.x, case.dy), config=config)

"""The backend protocol, the facts each backend declares, and the registry.

Stable names: ``golden``, ``torch``, ``tensorflow``, ``cann`` (with a profile
and a variant), ``torch_npu`` (a real Ascend device, through a worker), the
opt-in ``jax``, ``onnxruntime`` and ``keras`` (a profile per Keras backend, in a
worker each), ``paddle`` and ``mindspore`` (each in a worker running in its own
environment, see :mod:`conformance.frameworks.environments`) and ``dump`` (arrays given to ``conformance compare``).

Backends are registered through the entry-point group ``conformance.backends``
(``name = "module:Class"``); the built-in ones are declared there in
``pyproject.toml`` too.  :data:`BUILTIN` is the same table, used when the
installed metadata lacks the group (an editable install made from an older
checkout).  An entry point of the same name wins over the built-in one.
Modules are imported only when their backend is asked for, and framework
modules only when a backend computes.

A name with a colon is an import path instead of a registered name:
``package.module:NAME`` (or ``path/to/file.py:NAME``) names a factory (a callable
taking no required argument that returns a backend), a backend object, or a plain
kernel ``fn(x, alpha)``, which :func:`conformance.adapters.from_function` wraps.  A
dotted module that is not importable from ``sys.path`` is looked for in the
current directory, as ``python -m`` would.  The import path is what rows, reports
and reproducers record, so ``conformance replay`` loads it again.

A backend owns its facts (see :class:`BackendBase`): the dtype pairs it runs
in the default suite, the tiling boundary sizes worth probing, its profiles
and variants, whether the default suite runs it, and the command of the worker
that serves it when it cannot live in this process.
"""
from __future__ import annotations

import functools
import importlib
import inspect
import os
import sys
import warnings
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Optional, Protocol

import numpy as np

from conformance.dtypes import DTYPES
from conformance.errors import BackendUnavailable, UsageError, one_line
from conformance.extras import require_installed
from conformance.interrupts import from_signal
from conformance.records import BackendResult, Direction, Pair

GROUP = "conformance.backends"
BUILTIN: dict[str, str] = {
    "golden": "conformance.frameworks.golden_backend:GoldenBackend",
    "torch": "conformance.frameworks.torch_backend:TorchBackend",
    "tensorflow": "conformance.frameworks.tensorflow_backend:TensorFlowBackend",
    "cann": "conformance.npu_impl.backend:CannBackend",
    "torch_npu": "conformance.frameworks.torch_npu:TorchNpuBackend",
    "jax": "conformance.frameworks.jax_backend:JaxBackend",
    "onnxruntime": "conformance.frameworks.onnxruntime_backend:OnnxRuntimeBackend",
    "keras": "conformance.frameworks.keras_backend:KerasBackend",
    "paddle": "conformance.frameworks.paddle_backend:PaddleBackend",
    "mindspore": "conformance.frameworks.mindspore_backend:MindSporeBackend",
}


class Backend(Protocol):
    """What every backend offers.  Unsupported pairs are skipped, never faked.

    The facts of :class:`BackendBase` are optional: a backend without them gets
    the defaults (read through :func:`suite_pairs`, :func:`boundary_sizes`, ...).
    """

    name: str
    profile: Optional[str]
    variant: Optional[str]

    def supports(self, dtype: str, out_dtype: str, direction: Direction) -> bool: ...

    def forward(self, x: np.ndarray, alpha: float, *, out_dtype: Optional[str] = None) -> BackendResult: ...

    def backward(self, dy: np.ndarray, x: np.ndarray, alpha: float, *,
                 out_dtype: Optional[str] = None) -> BackendResult: ...


class BackendBase:
    """Defaults for the facts a backend declares; subclasses override what differs."""

    name = ""
    profile: Optional[str] = None
    variant: Optional[str] = None
    #: --profile / --variant choices (empty: the backend takes none).
    profiles: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()
    #: Mixed-precision pairs the default suite runs besides (T, T) for every dtype.
    extra_pairs: tuple[Pair, ...] = ()
    #: Whether ``conformance run`` without --backend runs it.
    default_suite = False
    #: Distributions whose versions the worker handshake reports.
    packages: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()  # the modules it imports to run (checked, not imported, by ``unavailable``)
    #: argv of the worker that serves this backend by default ("{python}" is this
    #: interpreter; a framework with its own environment names that one's python).
    #: None runs the backend in-process.
    worker_command: Optional[tuple[str, ...]] = None
    #: The operators it computes (``conformance.ops``); one besides ``leaky_relu`` has a method of
    #: that name: ``prelu(direction, x, weight, *, dy=None)``, ``rrelu(direction, x, *, dy=None)``.
    ops: tuple[str, ...] = ("leaky_relu",)
    #: Triage categories the gate allows this backend: the framework's documented behaviours
    #: (docs/explanation/framework-behaviours.md), shown as warnings rather than failures.
    allowed: frozenset[str] = frozenset()

    @classmethod
    def allowed_on(cls, profile: Optional[str] = None) -> frozenset[str]:
        """The categories allowed on ``profile`` (a backend whose profiles behave apart overrides this)."""
        return cls.allowed

    @classmethod
    def worker_argv(cls) -> Optional[tuple[str, ...]]:
        """The default worker's argv with "{python}" resolved (None: in-process).  A backend living
        in an environment of its own overrides this (and raises BackendUnavailable when it is missing)."""
        return with_python(cls.worker_command)

    @property
    def versions(self) -> dict[str, str]:
        """The installed versions of the distributions it declares in ``packages``."""
        return installed_versions(self.packages)

    def supports(self, dtype: str, out_dtype: str, direction: Direction) -> bool:
        return False

    def skip_reason(self, dtype: str, out_dtype: str, direction: Direction) -> str:
        """Why the suite skips a pair this backend does not support."""
        return "not supported by the backend"

    def row_notes(self, dtype: str, out_dtype: str, direction: Direction, alpha: float) -> tuple[str, ...]:
        """What the reader of a row should know that its findings do not say (a kernel's warnings)."""
        return ()

    def suite_pairs(self) -> tuple[Pair, ...]:
        """The (input, output) pairs the default suite plans for this backend."""
        return tuple((d, d) for d in DTYPES) + self.extra_pairs

    def boundary_sizes(self, dtype: str, out_dtype: str, direction: Direction) -> tuple[int, ...]:
        """Sizes worth a batch of their own: the default chip's core boundaries."""
        from conformance.npu_impl.boundaries import boundary_sizes

        return boundary_sizes(dtype, out_dtype=out_dtype, direction=direction, tiles=False)


class SameDtypeBackend(BackendBase):
    """Base for framework ops whose output dtype is the input's: (T, T) for T in ``dtypes``."""

    dtypes: tuple[str, ...] = ("float16", "bfloat16", "float32", "float64")

    def supports(self, dtype: str, out_dtype: str, direction: Direction) -> bool:
        return dtype == out_dtype and dtype in self.dtypes


@dataclass(frozen=True)
class WorkerSpec:
    """How to reach an out-of-process backend: a command line and a per-call timeout (s)."""

    command: str
    timeout: float = 600.0


# ----------------------------------------------------------------------------- facts, with defaults

def installed_versions(dists: tuple[str, ...]) -> dict[str, str]:
    """``{distribution: version}`` of those of ``dists`` installed here, from package metadata."""
    found = {}
    for dist in dists:
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return found


def versions_of(backend: Backend) -> dict[str, str]:
    """The framework versions a backend reports (its ``versions``; a worker's come from its
    handshake), without the distributions it declares but lacks; {} for one that says none."""
    found = getattr(backend, "versions", None)
    if not isinstance(found, dict):
        return {}
    return {str(k): str(v) for k, v in found.items() if v != "not installed"}


def suite_pairs(backend: Backend) -> tuple[Pair, ...]:
    pairs = getattr(backend, "suite_pairs", None)
    if pairs is not None:
        return tuple(pairs())
    return tuple((d, d) for d in DTYPES) + tuple(getattr(backend, "extra_pairs", ()))  # a plain object's default


def boundary_sizes(backend: Backend, dtype: str, out_dtype: str, direction: Direction) -> tuple[int, ...]:
    sizes = getattr(backend, "boundary_sizes", None)
    if sizes is None:
        return BackendBase.boundary_sizes(backend, dtype, out_dtype, direction)  # type: ignore[arg-type]
    return tuple(sizes(dtype, out_dtype, direction))


def skip_reason(backend: Backend, dtype: str, out_dtype: str, direction: Direction) -> str:
    reason = getattr(backend, "skip_reason", None)
    return reason(dtype, out_dtype, direction) if reason is not None else "not supported by the backend"


# ----------------------------------------------------------------------------- registry

def _entry_points() -> dict[str, str]:
    """``name -> "module:attr"`` of the installed ``conformance.backends`` entry points."""
    try:
        found = metadata.entry_points(group=GROUP)
    except Exception as exc:  # broken metadata must not stop the built-in backends
        warnings.warn(f"cannot read the {GROUP} entry points: {exc}", stacklevel=2)
        return {}
    return {ep.name: ep.value for ep in found}


@functools.lru_cache(maxsize=1)
def registry() -> dict[str, str]:
    """Every registered backend: the built-in table overlaid with the installed entry points."""
    return {**BUILTIN, **_entry_points()}


def names() -> tuple[str, ...]:
    """Every registered backend name (nothing is imported)."""
    return tuple(registry())


def is_import_path(name: str) -> bool:
    """``module:factory`` or ``file.py:factory`` rather than a registered name."""
    return ":" in name


def _import_dotted(module: str) -> Any:
    """``module`` from ``sys.path``, else from the current directory (``python -m`` puts it first on
    ``sys.path``; the ``conformance`` script does not, and here it comes last, so it shadows nothing)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        here = os.getcwd()
        if exc.name != module.partition(".")[0] or here in sys.path:
            raise
        sys.path.append(here)
        return importlib.import_module(module)


def _import(module: str) -> Any:
    """A module by dotted name, or a ``.py`` file by path (imported under a name of its own)."""
    if not module.endswith(".py"):
        return _import_dotted(module)
    from importlib import util
    from pathlib import Path

    path = Path(module).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no such file {module}")
    spec = util.spec_from_file_location(f"conformance_user_{path.stem}", path)
    loaded = util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = loaded  # type: ignore[union-attr]
    spec.loader.exec_module(loaded)  # type: ignore[union-attr]
    return loaded


def load(name: str) -> Any:
    """The class (or factory) registered as ``name``, or named by the import path ``name``;
    a UsageError naming the fix otherwise.  A ``.py`` file is named by its absolute path, so the
    same relative path in another directory is another module."""
    module, sep, attr = name.partition(":")
    if sep and module.endswith(".py") and is_import_path(name):
        from pathlib import Path

        return _load(f"{Path(module).resolve()}:{attr}", shown=name)
    return _load(name, shown=name)


@functools.cache
def _load(name: str, *, shown: str) -> Any:
    target = name if is_import_path(name) else registry().get(name)
    if target is None:
        raise UsageError(f"unknown backend {shown!r}; choose from {', '.join(names())} "
                         "or pass an import path such as package.module:factory")
    module, _, attr = target.partition(":")
    try:
        obj: Any = _import(module)
        for part in attr.split(".") if attr else ():
            obj = getattr(obj, part)
    except (Exception, SystemExit, KeyboardInterrupt) as exc:  # sys.exit(main()) at the end of a kernel file
        if isinstance(exc, KeyboardInterrupt) and from_signal(exc):
            raise
        raise BackendUnavailable(f"backend {shown}: cannot load {shown if target == name else target} "
                                 f"({one_line(exc)})") from None
    return obj


load.cache_clear = _load.cache_clear  # type: ignore[attr-defined]  # tests start from a clean cache


def declared_policy(name: str) -> dict[str, frozenset[str]]:
    """The categories backend ``name`` declares allowed: an entry ``name``, and ``name[profile]``
    for each profile that differs from it (a UsageError when it does not load)."""
    cls = load(name)
    allowed_on = getattr(cls, "allowed_on", None)
    if allowed_on is None:
        return {name: frozenset(getattr(cls, "allowed", ()))}
    base = frozenset(allowed_on(None))
    policy = {name: base}
    for profile in getattr(cls, "profiles", ()):
        if frozenset(allowed_on(profile)) != base:
            policy[f"{name}[{profile}]"] = frozenset(allowed_on(profile))
    return policy


@functools.cache
def builtin_policy() -> dict[str, frozenset[str]]:
    """Every registered backend's declared policy, and ``dump`` allowed nothing (a backend that
    does not load here declares nothing)."""
    policy: dict[str, frozenset[str]] = {"dump": frozenset()}
    for name in names():
        try:
            policy.update(declared_policy(name))
        except UsageError:
            continue
    return policy


def default_backends() -> tuple[str, ...]:
    """The backends ``conformance run`` runs without --backend (those declaring ``default_suite``)."""
    chosen = []
    for name in names():
        try:
            if getattr(load(name), "default_suite", False):
                chosen.append(name)
        except UsageError as exc:  # a broken plug-in leaves the default suite, loudly
            print(f"conformance: warning: {exc}", file=sys.stderr)
    return tuple(chosen)


def unavailable(name: str) -> Optional[str]:
    """Why backend ``name`` cannot run here, in one line saying how to install it (a module it
    ``requires`` is not installed), or None when it can; nothing is imported."""
    try:
        require_installed(*getattr(load(name), "requires", ()), backend=name)
    except BackendUnavailable as exc:
        return str(exc)
    return None


def installed_defaults() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The default backends that can run here, and a line for each of the others (why, and how
    to install it)."""
    found, missing = [], []
    for name in default_backends():
        why = unavailable(name)
        found += [name] if why is None else []
        missing += [] if why is None else [why]
    return tuple(found), tuple(missing)


def profiles_of(name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The --profile and --variant choices ``name`` declares."""
    cls = load(name)
    return tuple(getattr(cls, "profiles", ())), tuple(getattr(cls, "variants", ()))


def with_python(command: Optional[tuple[str, ...]]) -> Optional[tuple[str, ...]]:
    """``command`` with "{python}" replaced by this interpreter (None stays None: in-process)."""
    return None if command is None else tuple(sys.executable if a == "{python}" else a for a in command)


def default_worker(name: str, *, profile: Optional[str] = None, variant: Optional[str] = None,
                   timeout: float = WorkerSpec.timeout) -> Optional[WorkerSpec]:
    """The worker that serves ``name`` by default (None: it runs in-process)."""
    cls = load(name)
    resolve = getattr(cls, "worker_argv", None)
    argv = resolve() if resolve is not None else with_python(getattr(cls, "worker_command", None))
    if argv is None:
        return None
    import shlex

    extra = (["--profile", profile] if profile else []) + (["--variant", variant] if variant else [])
    return WorkerSpec(shlex.join([*argv, *extra]), timeout)


def get_backend(name: str, *, profile: Optional[str] = None, variant: Optional[str] = None) -> Backend:
    """An instance of backend ``name`` in this process (a worker's client: ``conformance.worker.client.connect``)."""
    factory = load(name)
    takes = profiles_of(name)
    if (profile and not takes[0]) or (variant and not takes[1]):
        raise UsageError(f"backend {name} takes no profile or variant")
    kwargs = {k: v for k, v in (("profile", profile), ("variant", variant)) if v is not None}
    return made(factory, name=name, **kwargs)


def is_backend(obj: Any) -> bool:
    """A backend object (not a class): it has ``supports``, ``forward`` and ``backward``."""
    return not isinstance(obj, type) and all(callable(getattr(obj, a, None))
                                             for a in ("supports", "forward", "backward"))


#: What wraps a plain kernel function, imported by name as the backends are (the adapters build on
#: this module, so it cannot import them).
KERNEL_WRAPPER = "conformance.adapters:from_function"
ACCEPTED = ("a factory taking no required argument that returns a backend, a backend object, "
            "or a kernel function fn(x, alpha) -> array")


def kernel_or_factory(obj: Any) -> str:
    """``"kernel"`` for a plain ``fn(x, alpha)`` (two required positional parameters, any others
    optional), ``"factory"`` for a class or a callable with no required parameter, else ``""``."""
    if isinstance(obj, type):
        return "factory"
    try:
        params = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: call it as a factory
        return "factory"
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    required = [p for p in params if p.default is inspect.Parameter.empty
                and p.kind in (*positional, inspect.Parameter.KEYWORD_ONLY)]
    if not required:
        return "factory"
    if len(required) == 2 and all(p.kind in positional for p in required):
        return "kernel"
    return ""


def made(factory: Any, *, name: str, **kwargs: str) -> Backend:
    """``factory(**kwargs)``, ``factory`` itself when it already is a backend object, or a plain
    kernel function wrapped by :func:`conformance.adapters.from_function`; a UsageError when it makes
    something that is not a backend, or when the factory of an import path fails."""
    if is_backend(factory):
        return factory
    shape = kernel_or_factory(factory) if callable(factory) else ""
    if shape == "kernel":
        return load(KERNEL_WRAPPER)(factory)
    if not shape:
        described = f"a {type(factory).__name__}" if not callable(factory) else \
            f"{getattr(factory, '__name__', type(factory).__name__)}{_signature(factory)}"
        raise UsageError(f"backend {name} names {described}; expected {ACCEPTED}")
    try:
        backend = factory(**kwargs)
    except UsageError:
        raise
    except (Exception, SystemExit, KeyboardInterrupt) as exc:
        if isinstance(exc, KeyboardInterrupt) and from_signal(exc):
            raise
        if not is_import_path(name) and isinstance(exc, Exception):
            raise  # a registered class keeps its errors (replay reports a bad variant)
        raise BackendUnavailable(f"backend {name}: its factory raised {one_line(exc)}") from None
    if not is_backend(backend):
        raise UsageError(f"backend {name}: the factory returned a {type(backend).__name__}, not a backend "
                         "(an object with supports, forward and backward); wrap a kernel function with "
                         "conformance.adapters.from_numpy or from_torch")
    return backend


def _signature(obj: Any) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"


def call(backend: Backend, direction: Direction, x: np.ndarray, alpha: float, *,
         dy: Optional[np.ndarray] = None, out_dtype: Optional[str] = None) -> BackendResult:
    """Run one direction on a backend (``dy`` is required for backward)."""
    if direction == "forward":
        return backend.forward(x, alpha, out_dtype=out_dtype)
    if dy is None:
        raise ValueError("backward needs dy")
    return backend.backward(dy, x, alpha, out_dtype=out_dtype)

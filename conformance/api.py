"""The Python API: ``conformance.check(fn, ...) -> Report``.

``check`` plans and runs the same rows as ``conformance run`` (``suite.plan`` and
``suite.run_suite``, the same inputs for the same seed, the same gate), on a
kernel function wrapped by :mod:`conformance.adapters`, on a backend object, or
on a backend name (registered, or ``package.module:factory``).  ``reference=`` is
``run --reference``: those backends' rows run too, and every other row is compared
with them bit for bit (``Report.agreement``).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

from conformance import adapters
from conformance.backends import is_backend, load, profiles_of
from conformance.config import allowed_categories, load_config
from conformance.errors import UsageError
from conformance.judge.agreement import Agreement
from conformance.judge.gate import GateConfig, overall
from conformance.records import Direction, Row
from conformance.render import export
from conformance.render.messages import failure_message
from conformance.suite import DIRECTIONS, SUITE_ALPHAS, Options, RowSpec, Selection, SuiteResult, planned, run_suite


@dataclass(frozen=True)
class Report:
    """Judged rows (as ``conformance run`` reports them), skipped rows with why, and the seed."""

    rows: tuple[Row, ...]
    skipped: tuple[tuple[RowSpec, str], ...] = ()
    seed: int = 0
    versions: dict = field(default_factory=dict, compare=False)
    config: Optional[GateConfig] = field(default=None, compare=False)  # the gate the rows were judged under
    references: tuple[str, ...] = ()  # the reference= backends (their rows are among ``rows``)
    agreement: tuple[Agreement, ...] = ()  # every other row against each reference, bit for bit

    @property
    def verdict(self) -> str:
        """``fail`` if any row fails, else ``pass`` (the JSON report's top-level verdict)."""
        return overall(r.verdict for r in self.rows)

    @property
    def failures(self) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if r.verdict == "fail")

    @property
    def message(self) -> str:
        """Each failing row's title, its "Mismatched elements: k / N (p%)" lines and its findings."""
        return "\n\n".join(f"{r}\n{failure_message(r)}" for r in self.failures)

    @property
    def subject(self) -> tuple[Row, ...]:
        """The rows of the checked kernel or backend, without the references' rows."""
        return tuple(r for r in self.rows if r.backend not in self.references) if self.references else self.rows

    @property
    def _agreement(self) -> Optional[tuple[Agreement, ...]]:
        """The agreement for the JSON report: None when no reference was asked for (as ``run``)."""
        return self.agreement if self.references else None

    def to_dict(self) -> dict:
        return export.report_dict(self.rows, seed=self.seed, versions=self.versions or export.versions(),
                                  config=self.config, agreement=self._agreement)

    def to_json(self) -> str:
        """The strict JSON report (schema ``leakyrelu-conformance/1``), as ``run --json`` writes it."""
        return export.dumps(self.to_dict())

    def write_json(self, path: str | Path) -> None:
        export.write_json(self.rows, path, seed=self.seed, versions=self.versions or export.versions(),
                          config=self.config, agreement=self._agreement)


def _selection(subject: Any, *, name: Optional[str], dtypes: Optional[tuple[str, ...]], kind: str,
               backward: Any, alphas: tuple[float, ...], directions: tuple[Direction, ...],
               profile: Optional[str], variant: Optional[str], references: tuple[str, ...]) -> Selection:
    common = dict(dtypes=dtypes, alphas=alphas, directions=directions, references=references)
    if isinstance(subject, str):
        _check_choice(profile, profiles_of(subject)[0], what=f"profile of {subject}")
        _check_choice(variant, profiles_of(subject)[1], what=f"variant of {subject}")
        return Selection(backends=_backends(subject, references), profile=profile, variant=variant,
                         **common)  # type: ignore[arg-type]
    if is_backend(subject):
        label = name or getattr(subject, "name", "") or type(subject).__name__
        return Selection(backends=_backends(label, references), objects=((label, subject),),
                         **common)  # type: ignore[arg-type]
    kernel = adapters.KernelBackend(subject, backward=backward, kind=kind, dtypes=dtypes,  # type: ignore[arg-type]
                                    name=name)
    return Selection(backends=_backends(kernel.name, references), objects=((kernel.name, kernel),),
                     **common)  # type: ignore[arg-type]


def _backends(subject: str, references: tuple[str, ...]) -> tuple[str, ...]:
    """The references first, then the checked backend (as ``run --reference`` orders them)."""
    return tuple(dict.fromkeys((*references, subject)))


def _references(reference: Optional[str | Sequence[str]]) -> tuple[str, ...]:
    """``reference=`` as backend names, validated as ``run --reference`` validates them: a
    registered name or an import path that loads; a name, or a sequence (or comma-separated string)."""
    if reference is None:
        return ()
    spelled = [reference] if isinstance(reference, str) else list(reference)
    if not all(isinstance(r, str) for r in spelled):
        raise UsageError(f"reference={reference!r}: pass a backend name or a sequence of names, such as 'torch'")
    names = tuple(dict.fromkeys(n.strip() for r in spelled for n in r.split(",") if n.strip()))
    if not names:
        raise UsageError(f"reference={reference!r}: pass a backend name such as 'torch'")
    for n in names:
        try:
            load(n)
        except UsageError as exc:
            raise UsageError(f"reference: {exc}") from None
    return names


def _check_choice(value: Optional[str], choices: Sequence[str], *, what: str) -> None:
    if value is not None and value not in choices:
        raise UsageError(f"{what}: {value!r} is unknown; choose from {', '.join(choices) or 'none'}")


def _alphas(alphas: Iterable[float]) -> tuple[float, ...]:
    """Finite slopes, de-duplicated in order; a UsageError otherwise."""
    found = tuple(dict.fromkeys(float(a) for a in ([alphas] if isinstance(alphas, (int, float)) else alphas)))
    bad = [a for a in found if not math.isfinite(a)]
    if bad or not found:
        raise UsageError(f"alphas must be finite slopes such as [0.2] (got {list(found)})")
    return found


def _dtypes(dtypes: Optional[Iterable[str]]) -> Optional[tuple[str, ...]]:
    if dtypes is None:
        return None
    if isinstance(dtypes, str):
        dtypes = (dtypes,)
    return tuple(a if a == b else f"{a}->{b}" for a, b in adapters.parse_pairs(dtypes))


def _gate(config: Optional[GateConfig | str | Path], *, strict: bool, allow: Sequence[str]) -> GateConfig:
    """The gate ``check`` judges under: ``config`` (a GateConfig, or a TOML file over
    ./pyproject.toml's table), with ``strict`` and ``allow`` on top."""
    chosen = allowed_categories([allow] if isinstance(allow, str) else allow, flag="allow")
    if not isinstance(config, GateConfig):
        return load_config(None if config is None else str(config), strict=strict, allow=chosen)
    return replace(config, strict=config.strict or strict, allowed=config.allowed | chosen)


def check(fn: Any, *, dtypes: Optional[Sequence[str]] = None, alphas: Sequence[float] = SUITE_ALPHAS,
          directions: Sequence[Direction] = DIRECTIONS, backward: Any = None, kind: str = "auto",
          name: Optional[str] = None, seed: int = 0, max_examples: int = 100,
          config: Optional[GateConfig | str | Path] = None, results_dir: Optional[str | Path] = None,
          profile: Optional[str] = None, variant: Optional[str] = None, strict: bool = False,
          allow: Sequence[str] = (), reference: Optional[str | Sequence[str]] = None) -> Report:
    """Run the conformance suite on ``fn`` and judge it as ``conformance run`` would.

    ``fn``: a kernel ``fn(x, alpha)`` on numpy arrays, torch tensors, JAX arrays or TensorFlow
    tensors (``kind``: ``"numpy"``, ``"torch"``, ``"jax"``, ``"tensorflow"``, or ``"auto"``: its
    first parameter's annotation, else the first it takes a float32 array of), a backend object,
    or a backend name (``"torch"``, ``"cann"`` with ``profile``/``variant``,
    ``"package.module:factory"``).  ``dtypes``: input dtypes or ``"src->out"`` pairs (None:
    the backend's defaults; a kernel runs the four same-dtype pairs).  ``backward``:
    ``bwd(dy, x, alpha)`` for a numpy kernel (the frameworks' kernels use their autodiff).  ``config``: the
    gate, or a TOML file as for ``--config`` (default: the backends' built-in policy under
    ``./pyproject.toml``'s ``[tool.conformance]``, as the CLI reads it); a
    ``GateConfig`` may give a kernel's name a policy.  ``strict``: any bit difference fails
    (``--strict``); ``allow``: categories any backend may show (``--allow``).  ``results_dir``:
    where failing rows' reproducers go (None: none are written).  ``reference``: a backend name
    or a sequence of them, as ``run --reference`` takes: their rows run too (first, in
    ``rows``), every other row runs on the same inputs and is compared with each reference bit
    for bit, and each reference with the ones before it (``Report.agreement``; the verdicts
    against golden do not change).
    """
    selection = _selection(fn, name=name, dtypes=_dtypes(dtypes), kind=kind, backward=backward,
                           alphas=_alphas(alphas), directions=tuple(directions),
                           profile=profile, variant=variant, references=_references(reference))
    for d in selection.directions:
        if d not in DIRECTIONS:
            raise UsageError(f"direction {d!r}: pass forward and/or backward")
    gate = _gate(config, strict=strict, allow=allow)
    options = Options(config=gate, seed=seed, max_examples=max_examples,
                      results_dir=None if results_dir is None else Path(results_dir), plots=False)
    specs, skipped = planned(selection, options)
    if not specs:
        why = "; ".join(dict.fromkeys(w for _, w in skipped)) or "nothing selected"
        raise UsageError(f"the selection runs no rows ({why})")
    result: SuiteResult = run_suite(selection, options, specs=specs)
    if result.interruption is not None:
        raise result.interruption
    return Report(tuple(result.rows), tuple(skipped), seed, export.versions(), gate,
                  selection.references, tuple(result.agreement))

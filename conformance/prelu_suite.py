"""The PReLU and RReLU rows of ``conformance run``: each backend declaring the op (``ops``), on the
dtypes the op's golden and the backend share, forward and backward, judged against the exact
golden (:mod:`conformance.reference.prelu`) and triaged by :mod:`conformance.triage.prelu`.

A PReLU row's ``alpha`` is torch's initial value, 0.25, which the first channel's weight
holds; the others hold the slopes of ``CHANNEL_WEIGHTS``.  A backward row judges two parts
per batch, dx and dweight.  Its batches:

- ``edges``: every special value (±0, ±inf, NaN, subnormals, the limits) among random ones, a
  weight per channel (forward and dx only: a sum over specials is NaN or inf);
- ``shared weight``: the same with one weight element for every channel;
- ``short values``: values of four significant bits, whose dweight sums are exact in float32 in
  any order, so every way of summing must give the golden's bits;
- ``random``: normal values (float16 and bfloat16), where the way of summing shows.

A sum's order and accumulator are the implementation's: ``reduction-order`` is named, and
allowed on every backend.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np

from conformance.backends import WorkerSpec
from conformance.dtypes import info
from conformance.judge.agreement import Collector, Output
from conformance.judge.evaluate import merge_rows
from conformance.judge.gate import GateConfig, finding_gated, verdict
from conformance.metrics import exact as met
from conformance.ops import RRELU_EVAL_SLOPE, ops_of, prelu_runs
from conformance.records import MAX_EXAMPLES, BackendResult, Finding, Offender, Row, RowKey
from conformance.reference import prelu
from conformance.suite import SUITE_ALPHAS, Selection, backend_for
from conformance.triage.prelu import Operands, PreluClaim, triage_dweight, triage_elementwise

PRELU_DTYPES: tuple[str, ...] = ("float32", "float16", "bfloat16")
SHAPE: tuple[int, ...] = (2, 4, 6, 6)
CHANNEL_WEIGHTS: tuple[float, ...] = (0.25, 0.0, -0.5, 0.2)
#: The slope each op's rows start from (the row's alpha).
OP_ALPHA = {"prelu": CHANNEL_WEIGHTS[0], "rrelu": RRELU_EVAL_SLOPE}
ALWAYS_ALLOWED = frozenset({"reduction-order"})


@dataclass(frozen=True)
class PreluRowSpec(RowKey):
    """One PReLU or RReLU row to run (its ``op`` says which), and the worker that serves its backend
    (None: in-process)."""

    worker: Optional[WorkerSpec] = field(default=None, kw_only=True)

    @classmethod
    def of(cls, backend: object, name: str, op: str, dtype: str, direction: str) -> PreluRowSpec:
        return cls(name, getattr(backend, "profile", None), getattr(backend, "variant", None), dtype, dtype,
                   direction, OP_ALPHA[op], op=op)


@dataclass(frozen=True)
class PreluBatch:
    """One input: x, dy (backward), the weight, the axis its elements lie on (torch's 1), its label."""

    label: str
    x: np.ndarray
    dy: Optional[np.ndarray]
    weight: np.ndarray
    channel_axis: int = 1


def _specials(dtype: str) -> np.ndarray:
    d = info(dtype)
    tiny = 2.0 ** (d.emin - d.mant_bits)
    values = [0.0, np.inf, np.nan, tiny, d.smallest_normal - tiny, d.smallest_normal, d.max, 1.0, 0.5]
    return np.array([s * v for v in values for s in (1.0, -1.0)])


def _cast(v: np.ndarray, dtype: str) -> np.ndarray:
    with np.errstate(over="ignore"):
        return v.astype(np.float64).astype(np.float32).astype(info(dtype).dtype) if dtype == "bfloat16" \
            else v.astype(info(dtype).dtype)


def _short(rng: np.random.Generator, n: int) -> np.ndarray:
    """Values of at most four significant bits within 2^±4: sums of their products are exact in float32."""
    return rng.integers(-15, 16, n) * 2.0 ** rng.integers(-4, 5, n)


def batches(dtype: str, direction: str, *, op: str, seed: int = 0) -> list[PreluBatch]:
    """The row's inputs (see the module's docstring); RReLU's weight is its one eval slope."""
    rng = np.random.default_rng(seed)
    n, backward = int(np.prod(SHAPE)), direction == "backward"
    weight = _cast(np.array(CHANNEL_WEIGHTS if op == "prelu" else [RRELU_EVAL_SLOPE]), dtype)
    shared = weight[:1]

    def made(label: str, values: Callable[[], np.ndarray], w: np.ndarray) -> PreluBatch:
        x = _cast(values(), dtype).reshape(SHAPE)
        return PreluBatch(label, x, _cast(values(), dtype).reshape(SHAPE) if backward else None, w)

    edges = lambda: np.where(rng.random(n) < 0.3, rng.choice(_specials(dtype), n), rng.normal(size=n))  # noqa: E731
    out = [made("edges", edges, weight)] + ([made("shared weight", edges, shared)] if op == "prelu" else [])
    out.append(made("short values", lambda: _short(rng, n), weight))
    if dtype != "float32":
        out.append(made("random", lambda: rng.normal(size=n), weight))
    return out


def golden_weight(op: str, weight: np.ndarray) -> np.ndarray:
    """The weight the golden multiplies by: PReLU's own; RReLU's slope in float64, as torch holds it."""
    return weight if op == "prelu" else np.array([RRELU_EVAL_SLOPE])


def call(backend: object, spec: PreluRowSpec, batch: PreluBatch) -> BackendResult:
    """The backend's ``prelu`` or ``rrelu`` on copies of the batch; whatever it raises is a refusal."""
    x, dy = batch.x.copy(), None if batch.dy is None else batch.dy.copy()
    try:
        if spec.op == "rrelu":
            return backend.rrelu(spec.direction, x, dy=dy)  # type: ignore[attr-defined]
        return backend.prelu(spec.direction, x, batch.weight.copy(), dy=dy)  # type: ignore[attr-defined]
    except Exception as exc:  # noqa: BLE001 - a backend's failure is its row's finding
        return BackendResult(value=None, rejected=f"the backend raised {type(exc).__name__}: {exc}")


def _findings(claims: list[PreluClaim], comp: met.Comparison, values: Callable[[int], tuple], *, spec: RowKey,
              config: GateConfig, part: str) -> tuple[Finding, ...]:
    bad = np.zeros(comp.metrics.elements, dtype=bool)
    bad[comp.mismatch_index[comp.violating]] = True
    found = []
    for c in claims:
        index = np.flatnonzero(c.mask.reshape(-1))
        violations = int(np.count_nonzero(bad[index]))
        gated = finding_gated(c.category, violations=violations, backend=spec.backend, config=config,
                              profile=spec.profile)
        examples = tuple(Offender(int(i), *values(int(i)), part=part) for i in index[:MAX_EXAMPLES])
        found.append(Finding(c.category, int(index.size), gated, c.summary, dict(c.detail), examples, None,
                             violations))
    return tuple(found)


def judge_part(spec: RowKey, expected: np.ndarray, actual: np.ndarray, claims: Callable[[], list[PreluClaim]], *,
               values: Callable[[int], tuple], config: GateConfig, part: str) -> Row:
    """One compared tensor (y, dx or dweight) as a row of its own: metrics, triage, gate."""
    comp = met.compare(actual.reshape(-1), expected.reshape(-1), tolerance=config.tolerance(spec.out_dtype), part=part)
    findings = _findings(claims(), comp, values, spec=spec, config=config, part=part) \
        if comp.mismatch_index.size else ()
    return Row(*(getattr(spec, f) for f in ("backend", "profile", "variant", "dtype", "out_dtype", "direction",
                                             "alpha")), op=spec.op, metrics=comp.metrics, findings=findings,
               verdict=verdict([f.gated for f in findings]), parts=(part,), shapes=(tuple(expected.shape),))


def _refused(spec: RowKey, result: BackendResult, batch: PreluBatch, *, config: GateConfig) -> Row:
    n = int(batch.x.size)
    gated = not config.allows(spec.backend, "rejected-input", profile=spec.profile)
    finding = Finding("rejected-input", n, gated, f"backend refused the input: {result.rejected}",
                      {"reason": result.rejected}, (), None, n)
    return Row(*(getattr(spec, f) for f in ("backend", "profile", "variant", "dtype", "out_dtype", "direction",
                                             "alpha")), op=spec.op, metrics=met.empty(elements=n),
               findings=(finding,), verdict=verdict([gated]), parts=(batch.label,), shapes=(batch.x.shape,))


def judge_batch(spec: RowKey, batch: PreluBatch, result: BackendResult, *, config: GateConfig,
                with_dweight: bool = True) -> list[Row]:
    """A batch's rows: y (forward), or dx and (PReLU, ``with_dweight``) dweight (backward)."""
    if result.rejected is not None or result.value is None:
        return [_refused(spec, result, batch, config=config)]
    w, axis = golden_weight(spec.op, batch.weight), batch.channel_axis
    forward = spec.direction == "forward"
    operand = batch.x if forward else batch.dy
    expected = prelu.forward(batch.x, w, channel_axis=axis) if forward else \
        prelu.backward(batch.dy, batch.x, w, channel_axis=axis)
    actual = np.asarray(result.value).reshape(batch.x.shape)
    ops = Operands(batch.x, operand, w, axis)
    xs, ds = batch.x.reshape(-1), None if batch.dy is None else batch.dy.reshape(-1)
    values = lambda i: (xs[i], None if ds is None else ds[i], expected.reshape(-1)[i], actual.reshape(-1)[i])  # noqa: E731
    rows = [judge_part(spec, expected, actual, lambda: triage_elementwise(ops, expected, actual, forward=forward),
                       values=values, config=config, part=f"{batch.label} {'y' if forward else 'dx'}")]
    if not forward and spec.op == "prelu" and with_dweight:
        rows.append(_dweight_row(spec, batch, result, config=config))
    return rows


def _dweight_row(spec: RowKey, batch: PreluBatch, result: BackendResult, *, config: GateConfig) -> Row:
    expected = prelu.dweight(batch.dy, batch.x, batch.weight, channel_axis=batch.channel_axis)
    actual = np.asarray(result.dweight if result.dweight is not None else np.full(expected.shape, np.nan))
    actual = actual.reshape(expected.shape).astype(expected.dtype)
    tile = result.tile_plan.tile_elements if result.tile_plan is not None else None
    values = lambda i: (None, None, expected.reshape(-1)[i], actual.reshape(-1)[i])  # noqa: E731
    return judge_part(spec, expected, actual,
                      lambda: triage_dweight(batch.dy, batch.x, batch.weight, expected, actual, tile=tile,
                                             channel_axis=batch.channel_axis),
                      values=values, config=config, part=f"{batch.label} dweight")


def row_config(backend: object, config: GateConfig) -> GateConfig:
    """``config`` allowing the backend's ``prelu_allowed`` (what its PReLU shows by design) and
    ``reduction-order``."""
    return replace(config, allowed=config.allowed | ALWAYS_ALLOWED | getattr(backend, "prelu_allowed", frozenset()))


def run_outputs(spec: PreluRowSpec, backend: object, *, config: GateConfig, seed: int = 0) -> list[Output]:
    """Every batch of one row, each judged part (y, dx, dweight) with what the backend returned for it,
    for an agreement between backends (:class:`conformance.judge.agreement.Collector`)."""
    config = row_config(backend, config)
    found = []
    for b in batches(spec.dtype, spec.direction, op=spec.op, seed=seed):
        result = call(backend, spec, b)
        for row in judge_batch(spec, b, result, config=config):
            actual = result.dweight if row.parts[0].endswith("dweight") else result.value
            found.append(Output(row.parts[0], b.x, b.dy, None if actual is None else np.asarray(actual), row))
    return found


def run_row(spec: PreluRowSpec, backend: object, *, config: GateConfig, seed: int = 0,
            collector: Optional[Collector] = None) -> Row:
    """Every batch of one row, judged and merged (:func:`row_config`); a ``collector`` compares its
    outputs with its references' rows."""
    outputs = run_outputs(spec, backend, config=config, seed=seed)
    if collector is not None:
        collector.add(outputs)
    return merge_rows([o.row for o in outputs], config=row_config(backend, config))


def supports(backend: object, dtype: str, direction: str) -> bool:
    """Whether ``backend`` runs PReLU on ``dtype`` in ``direction``: its ``prelu_supports``, else its
    LeakyReLU ``supports``."""
    return prelu_runs(backend, dtype, direction)


def plan_rows(backends: dict[str, object], *, directions: tuple[str, ...],
              dtypes: Optional[tuple[str, ...]] = None,
              ops: tuple[str, ...] = tuple(OP_ALPHA)) -> list[PreluRowSpec]:
    """The rows of ``ops`` of the given backends (name -> instance) that declare the op and support the dtype."""
    specs = []
    for name, backend in backends.items():
        for op in (o for o in ops if o in ops_of(backend)):
            for dtype in (d for d in PRELU_DTYPES if dtypes is None or d in dtypes):
                specs += [PreluRowSpec.of(backend, name, op, dtype, d) for d in directions
                          if supports(backend, dtype, d)]
    return specs


def selected_ops(alphas: tuple[float, ...]) -> tuple[str, ...]:
    """The ops whose rows slopes ``alphas`` select: all with the suite's slopes (no ``--alpha``),
    else those whose row alpha is among them (``--alpha 0.25``: PReLU's rows)."""
    return tuple(op for op, alpha in OP_ALPHA.items() if alphas == SUITE_ALPHAS or alpha in alphas)


def for_selection(selection: Selection) -> list[PreluRowSpec]:
    """The PReLU/RReLU rows a ``conformance run`` selection takes: those of its backends that declare the
    ops (a backend served by a worker declares them in its hello), on its dtypes, directions and slopes
    (:func:`selected_ops`) and ops (``selection.ops``), each with the worker that serves its backend."""
    ops = tuple(op for op in selected_ops(tuple(selection.alphas)) if selection.runs_op(op))
    if not ops:
        return []
    chosen = {name: selection.backend(name) for name in selection.backends}
    dtypes = None if selection.dtypes is None else tuple(d for d in selection.dtypes if "->" not in d)
    specs = plan_rows(chosen, directions=tuple(selection.directions), dtypes=dtypes, ops=ops)
    return [replace(s, worker=selection.identity(s.backend)[2]) for s in specs]


def run_spec(spec: PreluRowSpec, *, config: GateConfig, seed: int = 0, collector: Optional[Collector] = None) -> Row:
    """:func:`run_row` on the backend instance of ``spec``'s name, profile and variant, or its worker's client."""
    return run_row(spec, backend_for(spec.backend, spec.profile, spec.variant, spec.worker), config=config, seed=seed,
                   collector=collector)

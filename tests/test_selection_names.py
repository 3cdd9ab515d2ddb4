"""Whatever a report prints can be selected: every backend label (``cann[ascend910b1/reference]``,
``tflite``, ``tflite[xnnpack]``, ``tflite[xnnpack/S:Z:S:Z]``) with ``--backend`` and every dtype
(``fp32->fp16``, ``qint8``) with ``--dtype``."""
from __future__ import annotations

import pytest

from conformance import quantized_suite, suite
from conformance.cli import build_parser
from conformance.commands.selection import run_selection_from
from conformance.errors import UsageError
from conformance.records import label_parts, pair_text
from tests.helpers import assert_usage_error, run_cli


def _selected(*argv: str):
    return run_selection_from(build_parser().parse_args(["run", *argv]))


def _planned(*argv: str) -> list:
    selection, ask = _selected(*argv)
    specs = suite.plan(selection)[0] if selection.backends else []
    return [*specs, *quantized_suite.for_selection(selection, ask)[0]]


@pytest.fixture(scope="module")
def printed() -> list:
    """The rows a default ``conformance run`` plans here: what its report prints."""
    return _planned()


def _short(label: str) -> str:
    """A label as a report may shorten it: without the quantized setting."""
    base, profile, _ = label_parts(label)
    return f"{base}[{profile}]" if profile else base


def test_every_printed_backend_label_selects_its_rows(printed) -> None:
    labels = {s.label for s in printed} | {_short(s.label) for s in printed} | {s.backend for s in printed}
    assert {"tflite", "tflite[xnnpack]"} <= labels or "tensorflow" not in {s.backend for s in printed}
    for label in sorted(labels):
        selection, ask = _selected("--backend", label)
        base, profile, variant = label_parts(label)
        if quantized_suite.names_quantized(label, float_backends=suite.default_backends()):
            rows, _ = quantized_suite.for_selection(selection, ask)
            assert rows and all(r.backend == base and profile in (None, r.profile) for r in rows), label
            assert variant is None or {r.variant for r in rows} == {variant}, label
            assert selection.backends == (), label
        else:
            assert selection.backends == (base,) and (selection.profile, selection.variant) == (profile, variant)


def test_every_printed_dtype_selects_its_rows(printed) -> None:
    by_dtype: dict[str, str] = {}
    for spec in printed:
        if getattr(spec, "worker", None) is None:  # in-process: planning it starts nothing
            by_dtype.setdefault(pair_text(spec.dtype, spec.out_dtype), spec.backend)
    assert {"qint8", "quint8", "fp16", "fp32->fp16"} <= set(by_dtype) or "torch" not in by_dtype.values()
    for dtype, backend in sorted(by_dtype.items()):
        rows = _planned("--backend", backend, "--dtype", dtype)
        assert rows and {pair_text(r.dtype, r.out_dtype) for r in rows} == {dtype}, (dtype, backend)


def test_quantized_names_run_from_the_command_line(capsys) -> None:
    pytest.importorskip("tensorflow")
    result = run_cli(["run", "--backend", "tflite[xnnpack]", "--dtype", "qint8", "-q", "--json", "/dev/null"],
                     capsys)
    assert result.code == 0 and result.out.startswith("5 rows"), result.text


def test_a_bracket_and_a_flag_that_disagree_is_a_usage_error(capsys) -> None:
    result = run_cli(["run", "--backend", "cann[ascend910b3]", "--profile", "ascend910a", "-q"], capsys)
    assert_usage_error(result, mentions="--backend cann[ascend910b3] and --profile ascend910a differ")


def test_agree_says_quantized_rows_are_runs(capsys) -> None:
    with pytest.raises(UsageError, match="quantized rows run in `conformance run` only"):
        from conformance.commands.selection import selection_from

        selection_from(build_parser().parse_args(["agree", "--backend", "tflite"]))

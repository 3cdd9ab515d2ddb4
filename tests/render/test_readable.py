"""The console reads as a person reads: short row labels (a quantized row's setting on a line of
its own), numbers decimal first and bits after, one index style, a NaN or a zero's sign said as
what happened, a summary per backend before a long agreement table, no word split at 80, 100 or
120 columns, and a hint at the flag that gates a warning a user may not expect."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from conformance import cli
from conformance.config import default_config
from conformance.judge.agreement import Agreement, Cell
from conformance.judge.evaluate import evaluate
from conformance.judge.gate import CATEGORIES
from conformance.judge.quantized import evaluate_codes
from conformance.records import BackendResult, Row
from conformance.reference import golden as ref
from conformance.reference.quantized import QuantParams, all_codes, exact_table, lookup
from conformance.reference.semantics import Semantics
from conformance.render import agreement as shown
from conformance.render import console as show
from conformance.render.export import row_dict
from conformance.render.messages import describe_offender, failure_message
from conformance.render.text import decimal_and_hex, hex_float, index_text
from conformance.render.widths import settle
from conformance.suite import RowSpec
from tests.helpers import keep_small_batches, run_cli

CONFIG = default_config()
X16 = np.linspace(-4, 4, 4096, dtype=np.float16)
WIDTHS = (80, 100, 120)
SETTING = QuantParams(0.05000000074505806, 0, 0.02992156893014908, -85, "qint8")


def _row(actual: np.ndarray, *, x: np.ndarray = X16, alpha: float = 0.2, backend: str = "cann",
         profile: str | None = None, variant: str | None = None) -> Row:
    return evaluate(x, alpha, BackendResult(actual), direction="forward", backend=backend, profile=profile,
                    variant=variant, config=CONFIG, label="y.npy")


def _quantized(*, off_by_one: bool) -> Row:
    codes = all_codes(SETTING)
    out = lookup(exact_table(0.2, params=SETTING), codes, params=SETTING).copy()
    out[3] += off_by_one
    return evaluate_codes(codes, out, 0.2, params=SETTING, backend="tflite", profile="xnnpack", config=CONFIG,
                          label="codes")


def _signed_zero_row() -> Row:
    """A kernel wrong only at -0.0: it returns +0.0 there."""
    x = X16.copy()
    x[:12] = -0.0
    y = ref.forward(x, 0.2)
    y[:12] = 0.0
    return _row(y, x=x, backend="torch")


def _rows() -> list[Row]:
    """Warning, failing, signed-zero and quantized rows of long labels and several categories."""
    rows = []
    for alpha in (0.1, 0.2, 0.3):
        slope16 = ref.forward(X16, alpha, semantics=Semantics(slope_dtype="float16"))
        flushed = slope16.copy()
        flushed[X16 < -3] = 0
        rows += [_row(slope16, alpha=alpha, backend="tensorflow"),
                 _row(slope16, alpha=alpha, profile="ascend910b1", variant="reference"),
                 _row(flushed, alpha=alpha, backend="jax")]
    return [*rows, _signed_zero_row(), _quantized(off_by_one=True), _quantized(off_by_one=False)]


def _text(draw, *, width: int) -> str:
    console = Console(record=True, width=width)
    draw(console)
    return console.export_text()


def _words(text: str) -> str:
    """``text`` with its line breaks and runs of blanks as single spaces."""
    return " ".join(text.split())


def _category_counts(text: str) -> dict[str, int]:
    """How often each category name appears whole in ``text`` (cut ones, ``alpha-precisi`` /
    ``on`` or ``alpha-p…``, do not count)."""
    return {c: len(re.findall(rf"(?<![\w-]){re.escape(c)}(?![\w-])", text)) for c in CATEGORIES}


# ----------------------------------------------------------------------------- row labels

def test_a_quantized_row_is_labelled_without_its_setting_which_gets_a_line_and_stays_in_the_json() -> None:
    row = _quantized(off_by_one=True)
    assert row.variant == "0.05000000074505806:0:0.02992156893014908:-85"
    assert show.short_label(row) == "tflite[xnnpack]" and row.label.startswith("tflite[xnnpack/0.05")
    folded = _text(lambda c: show.render_folded([row], console=c), width=120)
    assert "tflite[xnnpack] " in folded and "0.0299" not in folded
    panel = _text(lambda c: show.render_details([row], console=c), width=120)
    assert "FAIL  tflite[xnnpack] qint8 forward alpha=0.2" in panel
    assert ("setting: input scale 0.05000000074505806, zero point 0; output scale 0.02992156893014908, "
            "zero point -85") in panel
    assert row_dict(row)["variant"] == row.variant and row_dict(row)["profile"] == "xnnpack"


def test_quantized_rows_fold_into_one_line_per_profile_and_dtype() -> None:
    rows = [_quantized(off_by_one=True), _quantized(off_by_one=False)]
    (group,) = show.fold(rows)
    assert group.not_passing() == "1 of 2 settings"
    text = _text(lambda c: show.render_rows(rows, console=c, view=show.View()), width=120)
    assert "--details all shows each row's setting" in _words(text)
    every = _text(lambda c: show.render_table(rows, console=c), width=120)
    assert every.count("0.05:0→0.0299:-85") == 2  # the per-alpha table stacks each row's setting


# ----------------------------------------------------------------------------- numbers and indices

def test_numbers_read_decimal_first_and_bits_after() -> None:
    assert decimal_and_hex(12449.0) == "12449.0 (0x1.8508p+13)"
    assert (hex_float(1.0), hex_float(0.0), hex_float(-0.5)) == ("0x1p+0", "0x0p+0", "-0x1p-1")
    assert (decimal_and_hex(float("inf")), decimal_and_hex(float("-inf")), decimal_and_hex(float("nan"))) == \
        ("inf", "-inf", "nan")
    y = ref.forward(X16, 0.2)
    y[8] = np.inf
    message = failure_message(_row(y))
    assert "Greatest absolute difference: inf at index [8] of y.npy" in message and "inf (inf)" not in message
    y = ref.forward(X16, 0.2)
    y[8] += np.float16(1.0)
    assert re.search(r"Greatest absolute difference: [0-9.]+ \(0x1(\.[0-9a-f]+)?p[+-][0-9]+\) at index \[8\]",
                     failure_message(_row(y)))


def test_one_index_style_in_every_line() -> None:
    assert (index_text(8, (4096,)), index_text(8, None), index_text(1203, (5, 300))) == ("[8]", "[8]", "[4, 3]")
    y = ref.forward(X16, 0.2)
    y[8] = np.float16(7.0)
    message = failure_message(_row(y))
    assert "at index [8] of y.npy" in message and "index [8] of y.npy: x=" in message
    assert not re.search(r"index \(|index [0-9]", message), message
    (example,) = [e for f in _row(y).findings for e in f.examples]
    assert describe_offender(example, shape=(64, 64)).startswith("index [0, 8] of y.npy: x=")
    assert "x=-3.984375 (0xc3f8)" in describe_offender(example)  # a value: decimal, then its bits


def test_a_nan_on_one_side_is_said_and_no_distance_of_0_is_printed() -> None:
    x = X16.copy()
    x[8] = np.nan
    y = ref.forward(x, 0.2)
    y[8] = 0.0  # a NaN lost
    message = failure_message(_row(y, x=x))
    assert "NaN on one side only: 1 element" in message
    assert "Greatest ULP difference: 0" not in message and "Greatest" not in message


def test_a_zero_of_the_other_sign_is_said_and_no_distance_of_0_is_printed() -> None:
    message = failure_message(_signed_zero_row())
    assert "Zero of the other sign: 12 elements" in message and "Greatest" not in message


def test_a_warned_signed_zero_row_says_how_to_gate_it() -> None:
    row = _signed_zero_row()
    assert row.verdict == "warn"
    text = _words(_text(lambda c: show.render_rows([row], console=c, view=show.View()), width=100))
    assert "note: signed-zero ×12 only warned on 1 row" in text and text.count("--strict-zeros") == 1
    args = cli.build_parser().parse_args(["run", "--strict-zeros"])  # the flag the hint names exists
    assert args.strict_zeros is True
    assert show.footnotes([_row(ref.forward(X16, 0.2))]) == []  # nothing to say about a passing row


# ----------------------------------------------------------------------------- widths

def test_settle_gives_each_column_its_longest_word_and_shares_the_rest() -> None:
    assert settle([15, 8], [40, 16], spare=30) == [15, 15]
    assert settle([15, 8], [40, 20], spare=40) == [20, 20]  # the short column whole, the long one wraps
    assert settle([15, 8], [40, 16], spare=60) == [40, 16]  # no more than each needs


@pytest.fixture(scope="module")
def rows() -> list[Row]:
    """:func:`_rows`, judged once for every width."""
    return _rows()


@pytest.mark.parametrize("width", WIDTHS)
def test_no_table_splits_a_word_at_80_100_or_120_columns(width: int, rows: list[Row]) -> None:
    drawn = {"folded": lambda c: show.render_folded(rows, console=c),
             "every row": lambda c: show.render_table(rows, console=c),
             "agreement": lambda c: shown.render_agreement(_agreements(), console=c),
             "agreement, every row": lambda c: shown.render_agreement(_agreements(), console=c, every_row=True),
             "agree": lambda c: [c.print(t) for t in shown.matrix_tables(_cells(), width=width)]}
    for name, draw in drawn.items():
        text, wide = _text(draw, width=width), _text(draw, width=400)
        assert _category_counts(text) == _category_counts(wide), f"{name} at {width}:\n{text}"
        assert "…" not in text and max(map(len, text.splitlines())) <= width, f"{name} at {width}:\n{text}"
        assert _category_counts(text)["alpha-precision"] > 0, name


# ----------------------------------------------------------------------------- agreement

BACKENDS = ("golden", "tensorflow", "cann", "jax", "onnxruntime", "keras")


def _agreements() -> list[Agreement]:
    found = []
    for backend in BACKENDS:
        profile = {"cann": "ascend910b1", "keras": "tensorflow"}.get(backend)
        for direction in ("forward", "backward"):
            for alpha in (0.0, 0.1, 0.2, 0.3):
                same = alpha == 0.0
                found.append(Agreement(
                    backend, profile, None, "float16", "float16", direction, alpha, reference="torch",
                    identical=same, differing=0 if same else 4175, elements=2632072,
                    why="" if same else f"{backend}: alpha-precision ×402,516, subnormal-flush ×17,994; "
                                        "torch: rounding ×4,175",
                    causes=() if same else ("alpha-precision", "subnormal-flush")))
    return found


def _cells() -> list[Cell]:
    names = ("golden", "torch", *BACKENDS[1:])
    return [Cell("float16", "float16", "forward", a, b, 402524, 2632072, 3, ("alpha-precision",))
            for i, a in enumerate(names) for b in names[i + 1:]]


def test_a_summary_line_per_backend_comes_before_the_agreement_table() -> None:
    text = _text(lambda c: shown.render_agreement(_agreements(), console=c), width=120)
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if "per backend" in line)
    table = next(i for i, line in enumerate(lines) if "α folded" in line)
    assert head < table
    summary = [line for line in lines[head:table] if line.split(" ", 1)[0].split("[")[0] in BACKENDS]
    assert len(summary) == len(BACKENDS)
    assert summary[0].split() == ["golden", "8", "2", "6", "25,050", "alpha-precision", "6"]
    folded = [line for line in lines[table:] if line.split(" ", 1)[0].split("[")[0] in BACKENDS]
    assert len(folded) == len(BACKENDS) * 2  # a line per backend and direction, the alphas folded
    assert folded[0].split()[:4] == ["golden", "fp16", "fwd", "0"]


def test_agree_notes_the_backends_a_table_leaves_out_and_why() -> None:
    cells = [*_cells(), Cell("float16", "float16", "backward", "golden", "torch", 0, 10, 1, ())]
    skipped = [(RowSpec("onnxruntime", None, None, "float16", "float16", "backward", 0.1),
                "ONNX Runtime runs no gradient of LeakyRelu")]
    lines = shown.left_out(cells, backends=["golden", "torch", "onnxruntime"], skipped=skipped)
    assert lines == ["note: the fp16 bwd table leaves out onnxruntime (ONNX Runtime runs no gradient of LeakyRelu)"]


# ----------------------------------------------------------------------------- the command line

def test_quiet_prints_the_verdict_line_alone_and_the_policy_goes_to_stderr(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    np.save(tmp_path / "x.npy", X16)
    np.save(tmp_path / "y.npy", ref.forward(X16, 0.2, semantics=Semantics(slope_dtype="float16")))
    args = ["compare", "--x", "x.npy", "--y", "y.npy", "--alpha", "0.2"]
    loud, quiet = run_cli(args, capsys, cwd=tmp_path), run_cli([*args, "-q"], capsys, cwd=tmp_path)
    assert "built-in policy" in loud.err and "built-in policy" not in loud.out, loud.text
    assert quiet.out == "1 row: 0 passed, 1 warned, 0 failed: PASS\n" and "policy" not in quiet.err


def test_quiet_compare_of_an_msprobe_dump_prints_no_notes(capsys: pytest.CaptureFixture[str]) -> None:
    dump = Path(__file__).resolve().parents[1] / "fixtures" / "msprobe" / "leaky3"
    loud = run_cli(["compare", "--msprobe", str(dump)], capsys)
    quiet = run_cli(["compare", "--msprobe", str(dump), "-q"], capsys)
    assert "note: " in loud.out, loud.text
    assert quiet.out.splitlines() == [loud.out.splitlines()[-1]], quiet.text


def test_agree_says_which_backends_the_backward_table_leaves_out(capsys: pytest.CaptureFixture[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("onnxruntime")
    keep_small_batches(monkeypatch)
    args = ["agree", "--backend", "golden,torch,onnxruntime", "--dtype", "fp16", "--alpha", "0.2",
            "--max-examples", "5"]
    loud, quiet = run_cli(args, capsys), run_cli([*args, "-q"], capsys)
    assert loud.code == 0 and "fp16 bwd" in loud.out, loud.text
    assert ("note: the fp16 bwd table leaves out onnxruntime (ONNX Runtime runs no gradient of LeakyRelu)"
            in _words(loud.out)), loud.out
    assert "fp16 bwd" in quiet.out and "note:" not in quiet.out and "✓ bit-identical" not in quiet.out  # tables only

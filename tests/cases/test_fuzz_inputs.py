"""Fuzz: malformed .npy/.npz/TOML/reproducer bytes never crash a command.

Each target starts from valid files, mutates them (bit flips, truncation, random
bytes, inserted bytes, header edits, or well-formed files with odd contents) and
runs the command in-process.  The command must end with exit 0, 1 or 2, and an
exit 2 must be one line on stderr.  An exception escaping ``cli.main`` (what a
user sees as a traceback) fails the test and hypothesis prints the input.

Fast on purpose: a few dozen examples per target, no example database, no
deadline (first calls import torch and the emulator), derandomised so that CI
sees the same inputs every run.
"""
from __future__ import annotations

import io
import json
import math
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from conformance.cases import corpus
from tests.helpers import CliResult, error_lines, run_cli

#: examples per target; CONFORMANCE_FUZZ_EXAMPLES=2000 for a deeper hunt by hand
EXAMPLES = int(os.environ.get("CONFORMANCE_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
X = np.array([-2.0, -1.0, -0.0, 0.0, 1e-40, -1e-40, 0.5, 3.0, np.inf, -np.inf, np.nan, -7.25], np.float32)


def _assert_handled(result: CliResult) -> None:
    __tracebackhide__ = True
    event(f"exit {result.code}: {result.err.strip()[:60]}")
    assert result.code in (0, 1, 2), f"exit {result.code}:\n{result.text}"
    assert "Traceback" not in result.text
    if result.code == 2:
        lines = error_lines(result.err)
        assert len(lines) == 1, f"exit 2 with {len(lines)} lines:\n{result.err}"


# ----------------------------------------------------------------------------- byte mutations

def _npy(a: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, a, allow_pickle=False)
    return buffer.getvalue()


def _npz(**arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _header(descr: Any, shape: tuple[int, ...], payload: bytes, *, fortran: bool = False) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": descr, "fortran_order": fortran, "shape": shape})
    return buffer.getvalue() + payload


def _zip(name: str, member: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(name, member)
    return buffer.getvalue()


@st.composite
def mutated(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    """One of ``seeds`` with one to three edits: flip, truncate, overwrite, insert, or random bytes."""
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "truncate", "overwrite", "insert", "random"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "truncate":
            del data[at:]
        elif kind == "overwrite":
            chunk = draw(st.binary(min_size=1, max_size=16))
            data[at:at + len(chunk)] = chunk
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        else:
            data = bytearray(draw(st.binary(max_size=256)))
    return bytes(data)


# ----------------------------------------------------------------------------- .npy headers

_DESCRS = ["<f4", ">f4", "<f2", ">f2", "<f8", ">f8", "|V2", "<u2", ">u2", "<i2", "<c8", "|b1", "<U3", "|O",
           "<M8[D]", "|S4", "<f16", "float32", "[('a', '<f4')]", "", "<f3", "?"]
_SHAPES = st.one_of(
    st.lists(st.integers(0, 64), max_size=3).map(tuple),
    st.sampled_from([(10 ** 13,), (2 ** 62,), (-1,), (12,), (3, 4), (0,), ()]),
)


@st.composite
def npy_with_edited_header(draw: st.DrawFn) -> bytes:
    """A .npy whose header declares another dtype, order or shape than its payload holds."""
    descr: Any = draw(st.sampled_from(_DESCRS))
    payload = draw(st.sampled_from([X.tobytes(), X.astype(np.float16).tobytes(), b"", X.tobytes()[:7]]))
    return _header([("a", "<f4")] if descr.startswith("[") else descr, draw(_SHAPES), payload,
                   fortran=draw(st.booleans()))


@st.composite
def npz_with_odd_member(draw: st.DrawFn) -> bytes:
    """A zip holding an edited .npy, or bytes under any name (numpy reads only *.npy members as arrays)."""
    name = draw(st.sampled_from(["x.npy", "y.npy", "x", "notes.txt", "a.npy"]))
    return _zip(name, draw(st.one_of(npy_with_edited_header(), st.binary(max_size=64))))


def _dump_seeds() -> list[bytes]:
    y = np.where(X > 0, X, np.float32(0.2) * X).astype(np.float32)
    return [_npy(X), _npy(y), _npz(x=X), _npz(y=y), _npz(a=y, b=X), _npy(X.astype(np.float16)),
            _npy(X.reshape(3, 4)), _npy(X.astype(np.float16).view(np.uint16))]


def _zip_needing_version(version: int) -> bytes:
    """A valid .npz whose central directory says extracting needs zip version ``version``/10."""
    data = bytearray(_npz(y=X))
    at = data.index(b"PK\x01\x02") + 6
    data[at:at + 2] = version.to_bytes(2, "little")
    return bytes(data)


#: Crashes the fuzz found in the array loader (numpy errors escaping it), kept as explicit examples:
#: name -> (flag, file bytes).
Y_BIG = np.where(X > 0, X, np.float32(0.2) * X).astype(">f4")
LOADER_CRASHES = {
    "npz-member-not-npy": ("--x", _zip("x.npy", b"")),  # np.load returns bytes, not an array
    "header-shape-1e13": ("--x", _header("<f2", (10 ** 13,), X.astype(np.float16).tobytes())),  # MemoryError
    "npz-header-shape-1e13": ("--x", _zip("x.npy", _header(">f2", (10 ** 13,), b""))),  # MemoryError
    "header-not-python": ("--x", _header("<f2", (12,), b"").replace(b"(12,)", b")12,)")),  # TokenError
    "zip-version-17.3": ("--x", _zip_needing_version(173)),  # NotImplementedError from zipfile
    "big-endian-y-npy": ("--y", _header(">f4", (12,), Y_BIG.tobytes())),  # ulp_distance: >f4 vs float32
    "big-endian-y-npz": ("--y", _zip("y.npy", _header(">f4", (12,), Y_BIG.tobytes()))),
    "npy-version-9.0": ("--x", _header("<f2", (12,), X.astype(np.float16).tobytes()).replace(
        b"\x93NUMPY\x01\x00", b"\x93NUMPY\x09\x00", 1)),  # AttributeError: no reader for it
}


@pytest.fixture
def dump_dir(tmp_path: Path) -> Path:
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", np.where(X > 0, X, np.float32(0.2) * X).astype(np.float32))
    return tmp_path


def _with_examples(test: Any) -> Any:
    for name, (flag, blob) in LOADER_CRASHES.items():
        suffix = ".npz" if blob.startswith(b"PK") else ".npy"
        test = example(data=blob, flag=flag, suffix=suffix, bits=False).via(name)(test)
    return test


@FUZZ
@_with_examples
@given(data=st.one_of(mutated(_dump_seeds()), npy_with_edited_header(), npz_with_odd_member()),
       flag=st.sampled_from(["--x", "--y"]), suffix=st.sampled_from([".npy", ".npz"]),
       bits=st.booleans())
def test_compare_survives_malformed_arrays(dump_dir: Path, capsys: pytest.CaptureFixture[str], data: bytes,
                                           flag: str, suffix: str, bits: bool) -> None:
    (dump_dir / f"bad{suffix}").write_bytes(data)
    paths = {"--x": "x.npy", "--y": "y.npy", flag: f"bad{suffix}"}
    argv = ["compare", "--x", paths["--x"], "--y", paths["--y"], "--alpha", "0.2"]
    _assert_handled(run_cli(argv + (["--dtype", "float16"] if bits else []), capsys, cwd=dump_dir))


# ----------------------------------------------------------------------------- TOML configs

_CONFIG_SEEDS = [
    b'max_ulp = 1\nstrict_zeros = false\n[tolerances]\nfloat16 = { rtol = 1e-3, atol = 1e-5 }\n'
    b'[policy]\ntensorflow = ["alpha-precision", "subnormal-flush"]\ntorch = []\n',
    b'[tool.conformance]\nmax_ulp = 2\n[tool.conformance.policy]\ndump = ["rounding"]\n',
    b'[tool.conformance.tolerances.float32]\nrtol = 1.3e-6\natol = 1e-5\n',
]
_WORDS = ["tolerances", "max_ulp", "strict_zeros", "policy", "tool", "conformance", "float16", "bfloat16",
          "float32", "float64", "rtol", "atol", "torch", "tensorflow", "golden", "cann", "dump", "rounding",
          "alpha-precision", "signed-zero", "int8", "", "x y"]
_SCALARS = st.one_of(st.integers(-2 ** 63, 2 ** 63 - 1), st.floats(), st.booleans(),
                     st.sampled_from(_WORDS), st.text(max_size=8))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(_WORDS), inner, max_size=3)), max_leaves=8)


def _toml_value(value: Any) -> str:
    """An inline TOML value (TOML has nan and inf; JSON string escapes are TOML basic-string escapes)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(map(_toml_value, value)) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"


@st.composite
def toml_documents(draw: st.DrawFn) -> bytes:
    """Well-formed TOML whose keys are the gate's (or near them) and whose values have any shape."""
    doc = draw(st.dictionaries(st.sampled_from(_WORDS[:6]), _VALUES, min_size=1, max_size=4))
    return "".join(f"{json.dumps(k)} = {_toml_value(v)}\n" for k, v in doc.items()).encode()


_CONFIGS = st.one_of(mutated(_CONFIG_SEEDS), toml_documents())


@FUZZ
@given(data=_CONFIGS)
def test_compare_survives_malformed_configs(dump_dir: Path, capsys: pytest.CaptureFixture[str], data: bytes) -> None:
    (dump_dir / "gate.toml").write_bytes(data)
    argv = ["compare", "--x", "x.npy", "--y", "y.npy", "--alpha", "0.2", "--config", "gate.toml"]
    _assert_handled(run_cli(argv, capsys, cwd=dump_dir))


@FUZZ
@given(data=_CONFIGS, as_pyproject=st.booleans())
def test_run_survives_malformed_configs(tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes,
                                        as_pyproject: bool) -> None:
    """``run`` reads the config (or ./pyproject.toml) first; the selection runs no rows, so no suite runs."""
    name = "pyproject.toml" if as_pyproject else "gate.toml"
    (tmp_path / name).write_bytes(data)
    argv = ["run", "--backend", "cann", "--dtype", "fp64", "--results-dir", "res"]
    result = run_cli(argv + ([] if as_pyproject else ["--config", name]), capsys, cwd=tmp_path)
    _assert_handled(result)
    assert result.code == 2  # a bad config, or else the empty selection


# ----------------------------------------------------------------------------- reproducers

def _saved_reproducer(tmp: Path, direction: str) -> bytes:
    x = X.astype(np.float16)
    case = corpus.Case(x, 0.2, direction, dy=x[::-1].copy() if direction == "backward" else None)  # type: ignore[arg-type]
    return corpus.save(corpus.Reproducer(case, "golden", category="rounding", label="fuzz"),
                       tmp / f"seed-{direction}.npz").read_bytes()


_FIELD_VALUES = st.one_of(
    st.sampled_from(["forward", "backward", "sideways", "float16", "bfloat16", "float32", "float64", "int8",
                     "golden", "torch", "cann", "mxnet", "ascend910b1", "", "[/]", "[bold",
                     corpus.FORMAT]).map(np.array),
    st.sampled_from([np.array(0.2), np.array(np.nan), np.array([0.2, 0.3]), np.array(1e308),
                     np.arange(3, dtype=np.uint16), np.arange(3, dtype=np.uint32), np.zeros((2, 2), np.uint64),
                     np.zeros(0, np.uint16), np.array(["a", "b"]), np.array(b"bytes"), np.array(True),
                     np.arange(12, dtype=">u2"), np.ones(12, np.float16)]),
)


@st.composite
def edited_reproducers(draw: st.DrawFn, seed: dict[str, np.ndarray]) -> bytes:
    """A reproducer whose fields were replaced or dropped, its digest recomputed (or not)."""
    arrays = dict(seed)
    keys = st.sampled_from([*corpus._STRINGS, "alpha", "x_bits", "dy_bits", "digest", "extra"])
    for key in draw(st.lists(keys, min_size=1, max_size=3, unique=True)):
        if draw(st.booleans()):
            arrays.pop(key, None)
        else:
            arrays[key] = draw(_FIELD_VALUES)
    if draw(st.booleans()):
        arrays["digest"] = np.array(corpus.digest(arrays))
    return _npz(**arrays)


def _seed_arrays(blob: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(blob), allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


@pytest.fixture(scope="module")
def reproducer_seeds(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    tmp = tmp_path_factory.mktemp("seeds")
    return [_saved_reproducer(tmp, "forward"), _saved_reproducer(tmp, "backward")]


@FUZZ
@given(data=st.data())
def test_replay_survives_malformed_reproducers(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               reproducer_seeds: list[bytes], data: st.DataObject) -> None:
    blob = data.draw(st.one_of(mutated(reproducer_seeds),
                               st.sampled_from(reproducer_seeds).map(_seed_arrays).flatmap(edited_reproducers)))
    (tmp_path / "r.npz").write_bytes(blob)
    _assert_handled(run_cli(["replay", "r.npz"], capsys, cwd=tmp_path))


def test_the_fuzz_seeds_are_valid(dump_dir: Path, reproducer_seeds: list[bytes],
                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Unmutated, every seed runs: the fuzz starts from files the commands accept."""
    (dump_dir / "gate.toml").write_bytes(_CONFIG_SEEDS[0])
    assert run_cli(["compare", "--x", "x.npy", "--y", "y.npy", "--alpha", "0.2", "--config", "gate.toml"],
                   capsys, cwd=dump_dir).code == 0
    for i, blob in enumerate(reproducer_seeds):
        (dump_dir / f"r{i}.npz").write_bytes(blob)
        assert run_cli(["replay", f"r{i}.npz"], capsys, cwd=dump_dir).code == 0
    assert zipfile.is_zipfile(io.BytesIO(_dump_seeds()[2]))

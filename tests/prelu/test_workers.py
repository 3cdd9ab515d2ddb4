"""PReLU and RReLU through the worker protocol: the messages (a LeakyReLU call and a LeakyReLU
backend's hello are what they were), a golden PReLU backend served by a worker, and Paddle's and
MindSpore's rows, their named behaviours and their dweight reductions (skipped when the framework's
environment is not set up: ``make conformance-all``)."""
from __future__ import annotations

import shlex
import sys

import numpy as np
import pytest

from conformance import prelu_suite, suite
from conformance.backends import WorkerSpec, default_worker, load
from conformance.config import default_config
from conformance.dtypes import info
from conformance.errors import BackendUnavailable
from conformance.frameworks.golden_backend import GoldenBackend
from conformance.reference import prelu as golden_prelu
from conformance.reference.reductions import Reduction, reduce_dweight
from conformance.runs import prelu_rows
from conformance.triage.prelu import same_bits
from conformance.worker import client, protocol, server
from conformance.worker.hello import check_hello
from tests.helpers import (
    assert_same_bits,
    fresh_workers,  # noqa: F401  (autouse: each test starts with no worker)
)
from tests.prelu.worker_backends import GoldenPrelu, command

TIMEOUT = 60.0  # seconds per call of a fake worker (milliseconds of work; a loaded machine is slow to start)
SEQUENTIAL = Reduction("float32", "sequential", "input")  # shares rounded to the input dtype, a float32 sum


def _inputs(shape: tuple[int, ...], dtype: str, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=shape).astype(dtype), rng.normal(size=shape).astype(dtype)


# ----------------------------------------------------------------------------- messages

def _sent(message: protocol.Message) -> protocol.Message:
    """``message`` as the other side reads it."""
    return protocol.decode(protocol.encode(message))


def test_a_leaky_relu_call_is_the_message_it_always_was() -> None:
    x, dy = _inputs((2, 3), "float32")
    forward = protocol.call_message("forward", x, alpha=0.2)
    backward = protocol.call_message("backward", x, alpha=0.2, dy=dy, out_dtype="float32")
    assert forward.header == {"type": "call", "direction": "forward", "alpha": 0.2, "out_dtype": None}
    assert set(forward.arrays) == {"x"} and set(backward.arrays) == {"x", "dy"}
    assert "op" not in backward.header


def test_a_prelu_call_names_its_op_and_carries_its_weight() -> None:
    x, dy = _inputs((2, 3), "float16")
    weight = np.array([0.25, -0.5, 0.2], np.float16)
    message = protocol.decode(protocol.encode(protocol.call_message("backward", x, alpha=0.0, dy=dy, op="prelu",
                                                                    weight=weight)))
    assert message.header["op"] == "prelu"
    assert_same_bits(message.arrays["weight"], weight)


def test_a_leaky_relu_backends_hello_has_no_op_facts() -> None:
    assert not {"ops", "prelu_supports", "prelu_allowed"} & set(server.hello(GoldenBackend()).header)


def test_the_hello_of_a_prelu_backend_says_its_ops_rows_and_allowed_categories() -> None:
    hello = check_hello(_sent(server.hello(GoldenPrelu())), command="test")
    assert hello["ops"] == ["leaky_relu", "prelu", "rrelu"]
    assert hello["prelu_allowed"] == ["signed-zero"]
    assert sorted(map(tuple, hello["prelu_supports"])) == [(d, r) for d in ("float16", "float32")
                                                           for r in ("backward", "forward")]


@pytest.mark.parametrize("bad", [{"ops": ["prelu", "gelu"]}, {"ops": [["prelu"]]},
                                 {"prelu_supports": [["float17", "forward"]]},
                                 {"prelu_allowed": ["everything"]}, {"prelu_allowed": "formulation"}])
def test_a_hello_with_malformed_op_facts_is_refused(bad: dict) -> None:
    message = _sent(protocol.Message({**server.hello(GoldenPrelu()).header, **bad}))
    with pytest.raises(BackendUnavailable, match="malformed hello"):
        check_hello(message, command="test")


def test_the_worker_answers_a_prelu_backward_with_dx_and_dweight() -> None:
    x, dy = _inputs((2, 3, 4), "float32")
    weight = np.array([0.25, -0.5, 0.2], np.float32)
    reply = server.answer(GoldenPrelu(), protocol.call_message("backward", x, alpha=0.0, dy=dy, op="prelu",
                                                               weight=weight))
    result = protocol.result_from(protocol.decode(protocol.encode(reply)))
    assert_same_bits(result.value, golden_prelu.backward(dy, x, weight), what="dx")
    assert_same_bits(result.dweight, golden_prelu.dweight(dy, x, weight), what="dweight")


def test_an_op_the_backend_does_not_compute_is_unsupported() -> None:
    x, _ = _inputs((2, 3), "float32")
    reply = server.answer(GoldenBackend(), protocol.call_message("forward", x, alpha=0.0, op="prelu",
                                                                 weight=np.ones(3, np.float32)))
    assert reply.type == "error" and reply.header["kind"] == "unsupported" and "prelu" in reply.header["message"]


# ----------------------------------------------------------------------------- a worker serving PReLU

def _selection(name: str) -> suite.Selection:
    return suite.Selection(backends=(name,), dtypes=("float16",), alphas=(0.25, 11 / 48),
                           workers=((name, WorkerSpec(command("GoldenPrelu"), TIMEOUT)),))


def test_a_worker_serving_prelu_gets_its_rows_each_served_by_it() -> None:
    specs = prelu_suite.for_selection(_selection("golden_prelu"))
    assert sorted((s.op, s.direction) for s in specs) == [(op, d) for op in ("prelu", "rrelu")
                                                          for d in ("backward", "forward")]
    assert all(s.worker == WorkerSpec(command("GoldenPrelu"), TIMEOUT) for s in specs)
    for spec in specs:
        row = prelu_suite.run_spec(spec, config=default_config())
        assert row.verdict == "pass", (str(spec), [(f.category, f.summary) for f in row.findings])
    backward = next(s for s in specs if (s.op, s.direction) == ("prelu", "backward"))
    assert any(p.endswith("dweight") for p in prelu_suite.run_spec(backward, config=default_config()).parts)


def test_a_worker_whose_hello_names_no_ops_serves_leaky_relu_rows_only() -> None:
    """A LeakyReLU backend's worker (and a worker of a version before PReLU, whose hello is the same)."""
    cmd = shlex.join(["env", "CONFORMANCE_COMPILED=0", sys.executable, "-m", "conformance", "worker",
                      "--backend", "golden"])
    selection = suite.Selection(backends=("golden",), dtypes=("float16",), alphas=(0.25,),
                                workers=(("golden", WorkerSpec(cmd, TIMEOUT)),))
    served = selection.backend("golden")
    assert served.ops == ("leaky_relu",) and served.prelu_allowed == frozenset()
    assert prelu_suite.for_selection(selection) == [] and suite.plan(selection)[0]


def test_worker_rows_run_in_the_process_holding_its_pipes() -> None:
    extra = prelu_rows(prelu_suite.for_selection(_selection("golden_prelu")), options=suite.Options())
    assert extra and all(t.here for t in suite.row_tasks([], extra))


def test_a_dweight_of_the_wrong_shape_is_a_refusal() -> None:
    served = client.connect(WorkerSpec(command("WrongDweight"), TIMEOUT))
    x, dy = _inputs((2, 3, 4), "float32")
    result = served.prelu("backward", x, np.array([0.25, -0.5, 0.2], np.float32), dy=dy)
    assert result.value is None and "dweight" in str(result.rejected)
    assert served.prelu("forward", x, np.array([0.25, -0.5, 0.2], np.float32)).rejected is None


# ----------------------------------------------------------------------------- Paddle and MindSpore

@pytest.fixture(scope="module")
def framework():
    """Each framework's default worker (started once here); skipped when its environment is missing."""
    made: dict = {}

    def get(name: str):
        if load(name).environment.missing() is not None:
            pytest.skip(f"{name} environment not set up (make conformance-all)")
        if name not in made:
            made[name] = client.connect(default_worker(name))
        return made[name]

    yield get
    client.close_all()


#: Each framework's PReLU/RReLU rows, and the categories each one shows (none: bit for bit the golden).
ROWS = {
    ("paddle", "prelu", "float32", "forward"): set(),
    ("paddle", "prelu", "float32", "backward"): set(),
    ("paddle", "rrelu", "float32", "forward"): {"alpha-precision"},
    ("paddle", "rrelu", "float32", "backward"): {"alpha-precision", "grad-at-zero", "nan-gradient"},
    ("mindspore", "prelu", "float16", "forward"): {"formulation"},
    ("mindspore", "prelu", "float16", "backward"): {"nan-gradient", "reduction-order"},
    ("mindspore", "prelu", "float32", "forward"): {"formulation", "subnormal-flush"},
    ("mindspore", "prelu", "float32", "backward"): {"nan-gradient", "subnormal-flush"},
}


@pytest.mark.parametrize("name", ["paddle", "mindspore"])
def test_the_framework_declares_the_rows_its_cpu_kernels_run(name: str, framework) -> None:
    served = framework(name)
    specs = prelu_suite.plan_rows({name: served}, directions=("forward", "backward"))
    assert sorted((s.op, s.dtype, s.direction) for s in specs) == sorted(
        (op, dtype, d) for (n, op, dtype, d) in ROWS if n == name)


@pytest.mark.parametrize("key", list(ROWS), ids=[" ".join(k) for k in ROWS])
def test_every_framework_row_passes_with_its_behaviours_named(key: tuple[str, str, str, str], framework) -> None:
    name, op, dtype, direction = key
    served = framework(name)
    spec = prelu_suite.PreluRowSpec.of(served, name, op, dtype, direction)
    row = prelu_suite.run_row(spec, served, config=default_config())
    assert row.verdict != "fail", [(f.category, f.summary) for f in row.findings]
    assert {f.category for f in row.findings} == ROWS[key], [(f.category, f.summary) for f in row.findings]


def test_mindspore_refuses_bfloat16_prelu_and_goes_on(framework) -> None:
    served = framework("mindspore")
    x, _ = _inputs((2, 4, 3), "float32")
    bf16 = info("bfloat16").dtype
    refused = served.prelu("forward", x.astype(bf16), np.full(4, 0.25, bf16))
    assert refused.value is None and "BFloat16" in str(refused.rejected), refused.rejected
    assert served.prelu("forward", x, np.full(4, 0.25, np.float32)).rejected is None


@pytest.mark.parametrize(("name", "dtype", "shape"), [
    ("paddle", "float32", (8, 3, 64, 64)),  # its one thread: any size
    ("mindspore", "float16", (4, 3, 12, 12)),
    ("mindspore", "float32", (4, 3, 12, 12)),  # one kernel thread up to this size; beyond, its threads race
])
def test_dweight_is_a_sequential_float32_sum_of_shares_rounded_to_the_input_dtype(name: str, dtype: str,
                                                                                shape: tuple, framework) -> None:
    """Paddle's ``alpha_grad[c] += x*dy`` in the input's dtype, MindSpore's ``static_cast<float>(x*dy)`` added
    to a float32 accumulator, both in memory order: that reduction gives their bits, where the exact sum
    (the golden) and a pairwise sum do not (a sum the frameworks did some other way fails here)."""
    served = framework(name)
    x, dy = _inputs(shape, dtype, seed=3)
    #: what the bits are not: the exact sum, and a float32 sum of exact shares (fp16) or pairwise (fp32)
    other = Reduction("float32", "sequential", None) if dtype == "float16" else Reduction("float32", "pairwise")
    missed = {"exact": False, str(other): False}
    for weight in (np.array([0.25, -0.5, 0.2], dtype), np.array([0.25], dtype)):
        got = served.prelu("backward", x, weight, dy=dy).dweight
        assert_same_bits(got, reduce_dweight(dy, x, weight, SEQUENTIAL), what=f"{name} {dtype} {weight.size}")
        missed["exact"] |= not same_bits(golden_prelu.dweight(dy, x, weight), got).all()
        missed[str(other)] |= not same_bits(reduce_dweight(dy, x, weight, other), got).all()
    assert all(missed.values()), missed


# ----------------------------------------------------------------------------- their behaviours, built by hand

def _with_specials(shape: tuple[int, ...], dtype: str, *, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Random x and dy with a tenth of x NaN, ±0 each."""
    x, dy = _inputs(shape, dtype, seed=seed)
    at = np.random.default_rng(seed + 1).integers(0, 10, x.shape)
    x = np.where(at == 0, np.nan, np.where(at == 1, 0.0, np.where(at == 2, -0.0, x))).astype(dtype)
    return x, dy


def test_a_gradient_taking_the_product_only_where_x_is_at_most_zero_is_nan_gradient() -> None:
    """MindSpore's PReLUGrad, ``dx = x <= 0 ? w*dy : dy``, computed in numpy: dy at x = NaN."""
    from conformance.triage.prelu import Operands, triage_elementwise

    x, dy = _with_specials((4, 3, 5), "float16", seed=5)
    weight = np.array([0.25, -0.5, 0.2], np.float16)
    w = golden_prelu.weight_per_element(weight, x.shape)
    with np.errstate(invalid="ignore"):
        dx = np.where(x <= 0, (w.astype(np.float32) * dy.astype(np.float32)).astype(np.float16), dy)
    expected = golden_prelu.backward(dy, x, weight)
    claims = triage_elementwise(Operands(x, dy, weight), expected, dx, forward=False)
    assert [c.category for c in claims] == ["nan-gradient"]
    assert claims[0].mask.sum() == np.count_nonzero(np.isnan(x) & ~same_bits(expected, dx))


def test_a_rounded_slope_beside_a_select_at_zero_names_both() -> None:
    """Paddle's RReLU in eval mode, ``dx = dy * (x < 0 ? float32(11/48) : 1)``, computed in numpy: the
    slope held in float32 (alpha-precision) where x < 0, dy at ±0 (grad-at-zero) and at NaN (nan-gradient),
    each element named once and none unexplained."""
    from conformance.ops import RRELU_EVAL_SLOPE
    from conformance.triage.prelu import Operands, triage_elementwise

    x, dy = _with_specials((4, 3, 5), "float32", seed=7)
    with np.errstate(invalid="ignore"):
        dx = dy * np.where(x < 0, np.float32(RRELU_EVAL_SLOPE), np.float32(1))
    slope = np.array([RRELU_EVAL_SLOPE])
    expected = golden_prelu.backward(dy, x, slope)
    claims = triage_elementwise(Operands(x, dy, slope), expected, dx, forward=False)
    named = {c.category: int(c.mask.sum()) for c in claims}
    assert set(named) == {"alpha-precision", "grad-at-zero", "nan-gradient"}, named
    assert named["grad-at-zero"] == np.count_nonzero(x == 0) and named["nan-gradient"] == np.count_nonzero(np.isnan(x))
    assert sum(named.values()) == np.count_nonzero(~same_bits(expected, dx))


def test_paddle_takes_a_weight_per_element_in_its_element_mode(framework) -> None:
    """A weight of the input's shape without its batch axis: Paddle's ``element`` mode, golden bits forward
    and dx, and dweight summed over the batch as its ``alpha_grad[i % (C*H*W)] +=`` does."""
    served = framework("paddle")
    x, dy = _with_specials((3, 2, 4, 5), "float32", seed=11)
    weight = np.random.default_rng(12).uniform(-0.5, 0.6, (2, 4, 5)).astype(np.float32)
    assert_same_bits(served.prelu("forward", x, weight).value, golden_prelu.forward(x, weight), what="y")
    result = served.prelu("backward", x, weight, dy=dy)
    assert_same_bits(result.value, golden_prelu.backward(dy, x, weight), what="dx")
    assert_same_bits(result.dweight, reduce_dweight(dy, x, weight, SEQUENTIAL), what="dweight")

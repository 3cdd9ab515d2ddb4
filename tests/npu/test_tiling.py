"""The tiling plan (hypothesis properties, the article's example) and `conformance tiling`."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.dtypes import info
from conformance.npu_impl.chips import PROFILES
from conformance.npu_impl.kernel import KernelSpec, buffer_spec, plan_for
from conformance.npu_impl.tiling import CACHE_LINE_BYTE_LENGTH, REPEAT_BYTES, TilingPlan
from conformance.npu_impl.variants import VARIANTS
from tests.helpers import assert_usage_error, cli_subprocess, run_cli

PAIRS = [("float16", "float16"), ("bfloat16", "bfloat16"), ("float32", "float32"), ("float32", "float16")]


def _spec(src: str, out: str, profile: str = "ascend910b1", variant: str = "reference",
          direction: str = "forward") -> KernelSpec:
    return KernelSpec(direction, info(src), info(out), 0.01, VARIANTS[variant], PROFILES[profile])


def _covered(plan: TilingPlan) -> np.ndarray:
    hits = np.zeros(plan.numel, dtype=np.int64)
    for core in plan.cores:
        for tile in core.tiles:
            hits[tile.start:tile.start + tile.length] += 1
    return hits


plans = st.builds(
    lambda numel, pair, profile, cores, direction: (numel, _spec(*pair, profile, direction=direction), cores),
    numel=st.one_of(st.integers(0, 64), st.integers(0, 300_000)),
    pair=st.sampled_from(PAIRS), profile=st.sampled_from(["ascend910b1", "ascend950"]),
    cores=st.one_of(st.none(), st.integers(1, 40)), direction=st.sampled_from(["forward", "backward"]))


@settings(max_examples=150, deadline=None)
@given(plans)
def test_every_element_is_covered_exactly_once(case: tuple[int, KernelSpec, int | None]) -> None:
    numel, spec, cores = case
    plan = plan_for(numel, spec, cores=cores)
    assert (_covered(plan) == 1).all()
    starts = [c.start for c in plan.cores]
    assert starts == sorted(starts) and all(c.length == sum(t.length for t in c.tiles) for c in plan.cores)


@settings(max_examples=150, deadline=None)
@given(plans)
def test_the_tile_is_the_largest_aligned_one_the_ub_holds(case: tuple[int, KernelSpec, int | None]) -> None:
    numel, spec, cores = case
    plan = plan_for(numel, spec, cores=cores)
    ub, params = spec.profile.ub_usable_bytes, plan.params
    assert sum(b.bytes_for(plan.tile_elements) for b in buffer_spec(spec)) <= ub
    align = REPEAT_BYTES * 8 // params.min_dtype_bits
    assert plan.tile_elements % align == 0
    assert (plan.tile_elements + align) * params.buffer_divisor > ub * 8
    assert all(t.length <= plan.tile_elements for c in plan.cores for t in c.tiles)


@settings(max_examples=150, deadline=None)
@given(plans)
def test_blocks_are_equal_512_multiples_but_the_last(case: tuple[int, KernelSpec, int | None]) -> None:
    numel, spec, cores = case
    plan = plan_for(numel, spec, cores=cores)
    lengths = [c.length for c in plan.cores]
    assert all(n == lengths[0] and n % CACHE_LINE_BYTE_LENGTH == 0 for n in lengths[:-1])
    assert not lengths or 0 < lengths[-1] <= lengths[0]
    assert len(plan.cores) <= (cores or spec.profile.vector_cores)


@settings(max_examples=100, deadline=None)
@given(plans)
def test_only_each_cores_last_tile_is_shorter(case: tuple[int, KernelSpec, int | None]) -> None:
    numel, spec, cores = case
    plan = plan_for(numel, spec, cores=cores)
    for core in plan.cores:
        assert all(t.length == plan.tile_elements for t in core.tiles[:-1])
    tails = [s for s in plan.tile_plan().spans if s.is_tail]
    expected = [c for c in plan.cores if c.tiles and c.tiles[-1].length < plan.tile_elements]
    assert [(s.core, s.start) for s in tails] == [(c.core, c.tiles[-1].start) for c in expected]


def test_an_empty_tensor_has_no_blocks() -> None:
    plan = plan_for(0, _spec("float32", "float32"))
    assert plan.cores == () and plan.tiles == 0


@pytest.mark.parametrize("numel", [1, 5, 31, 1024])
def test_up_to_4_kb_of_data_takes_one_core(numel: int) -> None:
    plan = plan_for(numel, _spec("float32", "float32", "ascend950"))
    assert len(plan.cores) == 1 and plan.cores[0].length == numel and plan.tiles == 1


def test_4097_bf16_on_ascend950_is_three_blocks() -> None:
    plan = plan_for(4097, _spec("bfloat16", "bfloat16", "ascend950"))
    assert [c.length for c in plan.cores] == [1536, 1536, 1025]
    assert plan.former_cores == 2 and plan.ub_budget_bytes == 253_952


def test_the_articles_worked_example() -> None:
    spec = _spec("float32", "float32")
    plan = plan_for(1_000_000, spec, cores=1, usable_fraction=0.6)
    expected_tile = int(192 * 1024 * 0.6 / 4) // 8 * 8  # floor(usable / sizeof), aligned to 32 bytes
    assert plan.tile_elements == expected_tile and abs(plan.tile_elements - 29_490) < 8
    assert plan.tiles == -(-1_000_000 // expected_tile) == 34


def test_cast_results_shrink_the_tile() -> None:
    """ascend950 casts fp16 up to fp32 (two more buffers); the 910B TBE kernel computes fp16 natively."""
    native = plan_for(1 << 20, _spec("float16", "float16", "ascend950", variant="fp16-slope"))
    upcast = plan_for(1 << 20, _spec("float16", "float16", "ascend950"))
    assert native.tile_elements > upcast.tile_elements
    assert plan_for(1 << 20, _spec("float16", "float16")).params.buffer_num == native.params.buffer_num == 4


def test_cli_json_has_the_documented_keys(tmp_path: Path) -> None:
    """Smoke test in a real process: `python -m conformance tiling --json`."""
    run = cli_subprocess("tiling", "--numel", "100000", "--dtype", "float16", "--cores", "4", "--json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert {"ub_budget_bytes", "tile_elements", "tiles", "cores", "roofline", "sources"} <= data.keys()
    assert data["tiles"] == sum(len(c["tiles"]) for c in data["cores"])
    assert set(data["cores"][0]) == {"core", "start", "length", "tiles"}
    assert set(data["cores"][0]["tiles"][0]) == {"start", "length"}
    assert sum(c["length"] for c in data["cores"]) == 100000
    assert all(data["sources"].values()) and "elewise_tiling.cpp" in data["sources"]["tiling"]
    roof = data["roofline"]
    assert roof["single_buffered_us"] >= roof["double_buffered_us"] > 0 and roof["gm_bytes_per_s_source"]


def test_cli_article_example(capsys: pytest.CaptureFixture[str]) -> None:
    run = run_cli(["tiling", "--numel", "1000000", "--dtype", "float32", "--cores", "1", "--usable-fraction", "0.6",
                   "--json"], capsys)
    data = json.loads(run.out)
    assert run.code == 0 and data["tiles"] == 34 and data["model"] == "article"


def test_cli_rich_output_names_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    run = run_cli(["tiling", "--numel", "5000", "--dtype", "bfloat16", "--profile", "ascend910b3"], capsys)
    assert run.code == 0 and "ascend910b3" in run.out and "roofline" in run.out


@pytest.mark.parametrize("args, says", [
    (("--numel", "-1", "--dtype", "float32"), "--numel"),
    (("--numel", "10", "--dtype", "int8"), "int8"),
    (("--numel", "10", "--dtype", "bfloat16", "--profile", "ascend910a"), "ascend910a"),
    (("--numel", "10", "--dtype", "float32", "--profile", "nope"), "nope"),
    (("--numel", "10", "--dtype", "float32", "--cores", "0"), "--cores"),
    (("--numel", "10", "--dtype", "float32", "--usable-fraction", "1.5"), "--usable-fraction"),
    (("--numel", "ten", "--dtype", "float32"), "--numel"),
], ids=lambda a: " ".join(a) if isinstance(a, tuple) else a)
def test_cli_bad_arguments_exit_2_with_one_line(args: tuple[str, ...], says: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert_usage_error(run_cli(["tiling", *args], capsys), mentions=says)


def _json(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    run = run_cli(["tiling", *args, "--json"], capsys)
    assert run.code == 0, run.err
    return json.loads(run.out)


def test_cli_plans_the_kernel_and_names_the_separate_output_cast(capsys: pytest.CaptureFixture[str]) -> None:
    cast = _json(["--numel", "70000", "--dtype", "float32", "--out-dtype", "float16"], capsys)
    same = _json(["--numel", "70000", "--dtype", "float32"], capsys)
    assert cast["cores"] == same["cores"] and cast["tile_elements"] == same["tile_elements"]
    assert "l0op::Cast" in cast["sources"]["output_cast"] and "output_cast" not in same["sources"]


@pytest.mark.parametrize("profile,says", [("ascend910b1", "leaky_relu.py"), ("ascend950", "leaky_relu_dag.h")])
def test_cli_names_the_kernel_and_marks_tbe_tiling_assumed(profile: str, says: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    sources = _json(["--numel", "100", "--dtype", "float16", "--profile", profile], capsys)["sources"]
    assert says in sources["kernel"]
    assert sources["tiling"].startswith("assumed") is (profile != "ascend950")


def test_cli_says_aclnn_does_not_support_310p(capsys: pytest.CaptureFixture[str]) -> None:
    sources = _json(["--numel", "100", "--dtype", "float16", "--profile", "ascend310p3"], capsys)["sources"]
    assert "does not support" in sources["aclnn"]

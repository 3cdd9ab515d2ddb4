"""`conformance tiling --profile ascend950` equals opbase's elementwise tiling, recomputed here.

The plan below is written from the source, not from the emulator's code:
- hicann/opbase ``src/op_common/atvoss/elewise/elewise_tiling.cpp`` (``ElewiseTiling``,
  ``GetMaxElemNum``: MIN_TILING_BITS_SIZE_PER_CORE 32768, CACHE_LINE_BYTE_LENGTH 512,
  REPEAT_BYTES 256);
- hicann/opbase ``pkg_inc/op_common/atvoss/elewise/elewise_tiling.h`` (``DoTiling``:
  bufferDivisor = BufferNum * maxDtypeBits, no extra size or buffers for LeakyRelu);
- hicann/ops-nn ``activation/leaky_relu/op_kernel/arch35/leaky_relu_dag.h`` (fp32: CopyIn, the
  register-only LeakyRelu, CopyOut: 4 buffers with ping-pong; fp16/bf16 add two fp32 casts: 6;
  maxDtypeBits 32 in both);
- the Ascend950 platform fixtures of ops-nn's tiling tests (``"UB_SIZE": 253952``, 64 cores).
"""
from __future__ import annotations

import json
import random

import pytest

from tests.helpers import run_cli

UB_SIZE = 253_952
CORES = 64
MIN_BITS = {"float32": 32, "float16": 16, "bfloat16": 16}
BUFFER_NUM = {"float32": 4, "float16": 6, "bfloat16": 6}
MAX_BITS = 32


def _ceil(a: int, b: int) -> int:
    return (a + b - 1) // b


def expected_plan(n: int, dtype: str) -> tuple[int, list[tuple[int, int, list[tuple[int, int]]]]]:
    """(ubFormer, [(block start, block length, [(tile start, tile length)])]) by the formula."""
    min_bits = MIN_BITS[dtype]
    core_num = min(_ceil(n * min_bits, 32768), CORES)
    block_former = _ceil(_ceil(n, core_num), 512) * 512
    block_num = _ceil(n, block_former)
    align = 256 * 8 // min_bits
    ub_former = UB_SIZE * 8 // (BUFFER_NUM[dtype] * MAX_BITS) // align * align
    blocks = []
    for b in range(block_num):
        start = b * block_former
        length = block_former if b < block_num - 1 else n - (block_num - 1) * block_former
        loops = _ceil(length, ub_former)
        tiles = [(start + i * ub_former, ub_former if i < loops - 1 else length - (loops - 1) * ub_former)
                 for i in range(loops)]
        blocks.append((start, length, tiles))
    return ub_former, blocks


LISTED = [1, 31, 511, 512, 513, 4097, 1_000_000, 2 ** 20]
RANDOM = random.Random(950).sample(range(1, 5_000_001), 12)


@pytest.mark.parametrize("dtype", list(MIN_BITS))
@pytest.mark.parametrize("numel", LISTED + RANDOM)
def test_ascend950_plan_equals_the_opbase_formula(numel: int, dtype: str, capsys: pytest.CaptureFixture[str]) -> None:
    run = run_cli(["tiling", "--profile", "ascend950", "--numel", str(numel), "--dtype", dtype, "--json"], capsys)
    assert run.code == 0, run.err
    data = json.loads(run.out)
    ub_former, blocks = expected_plan(numel, dtype)
    assert data["ub_budget_bytes"] == UB_SIZE and data["tile_elements"] == ub_former
    got = [(c["start"], c["length"], [(t["start"], t["length"]) for t in c["tiles"]]) for c in data["cores"]]
    assert got == blocks
    assert data["tiles"] == sum(len(tiles) for _, _, tiles in blocks)


def test_the_issue_examples_by_hand() -> None:
    """Worked by hand from the formula: 31 fp32 is one block; 4,097 bf16 is 1,536 + 1,536 + 1,025."""
    assert [length for _, length, _ in expected_plan(31, "float32")[1]] == [31]
    assert [length for _, length, _ in expected_plan(4097, "bfloat16")[1]] == [1536, 1536, 1025]
    assert expected_plan(1, "float32")[0] == 15_872 and expected_plan(1, "float16")[0] == 10_496

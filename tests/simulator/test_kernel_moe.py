"""The kernel predictor's mixture-of-experts layer: the MoE table's own entry at a grid point, a step
that moves monotonically between grid points and holds the measured layer, and a one-line refusal
(exit code 2) for an expert shape the tables never measured.

These tests read aiconfigurator-core's tables (the ``test`` extra): they skip, saying so, where it
is missing, and fail instead with TOKENPACE_REQUIRE_KERNELS=1 (set by .ci/run)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tokenpace.errors import UsageError
from tokenpace.simulator import SimConfig, SimRequest, get_gpu, get_model, get_precision, simulate
from tokenpace.simulator.kernels.moe import moe_table
from tokenpace.simulator.kernels.predictor import KernelPredictor
from tokenpace.simulator.step import StepBatch

QWEN = dict(hidden=2048, inter=768, topk=8, experts=128)  # Qwen3-30B-A3B's experts


@pytest.fixture(scope="module")
def b200_trtllm(kernel_tables):
    return kernel_tables.load_tables("b200", "trtllm")


def _raw_rows(tables, version: str):
    """Qwen3-30B-A3B's NVFP4 rows at TP1, read straight from the Parquet file with pandas."""
    import pyarrow.parquet as pq

    rows = pq.read_table(tables.dir / f"moe/trtllm/{version}/moe_perf.parquet").to_pandas()
    return rows[(rows.hidden_size == 2048) & (rows.inter_size == 768) & (rows.topk == 8) & (rows.num_experts == 128)
                & (rows.moe_tp_size == 1) & (rows.moe_ep_size == 1) & (rows.moe_dtype == "nvfp4")]


def test_a_moe_lookup_is_the_measured_entry_at_each_grid_point(b200_trtllm):
    got = moe_table(b200_trtllm, "nvfp4", **QWEN, tp=1)
    # TensorRT-LLM's default CUTLASS kernels (never the min-latency ones), routed as aiconfigurator
    # prices these models: a power law of exponent 1.2.
    assert (got.kernel, got.distribution, got.dtype) == ("moe_torch_flow_cutlass", "power_law_1.2", "nvfp4")
    rows = _raw_rows(b200_trtllm, got.version)
    mine = rows[(rows.kernel_source == "moe_torch_flow_cutlass") & (rows.distribution == "power_law_1.2")]
    assert len(mine) == len(got.tokens) >= 20
    for tokens, latency in zip(mine.num_tokens, mine.latency):
        i = int(np.searchsorted(got.tokens, tokens))
        assert got.tokens[i] == tokens and got.ms[i] == latency
    faster = rows[(rows.kernel_source == "moe_torch_flow_min_latency") & (rows.distribution == "power_law_1.2")]
    assert len(faster) and (faster.latency.to_numpy() < mine.latency.to_numpy()).any()  # it exists, and is not used


def _predictor(tables, quant="nvfp4") -> KernelPredictor:
    return KernelPredictor(get_model("qwen3-30b-a3b"), get_gpu("b200"), get_precision(quant), get_precision("fp8"),
                           engine="trtllm", tables=tables)


def test_a_moe_step_holds_the_measured_layer_and_moves_monotonically_between_grid_points(b200_trtllm):
    pred = _predictor(b200_trtllm)
    table = pred.moe
    layers = get_model("qwen3-30b-a3b").num_layers
    # two neighbouring measured token counts over which the measured layer grows (the tables are
    # not monotonic everywhere: the kernel's tiles fill unevenly)
    i = next(i for i in range(8, len(table.tokens) - 1) if table.ms[i + 1] > table.ms[i])
    lo, hi = int(table.tokens[i]), int(table.tokens[i + 1])

    def decode(n: int) -> float:
        return pred.step_s(StepBatch(decode_context=(1000,) * n))

    # every step holds all layers' measured MoE time at its token count (and more: attention, GEMMs)
    for n, ms in ((lo, table.ms[i]), (hi, table.ms[i + 1])):
        assert decode(n) > layers * ms * 1e-3
    # Between two neighbouring points of the step's grid (the MoE table's token counts joined with
    # the GEMM tables' row counts) the price is linear in the tokens: it grows as the MoE layer does.
    grid = [m for m in pred._m if lo <= m <= hi]
    a, b = max(zip(grid, grid[1:]), key=lambda p: p[1] - p[0])
    steps = [decode(n) for n in range(int(a), int(b) + 1)]
    assert len(steps) >= 8 and all(y > x for x, y in zip(steps, steps[1:]))
    # and the MoE layer is where a mixture of experts differs from a dense model of its attention
    assert pred.describe()["tables"]["moe"]["kernel"] == "moe_torch_flow_cutlass"


def test_an_expert_shape_the_tables_never_measured_is_refused_not_guessed(b200_trtllm, tmp_path):
    with pytest.raises(UsageError, match="64 experts, top-6"):
        moe_table(b200_trtllm, "nvfp4", hidden=2048, inter=1408, topk=6, experts=64, tp=1)
    config = {"model_type": "qwen2_moe", "num_hidden_layers": 24, "hidden_size": 2048, "num_attention_heads": 16,
              "num_key_value_heads": 16, "intermediate_size": 5632, "moe_intermediate_size": 1408,
              "num_experts": 64, "num_experts_per_tok": 6, "vocab_size": 151936}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    proc = subprocess.run([sys.executable, "-m", "tokenpace", "sim", "--model", str(path), "--gpu", "b200",
                           "--engine", "trtllm", "--quant", "nvfp4", "--predictor", "kernels", "--requests", "4",
                           "--out", str(tmp_path / "r.json")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "no measured MoE layer of 64 experts" in err[0] and "--predictor roofline" in err[0]
    assert not (tmp_path / "r.json").exists()


def test_a_moe_model_simulates_end_to_end_with_measured_step_costs(b200_trtllm):
    reqs = [SimRequest(arrival_s=0.0, prompt_tokens=512, output_tokens=64) for _ in range(32)]
    res = simulate(SimConfig(model="qwen3-30b-a3b", gpu="b200", weights="nvfp4", engine="trtllm",
                             predictor="kernels"), reqs)
    assert all(r.status == "ok" for r in res.records) and len(res.records) == 32
    assert res.config["predictor"]["tables"]["moe"]["distribution"] == "power_law_1.2"


def test_fp8_weights_take_the_engines_faster_fp8_moe_kernel(kernel_tables):
    """vLLM's tables on H100 measured Qwen3-30B-A3B's FP8 MoE per tensor (its ModelOpt FlashInfer-CUTLASS
    path) and with block scales (its Triton kernel); the per-tensor rows run slower than the BF16 MoE.
    FP8 weights take the faster, so FP8 does not price a MoE model slower than BF16."""
    import pyarrow.parquet as pq

    tables = kernel_tables.load_tables("h100-sxm", "vllm")
    got = moe_table(tables, "fp8", **QWEN, tp=1)
    rows = pq.read_table(tables.dir / f"moe/vllm/{got.version}/moe_perf.parquet").to_pandas()
    rows = rows[(rows.hidden_size == 2048) & (rows.inter_size == 768) & (rows.topk == 8) & (rows.num_experts == 128)
                & (rows.moe_tp_size == 1) & (rows.moe_ep_size == 1) & (rows.distribution == got.distribution)]
    per_tensor, block = (rows[rows.moe_dtype == d].set_index("num_tokens").latency for d in ("fp8", "fp8_block"))
    shared = per_tensor.index.intersection(block.index)
    assert len(shared) >= 10 and (block[shared] < per_tensor[shared]).mean() > 0.5
    assert got.dtype == "fp8_block"
    mine = rows[(rows.moe_dtype == "fp8_block") & (rows.kernel_source == got.kernel)]
    assert sorted(mine.num_tokens) == got.tokens.tolist() and set(mine.latency) == set(got.ms)
    bf16 = moe_table(tables, "bf16", **QWEN, tp=1)
    parts = (get_model("qwen3-30b-a3b"), get_gpu("h100-sxm"))
    fp8 = KernelPredictor(*parts, get_precision("fp8"), get_precision("fp8"), engine="vllm", tables=tables)
    b16 = KernelPredictor(*parts, get_precision("bf16"), get_precision("bf16"), engine="vllm", tables=tables)
    assert bf16.dtype == "bfloat16"
    for n in (8, 64, 512):
        batch = StepBatch(decode_context=(1000,) * n)
        assert fp8.step_s(batch) < b16.step_s(batch)

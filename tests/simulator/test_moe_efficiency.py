"""A mixture of experts' layer at the catalog's measured MoE efficiency (``moe_efficiency``): by
expert size and rows per touched expert, on hand-computed steps of a tiny MoE model; derived from
aiconfigurator-core's MoE tables.

Tiny MoE: 1 layer, hidden 64, 2 heads and 1 KV head of 32, 4 experts of a SwiGLU MLP of 128, top-2,
vocabulary 256. One expert: 3·64·128 = 24,576 weights (49,152 B in bf16); the router 64·4 = 256.
A prompt of 100 tokens touches 4·(1 − (1/2)^100) = 4 experts (to 1e-30), 100·2/4 = 50 rows each;
its expert FLOPs are 100·2·2·24,576 = 9,830,400 and the router's 100·2·256 = 51,200: 9.8816 ms at
1 GFLOP/s, against 4·49,152 B = 0.197 ms of expert weights at 1 GB/s (compute-bound).
"""

from __future__ import annotations

import json

import pytest

from tokenpace.errors import UsageError
from tokenpace.simulator import RooflineParams, RooflinePredictor, StepBatch, get_precision
from tokenpace.simulator.catalog import GPU, ModelSpec
from tokenpace.simulator.catalog.efficiency import get_efficiency

TINY_MOE = ModelSpec(id="tiny-moe", name="tiny-moe", num_layers=1, hidden_size=64, num_heads=2, num_kv_heads=1,
                     head_dim=32, intermediate_size=128, vocab_size=256, num_experts=4, experts_per_token=2)
TINY = ModelSpec(id="tiny", name="tiny", num_layers=1, hidden_size=64, num_heads=2, num_kv_heads=1, head_dim=32,
                 intermediate_size=128, vocab_size=256)
SLOW = GPU(id="tiny-gpu", name="tiny", bf16_tflops=0.001, fp8_tflops=None, memory_gb=1, hbm_tb_s=0.001, link_gb_s=2)
FIGURES = {"gemm_flops": 0.5, "weight_bandwidth": 0.8, "attention_prefill_flops": 0.25,
           "attention_decode_bandwidth": 0.4, "elementwise_bandwidth": 0.5, "elementwise_latency_s": 0.0}
PROMPT = StepBatch(prefill=((100, 0),))
EXPERT_AND_ROUTER_S = 9_881_600 / 1e9  # the prompt's MoE FLOPs at 1 GFLOP/s


def _catalog(tmp_path, moe: dict | None, name: str = "eff.json") -> str:
    entry = {"gpu": ["tiny-gpu"], "compute": "*", **{k: {"value": v, "source": "test"} for k, v in FIGURES.items()}}
    if moe is not None:
        entry["moe_efficiency"] = moe
    path = tmp_path / name
    path.write_text(json.dumps({"efficiency": [entry]}))
    return str(path)


def _step_s(model: ModelSpec, catalog: str, batch: StepBatch = PROMPT) -> float:
    bf16 = get_precision("bf16")
    return RooflinePredictor(model, SLOW, bf16, bf16, 1, RooflineParams(step_overhead_s=0.0), catalog).step_s(batch)


def test_the_experts_run_at_the_moe_efficiency_instead_of_the_gemms(tmp_path):
    flat = {"value": 0.25, "source": "test", "by_size_rows": [[8192, 1, 0.25], [8192, 1000, 0.25]]}
    with_moe = _step_s(TINY_MOE, _catalog(tmp_path, flat, "moe.json"))
    without = _step_s(TINY_MOE, _catalog(tmp_path, None))
    # the MLP group: 9.8816 ms of FLOPs at 0.25 instead of the GEMMs' 0.5; nothing else moves
    assert with_moe - without == pytest.approx(EXPERT_AND_ROUTER_S / 0.25 - EXPERT_AND_ROUTER_S / 0.5, rel=1e-9)
    # a dense model never reads the figure
    assert _step_s(TINY, _catalog(tmp_path, flat, "moe.json")) == _step_s(TINY, _catalog(tmp_path, None))


def test_the_moe_efficiency_is_read_at_the_models_expert_size_and_rows(tmp_path):
    # 8,192 weights per expert (64 x 128) lies halfway between 4,096 and 16,384 in log size; the
    # prompt's 50 rows per expert, halfway between 1 and 99 rows.
    curve = {"value": 0.5, "source": "test",
             "by_size_rows": [[4096, 1, 0.1], [4096, 99, 0.3], [16384, 1, 0.5], [16384, 99, 0.7]]}
    eff = get_efficiency("tiny-gpu", "bf16", _catalog(tmp_path, curve))
    assert eff.moe_efficiency_at(8192, 50) == pytest.approx(0.4)
    assert eff.moe_efficiency_at(4096, 50) == pytest.approx(0.2)
    assert eff.moe_efficiency_at(1e9, 1e6) == pytest.approx(0.7)  # held past both ends
    assert _step_s(TINY_MOE, _catalog(tmp_path, curve, "c.json")) - _step_s(TINY_MOE, _catalog(tmp_path, None)) \
        == pytest.approx(EXPERT_AND_ROUTER_S / 0.4 - EXPERT_AND_ROUTER_S / 0.5, rel=1e-9)


@pytest.mark.parametrize("raw, why", [
    ({"value": 0.5, "by_size_rows": [[4096, 8, 0.2], [4096, 1, 0.4]]}, "ascending"),
    ({"value": 0.5, "by_size_rows": [[4096, 1, 1.5]]}, "out of range"),
    ({"value": 0.5, "by_size_rows": [[4096, 1]]}, r"\[\[expert weights"),
])
def test_a_bad_moe_curve_is_a_usage_error(tmp_path, raw, why):
    with pytest.raises(UsageError, match=why):
        get_efficiency("tiny-gpu", "bf16", _catalog(tmp_path, raw))
    entry = {"gpu": ["tiny-gpu"], "compute": "*", "gemm_flops": {"value": 0.5, "by_size_rows": [[1, 1, 0.5]]}}
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"efficiency": [entry]}))
    with pytest.raises(UsageError, match="only moe_efficiency"):
        get_efficiency("tiny-gpu", "bf16", str(path))


def test_the_derived_figure_is_the_tables_own_ratio_at_a_measured_point(kernel_tables):
    """B200, NVFP4, TensorRT-LLM: Mixtral's experts (4096 x 14336, top-2 of 8, TP1) at 1,024 tokens
    (all 8 touched, 256 rows each): max(expert FLOPs at the FP4 peak, the experts' bytes at HBM)
    over the raw table's latency."""
    import pyarrow.parquet as pq

    from tokenpace.simulator import get_gpu
    from tokenpace.simulator.kernels.moe import moe_table

    t = kernel_tables.load_tables("b200", "trtllm")
    version = moe_table(t, "nvfp4", 4096, 14336, 2, 8, 1).version
    rows = pq.read_table(t.dir / f"moe/trtllm/{version}/moe_perf.parquet").to_pandas()
    hit = rows[(rows.hidden_size == 4096) & (rows.inter_size == 14336) & (rows.topk == 2) & (rows.num_experts == 8)
               & (rows.moe_tp_size == 1) & (rows.moe_ep_size == 1) & (rows.moe_dtype == "nvfp4")
               & (rows.kernel_source == "moe_torch_flow_cutlass") & (rows.distribution == "power_law_1.2")
               & (rows.num_tokens == 1024)]
    assert len(hit) == 1
    gpu, expert = get_gpu("b200"), 3 * 4096 * 14336
    touched = 8 * (1 - (1 - 2 / 8) ** 1024)
    ideal = max(2 * 1024 * 2 * expert / gpu.peak_flops("fp4"), touched * expert * 0.5625 / gpu.hbm_bytes_s)
    eff = get_efficiency("b200", "fp4", engine="trtllm", moe=True)
    points = {(w, r): e for w, r, e in eff.moe_efficiency_by_size_rows}
    assert points[(4096 * 14336, 256)] == pytest.approx(ideal / (hit.latency.iloc[0] * 1e-3), abs=6e-5)
    # fine-grained experts run further from their roofline than Mixtral's large ones
    assert eff.moe_efficiency_at(2048 * 768, 64) < eff.moe_efficiency_at(4096 * 14336, 64)
    assert "aiconfigurator-core" in dict(eff.sources)["moe_efficiency"]
    # and a dense model's figures never read the MoE file
    assert get_efficiency("b200", "fp4", engine="trtllm").moe_efficiency is None

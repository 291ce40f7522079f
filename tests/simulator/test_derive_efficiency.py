"""The roofline's efficiencies derived from measured kernel tables (scripts/derive_efficiency.py):
the shipped catalog file loads with every figure in range and sourced; a derived figure equals the
one worked out by hand from the raw Parquet row; the shipped file is what the installed tables give.

The table tests need aiconfigurator-core (``pip install 'tokenpace[kernels]'``): they skip, saying
so, where it is missing, and fail instead with TOKENPACE_REQUIRE_KERNELS=1 (set by .ci/run)."""

from __future__ import annotations

import json
from importlib import resources
from importlib.metadata import version

import pytest

from tokenpace.simulator import RooflineParams, RooflinePredictor, StepBatch, get_gpu, get_model, get_precision
from tokenpace.simulator.catalog import ModelSpec
from tokenpace.simulator.catalog.efficiency import FIGURES, get_efficiency
from tokenpace.simulator.kernels import tables as kt

FRACTIONS = FIGURES[:6]


def _measured_file() -> dict:
    text = resources.files("tokenpace.simulator").joinpath("data", "efficiency_measured.json").read_text("utf-8")
    return json.loads(text)


def test_the_derived_catalog_loads_with_every_figure_in_range_and_sourced():
    entries = _measured_file()["efficiency"]
    assert entries
    for e in entries:
        figures = {k: v for k, v in e.items() if k in FIGURES}
        assert figures, e
        for name, f in figures.items():
            if name in FRACTIONS:
                assert 0 < f["value"] <= 1, (e["gpu"], e["engine"], name)
            else:
                assert 0 <= f["value"] < 1e-3, (e["gpu"], e["engine"], name)  # seconds
            assert "aiconfigurator-core" in f["source"] and "derive_efficiency.py --write" in f["source"]
            for _, v, latency_s in f.get("by_rows", ()):
                assert 0 < v <= 1 and 0 <= latency_s < 1e-4
            for group, v in f.get("by_group", ()):
                assert group >= 1 and 0 < v <= 1
        for gpu in e["gpu"]:  # and the catalog reads it
            get_efficiency(gpu, e["compute"] if e["compute"] != "*" else "bf16",
                           engine=None if e["engine"] == "*" else e["engine"])


@pytest.fixture(scope="module")
def derive(kernel_tables):
    from tokenpace.simulator.kernels import derive

    return derive


# Every per-GPU GEMM shape of these models is a grid point of the tables: QKV (6,144 × 4,096), O
# (4,096 × 4,096), gate/up (16,384 × 4,096), down (4,096 × 8,192); and QKV (10,240 × 8,192), O
# (8,192 × 8,192), gate/up (16,384 × 8,192), down (8,192 × 8,192).
ON_GRID = ModelSpec(id="on-grid", name="on-grid", num_layers=1, hidden_size=4096, num_heads=32, num_kv_heads=8,
                    head_dim=128, intermediate_size=8192, vocab_size=32000)
ON_GRID_WIDE = ModelSpec(id="on-grid-wide", name="on-grid-wide", num_layers=1, hidden_size=8192, num_heads=64,
                         num_kv_heads=8, head_dim=128, intermediate_size=8192, vocab_size=32000)
SHAPES = {ON_GRID: ((6144, 4096), (4096, 4096), (16384, 4096), (4096, 8192)),
          ON_GRID_WIDE: ((10240, 8192), (8192, 8192), (16384, 8192), (8192, 8192))}


def _raw(tables, relpath: str):
    import pyarrow.parquet as pq

    return pq.read_table(tables.dir / relpath).to_pandas()


def test_gemm_flops_is_the_raw_rows_flops_over_their_time_at_peak(derive, monkeypatch):
    t = kt.load_tables("h100-sxm", "trtllm")
    monkeypatch.setattr(derive, "PREFILL_ROWS", (4096,))
    flops, _ = derive.gemm_efficiency([t], get_gpu("h100-sxm"), "bf16", [(ON_GRID, 1)])
    rows = _raw(t, f"gemm/trtllm/{t.version}/gemm_perf.parquet")
    rows = rows[(rows.gemm_dtype == "bfloat16") & (rows.kernel_source == t.gemm_kernel("bfloat16")) & (rows.m == 4096)]
    ms = sum(rows[(rows.n == n) & (rows.k == k)].latency.iloc[0]
             for n, k in ((6144, 4096), (4096, 4096), (16384, 4096), (4096, 8192)))
    # 2 · 4,096 rows · 4,096 · (6,144 + 4,096 + 16,384 + 4,096 · 2) = 1,168,231,104,512 FLOPs, at the
    # H100's 989 TFLOP/s BF16 peak.
    assert flops.value == pytest.approx(1_168_231_104_512 / (ms * 1e-3 * 989e12), rel=1e-9)


def test_gemm_flops_by_size_is_each_layers_own_efficiency_by_its_weights(derive, monkeypatch):
    t = kt.load_tables("h100-sxm", "trtllm")
    monkeypatch.setattr(derive, "PREFILL_ROWS", (4096,))
    flops, _ = derive.gemm_efficiency([t], get_gpu("h100-sxm"), "fp8", [(ON_GRID_WIDE, 1), (ON_GRID, 1)])
    rows = _raw(t, f"gemm/trtllm/{t.version}/gemm_perf.parquet")
    rows = rows[(rows.gemm_dtype == "fp8") & (rows.kernel_source == t.gemm_kernel("fp8")) & (rows.m == 4096)]
    # Each layer's 2 · 4,096 rows · its weights (4,096 · 34,816 and 8,192 · 43,008) over its GEMMs'
    # summed time at the H100's 1,979 TFLOP/s FP8 peak, ascending by the weights.
    hand = [(w, 2 * 4096 * w / (sum(rows[(rows.n == n) & (rows.k == k)].latency.iloc[0] for n, k in SHAPES[m])
                                  * 1e-3 * 1979e12))
            for m, w in ((ON_GRID, 142_606_336), (ON_GRID_WIDE, 352_321_536))]
    assert [w for w, _ in flops.by_rows] == [w for w, _ in hand]
    assert [e for _, e in flops.by_rows] == pytest.approx([e for _, e in hand], abs=5e-5)


def test_fp8_figures_come_from_the_shapes_fp8_deployments_run():
    from tokenpace.simulator.kernels.derive import serving_configs

    fp8 = {(m.id, tp) for m, tp in serving_configs(bytes_per_weight=1)}
    bf16 = {(m.id, tp) for m, tp in serving_configs()}
    # 70.6 B weights: 35 GB per GPU at TP2 in FP8 (the published TP2 runs), 141 GB / 4 in BF16.
    assert ("llama-3.1-70b", 2) in fp8 and ("llama-3.1-70b", 2) not in bf16
    assert ("llama-3.1-70b", 4) in fp8 and ("llama-3.1-70b", 4) in bf16


def test_weight_streaming_at_one_row_is_the_line_through_the_raw_rows(derive):
    t = kt.load_tables("h100-sxm", "trtllm")
    _, stream = derive.gemm_efficiency([t], get_gpu("h100-sxm"), "fp8", [(ON_GRID, 1), (ON_GRID_WIDE, 1)])
    rows = _raw(t, f"gemm/trtllm/{t.version}/gemm_perf.parquet")
    rows = rows[(rows.gemm_dtype == "fp8") & (rows.kernel_source == t.gemm_kernel("fp8")) & (rows.m == 1)]
    narrow, wide = (sum(rows[(rows.n == n) & (rows.k == k)].latency.iloc[0] * 1e-3 for n, k in SHAPES[m])
                    for m in (ON_GRID, ON_GRID_WIDE))
    # FP8 weights of one layer: 4,096 · 34,816 = 142,606,336 B and 8,192 · 43,008 = 352,321,536 B. Two
    # layers, two unknowns: time = 4 calls × latency + bytes / (efficiency × 3.35 TB/s), solved by hand.
    eff = (352_321_536 - 142_606_336) / 3.35e12 / (wide - narrow)
    latency = (narrow - 142_606_336 / 3.35e12 / eff) / 4
    _, got_eff, got_latency = stream.by_rows[0]
    assert stream.by_rows[0][0] == 1 and latency > 0
    assert (got_eff, got_latency) == (pytest.approx(eff, abs=5e-5), pytest.approx(latency, rel=1e-3))


def test_decode_attention_is_the_raw_rows_kv_bytes_over_their_time(derive, monkeypatch):
    t = kt.load_tables("h200", "vllm")
    monkeypatch.setattr(derive, "DECODE_BATCHES", (64,))
    monkeypatch.setattr(derive, "DECODE_KV_TOKENS", (4095,))
    _, decode = derive.attention_efficiency([t], get_gpu("h200"), "fp8", [(ON_GRID, 1)])
    rows = _raw(t, f"attention/vllm/{t.version}/generation_attention_perf.parquet")
    kernel = t.attention("generation", 32, 8, 128, "fp8").kernel
    hit = rows[(rows.kernel_source == kernel) & (rows.batch_size == 64) & (rows.step == 4095) & (rows.num_heads == 32)
               & (rows.num_key_value_heads == 8) & (rows.head_dim == 128) & (rows.kv_cache_dtype == "fp8")]
    if "window_size" in hit:
        hit = hit[hit.window_size == 0]
    # 64 sequences × 4,095 tokens × K and V × 8 heads × 128 × 1 B (FP8) = 536,739,840 B at 4.8 TB/s.
    assert decode.value == pytest.approx(536_739_840 / (hit.latency.iloc[0] * 1e-3 * 4.8e12), rel=1e-9)


def test_allreduce_bus_bandwidth_comes_from_the_raw_rows(derive):
    t = kt.load_tables("h100-sxm", "trtllm")
    bus, base, hop = derive.allreduce_efficiency([t], get_gpu("h100-sxm"))
    rows = _raw(t, f"comm/trtllm/{t.version}/custom_allreduce_perf.parquet")
    hit = rows[(rows.num_gpus == 8) & (rows.message_size == 2**27)]
    # 2^27 16-bit values over 8 GPUs: bus bandwidth 2 · 7/8 × 2^28 B / latency, of 450 GB/s.
    hand = 2 * 7 / 8 * 2**28 / (hit.latency.iloc[0] * 1e-3) / 450e9
    assert any(s == pytest.approx(hand, rel=1e-9) for s in bus.samples)
    assert 0 < hop.value < base.value < 20e-6  # microseconds, growing with the ring


def test_the_shipped_figures_are_what_the_installed_tables_give(derive):
    shipped = [e for e in _measured_file()["efficiency"] if e["gpu"] == ["l40s"]]
    t = kt.load_tables("l40s", "trtllm")
    device = _raw(t, f"gemm/trtllm/{t.version}/gemm_perf.parquet").device.iloc[0]
    again = derive.catalog_entries(["l40s"], get_gpu("l40s"), [kt.load_tables("l40s", b) for b in kt.BACKENDS],
                                   version("aiconfigurator-core"), device)
    dense, moe = derive.split_moe(json.loads(json.dumps(again)))
    assert dense == shipped
    shipped_moe = json.loads(resources.files("tokenpace.simulator").joinpath("data", "efficiency_moe.json")
                             .read_text("utf-8"))["efficiency"]
    assert moe == [e for e in shipped_moe if e["gpu"] == ["l40s"]] and moe


@pytest.mark.parametrize("engine", ["vllm", "trtllm", None])
def test_a_part_with_the_same_silicon_and_less_bandwidth_prices_compute_bound_steps_alike(engine):
    """The A100 40GB takes the 80GB part's tables (the same SMs and clocks, 1.555 against 2.039 TB/s):
    a 2,048-token prefill, compute-bound, costs about the same on both (only its elementwise passes
    stream more slowly), while a one-sequence decode step, memory-bound, costs more on the 40GB part
    but less than the bandwidth ratio (1.31x): the 80GB's measured GEMMs stream 1.50 TB/s, below its
    HBM's rate, and the 40GB streams at most its measured copy rate, 1.355 TB/s, so its weights take
    at least their bytes at that rate."""
    from tokenpace.simulator import get_model, get_precision
    from tokenpace.simulator.roofline import RooflinePredictor
    from tokenpace.simulator.step import StepBatch

    model, bf16 = get_model("llama-3.1-8b"), get_precision("bf16")
    small, big = (RooflinePredictor(model, get_gpu(g), bf16, bf16, engine=engine) for g in ("a100-40gb", "a100-80gb"))
    prefill, decode = StepBatch(prefill=((2048, 0),)), StepBatch(decode_context=(1000,))
    assert 1.0 <= small.step_s(prefill) / big.step_s(prefill) < 1.06
    assert 1.04 < small.step_s(decode) / big.step_s(decode) < 1.2
    weights = (model.attn_params_per_layer + model.expert_params) * model.num_layers * 2
    assert small.step_s(decode) > weights / 1.355e12


def test_the_all_reduce_curve_is_the_measured_latency_and_the_roofline_prices_a_decode_step_with_it(derive):
    t = kt.load_tables("h100-sxm", "trtllm")
    bus, _, _ = derive.allreduce_efficiency([t], get_gpu("h100-sxm"))
    rows = _raw(t, f"comm/trtllm/{t.version}/custom_allreduce_perf.parquet")
    hit = rows[(rows.num_gpus == 8) & (rows.message_size == 2**20) & (rows.allreduce_dtype.astype(str) == "bfloat16")]
    measured = hit.latency.iloc[0] * 1e-3
    assert (8, 2**20, pytest.approx(measured, rel=1e-3)) in bus.by_rows
    # Llama-3.1-405B (hidden 16,384) at TP8 under the TensorRT-LLM preset: a step of 64 decodes
    # all-reduces 64 · 16,384 = 2^20 values twice in each of 126 layers, at the shipped curve's
    # latency for that message; the two-figure line (latency + bytes at the bus bandwidth) prices
    # that message at under half of it.
    fp8 = get_precision("fp8")
    p = RooflinePredictor(get_model("llama-3.1-405b"), get_gpu("h100-sxm"), fp8, fp8, 8,
                          RooflineParams(step_overhead_s=0.0), engine="trtllm")
    fixed = p.params.fixed_s(p.work(StepBatch(decode_context=(1000,) * 64)))
    assert fixed == pytest.approx(252 * measured, rel=1e-3)
    eff = get_efficiency("h100-sxm", "fp8", engine="trtllm")
    line = eff.allreduce_base_latency_s + 14 * eff.allreduce_hop_latency_s + 1.75 * 2**21 / (450e9 * eff.allreduce_bus_bandwidth)
    assert line < measured / 2

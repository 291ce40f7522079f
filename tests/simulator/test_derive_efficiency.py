"""The roofline's efficiencies derived from measured kernel tables (scripts/derive_efficiency.py):
the shipped catalog file loads with every figure in range and sourced; a derived figure equals the
one worked out by hand from the raw Parquet row; the shipped file is what the installed tables give.

The table tests need aiconfigurator-core (``pip install 'tokenpace[kernels]'``): they skip, saying
so, where it is missing, and fail instead with TOKENPACE_REQUIRE_KERNELS=1 (set by .ci/run)."""

from __future__ import annotations

import json
import os
from importlib import resources
from importlib.metadata import version

import pytest

from tokenpace.simulator import get_gpu
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
            for _, v in f.get("by_rows", ()):
                assert 0 < v <= 1
        for gpu in e["gpu"]:  # and the catalog reads it
            get_efficiency(gpu, e["compute"] if e["compute"] != "*" else "bf16",
                           engine=None if e["engine"] == "*" else e["engine"])


@pytest.fixture(scope="module")
def derive():
    if not kt.tables_available():
        why = "aiconfigurator-core is not installed (pip install 'tokenpace[kernels]')"
        if os.environ.get("TOKENPACE_REQUIRE_KERNELS") == "1":
            pytest.fail(f"TOKENPACE_REQUIRE_KERNELS=1 but {why}")
        pytest.skip(f"{why}; set TOKENPACE_REQUIRE_KERNELS=1 to fail instead")
    from tokenpace.simulator.kernels import derive

    return derive


# Every per-GPU GEMM shape of this model is a grid point of the tables: QKV (6,144 × 4,096), O
# (4,096 × 4,096), gate/up (16,384 × 4,096), down (4,096 × 8,192).
ON_GRID = ModelSpec(id="on-grid", name="on-grid", num_layers=1, hidden_size=4096, num_heads=32, num_kv_heads=8,
                    head_dim=128, intermediate_size=8192, vocab_size=32000)


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


def test_weight_streaming_at_one_row_is_the_raw_rows_bytes_over_their_time(derive):
    t = kt.load_tables("a100-80gb", "vllm")
    _, stream = derive.gemm_efficiency([t], get_gpu("a100-80gb"), "bf16", [(ON_GRID, 1)])
    rows = _raw(t, f"gemm/vllm/{t.version}/gemm_perf.parquet")
    rows = rows[(rows.gemm_dtype == "bfloat16") & (rows.kernel_source == t.gemm_kernel("bfloat16")) & (rows.m == 1)]
    ms = sum(rows[(rows.n == n) & (rows.k == k)].latency.iloc[0]
             for n, k in ((6144, 4096), (4096, 4096), (16384, 4096), (4096, 8192)))
    # 4,096 · 34,816 weights × 2 B = 285,212,672 B, at the A100's 2.039 TB/s.
    assert dict(stream.by_rows)[1] == pytest.approx(min(1.0, 285_212_672 / (ms * 1e-3 * 2.039e12)), abs=1e-4)


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
    assert json.loads(json.dumps(again)) == shipped

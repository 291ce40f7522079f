"""The kernel predictor (--predictor kernels): its lookups give the measured table's own value at a
grid point and move monotonically between grid points; it runs a simulation end to end; without
its extra it says in one line how to install it (exit code 2).

The table tests need aiconfigurator-core (``pip install 'tokenpace[kernels]'``, also in the
``test`` extra): they skip, saying so, where it is missing, and fail instead with
TOKENPACE_REQUIRE_KERNELS=1 (set by .ci/run)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np
import pytest

from tokenpace.errors import UsageError
from tokenpace.simulator import SimConfig, SimRequest, get_gpu, get_model, get_precision, simulate
from tokenpace.simulator.args import add_engine_arguments, engine_config
from tokenpace.simulator.kernels import tables as kt
from tokenpace.simulator.step import StepBatch


@pytest.fixture(scope="module")
def h100_vllm(kernel_tables):
    return kernel_tables.load_tables("h100-sxm", "vllm")


def _raw(tables, relpath: str):
    """The table's rows, read straight from its Parquet file (not through the lookups)."""
    import pyarrow.parquet as pq

    return pq.read_table(tables.dir / relpath).to_pandas()


def test_a_gemm_lookup_returns_the_measured_entry_at_a_grid_point(h100_vllm):
    t = h100_vllm
    rows = _raw(t, f"gemm/vllm/{t.version}/gemm_perf.parquet")
    kernel = t.gemm_kernel("bfloat16")
    mine = rows[(rows.gemm_dtype == "bfloat16") & (rows.kernel_source == kernel)]
    for m, n, k in ((1, 4096, 4096), (64, 6144, 4096), (2048, 4096, 16384), (8192, 1024, 4096)):
        hit = mine[(mine.m == m) & (mine.n == n) & (mine.k == k)]
        assert len(hit) >= 1, (m, n, k)
        assert t.gemm_ms("bfloat16", m, n, k) == hit.latency.iloc[0]


def test_gemm_interpolation_is_monotonic_between_grid_points(h100_vllm):
    t = h100_vllm
    rows = _raw(t, f"gemm/vllm/{t.version}/gemm_perf.parquet")
    kernel = t.gemm_kernel("bfloat16")
    curve = rows[(rows.gemm_dtype == "bfloat16") & (rows.kernel_source == kernel) & (rows.n == 4096)
                 & (rows.k == 4096)].sort_values("m")
    ms = curve.m.to_numpy()
    i = int(np.searchsorted(ms, 1000))  # two neighbours around 1000 rows
    lo, hi = int(ms[i - 1]), int(ms[i])
    a, b = curve.latency.iloc[i - 1], curve.latency.iloc[i]
    xs = np.linspace(lo, hi, 9)
    got = [t.gemm_ms("bfloat16", x, 4096, 4096) for x in xs]
    assert got[0] == a and got[-1] == b
    steps = np.diff(got)
    assert (steps >= 0).all() or (steps <= 0).all()  # monotonic, in the direction of the data
    assert min(a, b) <= min(got) and max(got) <= max(a, b)
    # Between measured weight shapes too: an n halfway between 4096 and 5120 lies between them.
    mid = t.gemm_ms("bfloat16", 512, 4608, 4096)
    ends = (t.gemm_ms("bfloat16", 512, 4096, 4096), t.gemm_ms("bfloat16", 512, 5120, 4096))
    assert min(ends) <= mid <= max(ends)


def test_attention_lookups_return_measured_entries_and_interpolate_monotonically(h100_vllm):
    t = h100_vllm
    gen = t.attention("generation", 32, 8, 128, "bfloat16")
    assert gen.shape == (32, 8, 128) and gen.scale == 1.0
    rows = _raw(t, f"attention/vllm/{t.version}/generation_attention_perf.parquet")
    mine = rows[(rows.kernel_source == gen.kernel) & (rows.num_heads == 32) & (rows.num_key_value_heads == 8)
                & (rows.head_dim == 128) & (rows.kv_cache_dtype == "bfloat16") & (rows.window_size == 0)]
    for b, s in ((1, 1023), (64, 4095), (256, 1023)):
        hit = mine[(mine.batch_size == b) & (mine.step == s)]
        assert len(hit) == 1, (b, s)
        assert gen.ms(b, s) == hit.latency.iloc[0]
    # Between KV lengths 1023 and 2047 at 64 sequences, and between batch sizes 32 and 64.
    kv = [gen.ms(64, s) for s in np.linspace(1023, 2047, 9)]
    assert np.all(np.diff(kv) >= 0) and kv[0] < kv[-1]
    bs = [gen.ms(b, 1023) for b in np.linspace(32, 64, 9)]
    assert np.all(np.diff(bs) >= 0) or np.all(np.diff(bs) <= 0)
    ctx = t.attention("context", 32, 8, 128, "bfloat16")
    crow = _raw(t, f"attention/vllm/{t.version}/context_attention_perf.parquet")
    hit = crow[(crow.kernel_source == ctx.kernel) & (crow.num_heads == 32) & (crow.num_key_value_heads == 8)
               & (crow.head_dim == 128) & (crow.kv_cache_dtype == "bfloat16") & (crow.window_size == 0)
               & (crow.batch_size == 1) & (crow.isl == 4096)]
    assert ctx.ms(1, 4096) == hit.latency.iloc[0]
    prompt = [ctx.ms(1, n) for n in np.linspace(4096, 6144, 9)]
    assert np.all(np.diff(prompt) >= 0)


def test_a_step_grows_with_its_work_and_every_engine_has_its_own_tables(h100_vllm):
    from tokenpace.simulator.kernels.predictor import KernelPredictor

    parts = (get_model("llama-3.1-8b"), get_gpu("h100-sxm"), get_precision("fp8"), get_precision("fp8"))
    vllm = KernelPredictor(*parts, engine="vllm")
    trt = KernelPredictor(*parts, engine="trtllm")
    assert vllm.describe()["tables"]["engine"] == "vllm" and trt.describe()["tables"]["engine"] == "trtllm"
    assert vllm.describe()["tables"]["kv_cache_dtype"] == "fp8"
    decode = [vllm.step_s(StepBatch(decode_context=(c,) * 64)) for c in (512, 1024, 2048, 4096, 8192)]
    assert np.all(np.diff(decode) > 0)
    batch = [vllm.step_s(StepBatch(decode_context=(1024,) * b)) for b in (1, 8, 64, 256)]
    assert np.all(np.diff(batch) > 0)
    prefill = [vllm.step_s(StepBatch(prefill=((n, 0),))) for n in (512, 2048, 8192)]
    assert np.all(np.diff(prefill) > 0)
    # The same chunk costs more attention after a longer cached context.
    assert vllm.step_s(StepBatch(prefill=((2048, 8192),))) > vllm.step_s(StepBatch(prefill=((2048, 0),)))


def test_a_simulation_with_measured_step_costs_jumps_decode_runs_without_changing_much(h100_vllm):
    reqs = [SimRequest(prompt_tokens=512, output_tokens=128) for _ in range(48)]
    cfg = dict(engine="vllm", predictor="kernels", concurrency=16)
    fast = simulate(SimConfig(**cfg), reqs)
    slow = simulate(SimConfig(**cfg, jump_decode_steps=False), reqs)
    assert fast.config["predictor"]["predictor"] == "kernels"
    assert fast.config["predictor"]["tables"]["version"] == h100_vllm.version
    assert fast.stats["completed"] == slow.stats["completed"] == 48
    # The jump interpolates a decode run's step times between its first and last step; the table
    # is linear between its KV-length grid points, so the two agree closely (not exactly).
    assert fast.stats["sim_end_ns"] == pytest.approx(slow.stats["sim_end_ns"], rel=2e-3)


def test_without_tables_the_kernel_predictor_says_how_to_install_them(monkeypatch):
    monkeypatch.setattr(kt, "_aic_root", lambda: None)
    kt.load_tables.cache_clear()
    p = argparse.ArgumentParser()
    add_engine_arguments(p)
    ns = p.parse_args(["--predictor", "kernels"])
    with pytest.raises(UsageError, match=r"pip install 'tokenpace\[kernels\]'"):
        engine_config(ns, model="llama-3.1-8b", max_num_seqs=None)
    kt.load_tables.cache_clear()


def test_the_command_without_the_extra_fails_in_one_line_with_exit_code_2(tmp_path):
    script = ("import sys; sys.modules['aiconfigurator_core'] = None\n"
              "from tokenpace.cli.main import main\n"
              "sys.exit(main(['sim', '--predictor', 'kernels', '--requests', '4', '--concurrency', '2', "
              f"'--out', {str(tmp_path / 'r.json')!r}]))")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "pip install 'tokenpace[kernels]'" in err[0]
    assert not (tmp_path / "r.json").exists()


def test_a_gpu_without_tables_is_refused_naming_those_with_them(h100_vllm):
    with pytest.raises(UsageError, match="h100-sxm"):
        simulate(SimConfig(gpu="rtx-a6000", predictor="kernels", concurrency=1), [SimRequest(16, 2)])


def test_a_kv_dtype_the_engines_tables_lack_is_refused_naming_those_they_have(kernel_tables):
    """A KV cache dtype the engine's attention tables never measured is refused in one line that
    names, as --kv-dtype spells them, the dtypes they did measure at that head dim (SGLang's on the
    H100, where the FP8 KV that FP8 weights imply was missing in aiconfigurator-core 0.12)."""
    sglang = kernel_tables.load_tables("h100-sxm", "sglang")
    rows = _raw(sglang, f"attention/sglang/{sglang.version}/context_attention_perf.parquet")
    if "attn_dtype" in rows:
        rows = rows[rows.attn_dtype == "bfloat16"]
    if "window_size" in rows:
        rows = rows[rows.window_size == 0]
    have = sorted({"bf16" if k == "bfloat16" else k for k in rows[rows.head_dim == 128].kv_cache_dtype})
    assert have
    with pytest.raises(UsageError) as refused:
        sglang.attention("context", 32, 8, 128, "int4")
    assert str(refused.value).endswith(f"give --kv-dtype {' or '.join(have)} (measured), or use --predictor roofline")


def test_sim_list_shows_the_predictors_and_the_gpus_with_measured_tables():
    proc = subprocess.run([sys.executable, "-m", "tokenpace", "sim", "--list"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Step-time predictors (--predictor)" in out and "roofline" in out and "kernels" in out
    from tokenpace.simulator.error_band import error_bands

    for name in ("roofline", "kernels"):  # each with its validated error (simulator/data/error_band.json)
        m = error_bands()[name]["median_abs_error"]
        assert f"median |error| throughput {m['throughput']:.1%}, TTFT {m['ttft']:.1%}" in out
    if kt.tables_available():
        assert "Measured kernel tables" in out
        rows = [line.split() for line in out.splitlines() if line.startswith(("h100-sxm ", "a100-80gb "))]
        assert {(r[0], r[1]) for r in rows} >= {("h100-sxm", "vllm"), ("h100-sxm", "trtllm"), ("a100-80gb", "sglang")}
    else:
        assert "pip install 'tokenpace[kernels]'" in out


def test_prefill_attention_past_the_longest_measured_prompt_keeps_growing_with_the_context(h100_vllm):
    from tokenpace.simulator.kernels.predictor import KernelPredictor

    p = KernelPredictor(get_model("llama-3.1-8b"), get_gpu("h100-sxm"), get_precision("bf16"),
                        get_precision("bf16"), engine="vllm")
    top, chunk = int(p.context.grid.b[-1]), 2048  # the longest prompt measured (16,384 here)

    def chunk_s(cached: int) -> float:  # a 2,048-token chunk after ``cached`` tokens (same GEMMs each time)
        return p.step_s(StepBatch(prefill=((chunk, cached),)))

    base = chunk_s(0)
    at_edge, just_past, double = (chunk_s(c) - base for c in (top - chunk, top - chunk + 64, 2 * top - chunk))
    assert at_edge < just_past < at_edge * 1.02  # no jump where the table ends
    # Twice the context behind the chunk is about twice its (query, key) pairs: a linear extension
    # of the table's last segment would give ~1.4x here, the causal pairs ~2.06x.
    assert double / at_edge > 1.8


def test_a_steps_prompts_share_one_context_attention_call_per_layer(h100_vllm):
    """The engines run every prompt chunk of a step in one (varlen) context-attention kernel, so 32
    prompts of 128 tokens cost the table's batch-32 entry, not 32 separate batch-1 calls."""
    from tokenpace.simulator.kernels.predictor import MS, KernelPredictor

    p = KernelPredictor(get_model("llama-3.1-8b"), get_gpu("h100-sxm"), get_precision("bf16"),
                        get_precision("bf16"), engine="vllm")
    rows = _raw(h100_vllm, f"attention/vllm/{h100_vllm.version}/context_attention_perf.parquet")
    hit = rows[(rows.kernel_source == p.context.kernel) & (rows.num_heads == 32) & (rows.num_key_value_heads == 8)
               & (rows.head_dim == 128) & (rows.kv_cache_dtype == "bfloat16") & (rows.window_size == 0)
               & (rows.batch_size == 32) & (rows.isl == 128)]
    assert len(hit) == 1
    many = StepBatch(prefill=((128, 0),) * 32)
    with_attention = p.step_s(many)

    class NoAttention:
        def ms(self, batch: float, tokens: float) -> float:
            return 0.0

    p.context = NoAttention()
    attention = with_attention - p.step_s(many)
    layers = get_model("llama-3.1-8b").num_layers
    assert attention == pytest.approx(hit.latency.iloc[0] * MS * layers, rel=1e-9)
    # One call for 32 prompts is far cheaper than 32 calls of one (each pays the kernel's fixed time).
    one = rows[(rows.kernel_source == hit.kernel_source.iloc[0]) & (rows.num_heads == 32)
               & (rows.num_key_value_heads == 8) & (rows.head_dim == 128) & (rows.kv_cache_dtype == "bfloat16")
               & (rows.window_size == 0) & (rows.batch_size == 1) & (rows.isl == 128)].latency.iloc[0]
    assert attention < 0.5 * 32 * one * MS * layers


def test_the_allreduce_is_looked_up_by_elements_not_bytes(h100_vllm):
    # The all-reduce table's message_size counts bfloat16 values (aiconfigurator's collector
    # all-reduces a [size / 4096, 4096] tensor). A 2,048-token step of Llama-3.1-70B at TP4 moves
    # 2,048 × 8,192 = 16,777,216 values per all-reduce, two per layer over 80 layers: the step pays
    # 160 × the measured latency at that size, read here straight from the file.
    from tokenpace.simulator.kernels.predictor import KernelPredictor

    p = KernelPredictor(get_model("llama-3.1-70b"), get_gpu("h100-sxm"), get_precision("fp8"),
                        get_precision("fp8"), 4, engine="trtllm")
    comm = p.tables.dir / "comm" / "trtllm"
    version = p.allreduce_source.split()[1]
    raw = _raw(p.tables, f"comm/trtllm/{version}/custom_allreduce_perf.parquet")
    assert comm.is_dir()
    row = raw[(raw.num_gpus == 4) & (raw.allreduce_dtype.astype(str) == "bfloat16")
              & (raw.message_size == 2048 * 8192)]
    assert len(row) == 1
    assert p.allreduce_s(2048) == pytest.approx(160 * float(row.latency.iloc[0]) * 1e-3, rel=1e-9)
    assert p.allreduce_s(1) < p.allreduce_s(2048) < p.allreduce_s(4096)


def test_the_kernel_predictor_adds_only_the_elementwise_passes_the_tables_leave_out(h100_vllm):
    # Llama-3.1-8B with FP8 GEMMs, bytes per token and layer (16-bit activations):
    #   two residual-add + RMSNorms 2 × 4 × 4,096 × 2 = 65,536; SiLU-and-mul 3 × 14,336 × 2 = 86,016;
    #   rotary on Q and K 2 × (32 + 8) × 128 × 2 = 20,480; FP8 quantization of an input of n values
    #   3n: the roofline quantizes QKV, O, gate/up and down inputs 3 × (4,096 × 3 + 14,336) = 79,872,
    #   the kernel predictor only QKV and gate/up (3 × 8,192 = 24,576; aiconfigurator's op list),
    #   and with TensorRT-LLM's tables leaves rotary to its attention op.
    from tokenpace.simulator.kernels.predictor import KernelPredictor
    from tokenpace.simulator.roofline import RooflinePredictor

    parts = (get_model("llama-3.1-8b"), get_gpu("h100-sxm"), get_precision("fp8"), get_precision("fp8"))
    full = RooflinePredictor(*parts).elementwise_s_per_token()
    vllm = KernelPredictor(*parts, engine="vllm")._elementwise_s_tok
    trt = KernelPredictor(*parts, engine="trtllm")._elementwise_s_tok
    assert vllm / full == pytest.approx((65536 + 86016 + 20480 + 24576) / (65536 + 86016 + 20480 + 79872))
    assert trt / full == pytest.approx((65536 + 86016 + 24576) / (65536 + 86016 + 20480 + 79872))


def test_a_part_that_borrows_tables_streams_no_faster_than_its_own_memory(kernel_tables):
    """The A100 40GB prices its steps from the 80GB's tables (the same SMs, 1.555 against 2.039
    TB/s). A compute-bound prefill costs the same on both but for the elementwise passes; a
    one-sequence decode step, whose GEMMs the 80GB streams at 1.50 TB/s, takes on the 40GB at least
    the weights at its measured copy rate (1.355 TB/s), and decode attention over long contexts at
    least the KV bytes at that rate; decode runs give the same floats as single steps."""
    from tokenpace.simulator.kernels.predictor import KernelPredictor

    model, bf16 = get_model("llama-3.1-8b"), get_precision("bf16")
    small, big = (KernelPredictor(model, get_gpu(g), bf16, bf16, engine="vllm") for g in ("a100-40gb", "a100-80gb"))
    assert small.describe()["tables"]["measured_on"] == "a100-80gb"
    assert "measured_on" not in big.describe()["tables"]
    prefill = StepBatch(prefill=((4096, 0),))
    assert 1.0 <= small.step_s(prefill) / big.step_s(prefill) < 1.03
    weights = ((model.attn_params_per_layer + model.expert_params) * model.num_layers
               + model.vocab_size * model.hidden_size) * 2  # the layers' GEMMs and the LM head
    lone = StepBatch(decode_context=(1000,))
    assert small.step_s(lone) - small.params.step_overhead_s > weights / 1.355e12
    assert 1.03 < small.step_s(lone) / big.step_s(lone) < 2.039 / 1.555
    long = StepBatch(decode_context=(16000,) * 64)
    kv = 64 * 16001 * model.num_layers * 2 * model.num_kv_heads * model.head_dim * 2
    assert small.step_s(long) - big.step_s(long) > 0
    assert small.step_s(long) > kv / 1.355e12 + weights / 1.355e12
    run = small.decode_run_s(long, 5)
    assert run[0] == small.step_s(long)
    assert run[4] == small.step_s(StepBatch(decode_context=(16004,) * 64))


def test_a_simulated_sweep_on_the_kernel_predictor_says_so_in_its_header(h100_vllm, tmp_path):
    """The sweep's header (console and HTML, from ``sweep_provenance``) named the roofline whatever
    --predictor was."""
    import json

    from tokenpace.reports.sweep_provenance import provenance

    out = tmp_path / "sweep.json"
    proc = subprocess.run([sys.executable, "-m", "tokenpace", "sweep", "--sim", "--engine", "trtllm",
                           "--predictor", "kernels", "--quant", "fp8", "--concurrency", "1,2",
                           "--requests-per-step", "4", "--input-tokens", "128", "--output-tokens", "8",
                           "--out", str(out)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "250"})
    assert proc.returncode == 0, proc.stderr
    said = dict(provenance(json.loads(out.read_text())))["Step-time predictor"]
    assert said.startswith("kernels: aiconfigurator-core's measured kernel tables (trtllm's, h100-sxm)")
    assert "Step-time predictor  kernels" in proc.stdout
    # And the kernel predictor's validated error, not the roofline's (simulator.error_band).
    from tokenpace.simulator.error_band import error_bands

    doc = json.loads(out.read_text())
    assert doc["config"]["validated_error"] == error_bands()["kernels"]
    m = error_bands()["kernels"]["median_abs_error"]
    assert dict(provenance(doc))["Validated error"].startswith(f"median |error| throughput {m['throughput']:.1%}")

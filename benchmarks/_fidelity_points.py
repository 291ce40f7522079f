"""The setups of ``sim_fidelity.py``: REFERENCE section 5's points and every published point in
``published_points.json``, each as a workload and two engine configurations:

- ``before``: what a user got from the documented flags before engine presets (issue 14): BF16 KV
  unless told (a published FP8 run gives only ``--quant fp8``), 256 sequences and 8,192 tokens per
  step, first-chunk admission, nominal memory × 0.9 − 1.5 GiB, 1.75 ms per step;
- ``after``: the engine preset of the source's engine, with the load the source describes.

How each source's load is simulated (``Setup.kind``):

- ``offline`` (trtllm-bench throughput): every request queued at once, the ``trtllm`` preset,
  whose batch and token limits come from trtllm-bench's heuristic for the point's ISL/OSL;
  ``n`` requests, enough for about eight waves of the heuristic's batch (at least 500, at most
  3,000); throughput = output tokens / (last completion − first send);
- ``static`` (gptSessionBenchmark): one batch, prompts prefilled together, then decoded to the end;
  throughput per GPU = batch × OSL / that time / TP;
- ``single``: one request at a time; TTFT, TPOT (ITL) of its stream;
- ``batch``: a batch served together (SGLang bench_one_batch): prefill rate, then decode rate;
- ``closed``: a closed loop at the source's concurrency; with ``window: steady`` (genai-perf's
  stable measurement windows) read over its steady state, else over every request;
- ``latency`` (vllm bench latency): one batch handed to the engine at once; E2E until its last token.

Nothing is fitted to a point: every efficiency is the roofline's library default. One setup
sets a host time from its source's profile (the mid-2024 host-bound point: see its assumptions).
The trtllm preset's host time per request (``RooflineParams.host_seq_s``) applies to the PyTorch
backend's points only; the C++-runtime sources (v0.5/v0.6, NIM) run without it.
The TensorRT-LLM v0.5 and v0.6 setups read a grouped-query model's KV once per query head, as that
release's decode kernel did (``RooflineParams.decode_kv_reads``; only Llama-2-70B's decode changes).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenpace.simulator import SimConfig, get_gpu, get_model
from tokenpace.simulator.engines import trtllm_bench_limits, with_engine
from tokenpace.simulator.step_price import RooflineParams

BEFORE = dict(admission="chunk", max_num_seqs=256, max_batched_tokens=8192)
# The requests trtllm-bench ran for each (ISL, OSL) of TensorRT-LLM's perf-overview tables (its
# "$num_requests" table, docs/source/performance/perf-overview.md at 00f3768: more for short
# requests, "to guarantee that the system hit a steady state"). Other offline shapes: 8 batches'
# worth, 500-3,000.
TRTLLM_BENCH_REQUESTS = {(128, 128): 30000, (128, 2048): 3000, (128, 4096): 1500, (1000, 2000): 1500,
                         (2048, 128): 3000, (2048, 2048): 1500, (5000, 500): 1500, (1000, 1000): 3000,
                         (500, 2000): 3000, (20000, 2000): 1000}


@dataclass
class Setup:
    name: str
    source: str
    kind: str  # offline | static | single | batch | closed | latency
    before: SimConfig
    after: SimConfig
    prompt: int
    output: int
    n: int  # requests
    published: dict[str, float]
    assumptions: list[str] = field(default_factory=list)
    steady: bool = False  # closed loop read over its steady state (see sim_fidelity._steady)


def reference_points() -> list[Setup]:
    """REFERENCE section 5's points (as the benchmark has always run them; after: engine presets
    where the engine is known)."""
    nim = dict(model="llama-3.3-70b", gpu="h100-sxm", weights="fp8", tp=2, concurrency=1, max_batched_tokens=8192)
    ft = dict(model="gpt-13b", gpu="a100-40gb", weights="fp16", kv_cache_dtype="fp16", concurrency=1)
    nim_after = with_engine(SimConfig(**nim), "trtllm", given={"max_batched_tokens", "host_seq_s"})  # C++ runtime
    sgl = dict(model="qwen3-8b", gpu="h20", weights="fp8", kv_cache_dtype="bf16", max_batched_tokens=8192,
               concurrency=64)
    out = [
        Setup("NIM 70B FP8 TP2, 5000/500", "NVIDIA NIM 1.8.0 benchmarks", "single",
              SimConfig(**nim, kv_cache_dtype="bf16", **_old()), nim_after, 5000, 500, 1,
              {"ttft_ms": 406.77, "itl_ms": 18.58, "output_tok_s": 51.67},
              ["NIM runs TensorRT-LLM: preset trtllm; KV FP8 implied by the FP8 weights (before: BF16)",
               "whole prompt in one step (max_batched_tokens 8192)"]),
        Setup("NIM 70B FP8 TP2, 500/2000", "NVIDIA NIM 1.8.0 benchmarks", "single",
              SimConfig(**nim, kv_cache_dtype="bf16", **_old()), nim_after, 500, 2000, 1,
              {"ttft_ms": 47.77, "itl_ms": 18.91}, ["as above"]),
        Setup("FT 13B A100-40GB TP1, 512 in", "FasterTransformer GPT docs", "single",
              SimConfig(**ft, tp=1, **_old()), SimConfig(**ft, tp=1), 512, 32, 1,
              {"ttft_ms": 63.17, "itl_ms": 22.0}, ["FasterTransformer: no preset; 32 output tokens"]),
        Setup("FT 13B A100-40GB TP2, 512 in", "FasterTransformer GPT docs", "single",
              SimConfig(**ft, tp=2, **_old()), SimConfig(**ft, tp=2), 512, 32, 1,
              {"ttft_ms": 45.45, "itl_ms": 13.5}, ["as above"]),
        Setup("SGLang Qwen3-8B FP8 H20, batch 64", "SGLang benchmark (bench_one_batch style)", "batch",
              SimConfig(**sgl, policy="prefill-first", **_old()),
              with_engine(SimConfig(**sgl, policy="prefill-first"), "sglang", given={"policy", "max_batched_tokens"}),
              4096, 2048, 64, {"prefill_tok_s": 15061, "decode_tok_s": 2682},
              ["KV BF16 (SGLang's default for this checkpoint)", "prefill in 8,192-token steps, all before decoding"]),
        Setup("Llama-3-8B H100 light load, mid-2024", "a 2024 profile of a popular engine", "single",
              SimConfig(model="llama-3.1-8b", gpu="h100-sxm", concurrency=1, **_old()),
              SimConfig(model="llama-3.1-8b", gpu="h100-sxm", concurrency=1,
                        roofline=RooflineParams(step_overhead_s=_host_bound_overhead_s(512, 256))),
              512, 256, 1, {"itl_ms": 13.0},
              ["512 in / 256 out (not published); that engine spent most of a step on the CPU",
               f"host time per step {_host_bound_overhead_s(512, 256) * 1e3:.2f} ms: the GPU's decode step "
               f"x {HOST_SHARE_2024:g}/{1 - HOST_SHARE_2024:g}, vLLM's profile of v0.5.3 (Llama 3 8B on one "
               "H100: 38% of the time on the GPU, 33% in the HTTP server, 29% scheduling; "
               "blog.vllm.ai/2024/09/05/perf-update.html; its load is not stated), likely more than at "
               "light load"]),
    ]
    return out


# vLLM v0.5.3's time outside the GPU for Llama 3 8B on one H100 (blog.vllm.ai/2024/09/05/perf-update.html).
HOST_SHARE_2024 = 0.62


def _host_bound_overhead_s(prompt: int, output: int) -> float:
    """The host time per step that gives the GPU HOST_SHARE_2024's share of the time: the roofline's
    GPU time of the point's middle decode step (no host time) x share / (1 - share)."""
    from tokenpace.simulator import get_model, get_precision
    from tokenpace.simulator.roofline import RooflinePredictor
    from tokenpace.simulator.step import StepBatch

    bf16 = get_precision("bf16")
    gpu_s = RooflinePredictor(get_model("llama-3.1-8b"), get_gpu("h100-sxm"), bf16, bf16,
                              params=RooflineParams(step_overhead_s=0.0)).step_s(
        StepBatch(decode_context=(prompt + output // 2,)))
    return gpu_s * HOST_SHARE_2024 / (1 - HOST_SHARE_2024)


def _old() -> dict[str, Any]:
    return {"admission": "chunk"}


def published_points(path: Path) -> list[Setup]:
    """The points of a published_points.json-style file. A file may give ``defaults`` by the id's
    first part (``nim/...`` takes ``defaults["nim"]``), which each point's own keys extend; a
    point's ``concurrency`` goes into its load."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    defaults = doc.get("defaults", {})
    out = []
    for p in doc["points"]:
        p = {**defaults.get(p["id"].split("/", 1)[0], {}), **p}
        if "concurrency" in p:
            p["load"] = {**p["load"], "concurrency": p["concurrency"]}
        out.append(_setup(p))
    return out


def _setup(p: dict[str, Any]) -> Setup:
    load, isl, osl, tp = p["load"], int(p["isl"]), int(p["osl"]), int(p["tp"])
    weights = p["precision"]
    kv = "fp8" if str(p["kv_dtype"]).startswith("fp8") else weights
    base = dict(model=p["model"], gpu=p["gpu"], weights=weights, tp=tp)
    before_kv = "bf16" if weights in ("fp8", "nvfp4") else weights  # before: --quant fp8 alone gave a BF16 KV cache
    notes = [f"engine: {p['engine']}", f"KV {kv} (published: {p['kv_dtype']}); before: {before_kv}"]
    kind = load["kind"]
    if kind == "offline":
        after = with_engine(SimConfig(**base, kv_cache_dtype=kv, concurrency=1), "trtllm", offline=True)
        batch, tokens = trtllm_bench_limits(after, isl, osl)
        n = TRTLLM_BENCH_REQUESTS.get((isl, osl)) or min(3000, max(500, 8 * batch))
        after = dataclasses.replace(after, concurrency=n)
        before = SimConfig(**base, kv_cache_dtype=before_kv, concurrency=n, **BEFORE)
        notes.append(f"{n} requests queued at once; trtllm-bench heuristic: max batch {batch}, max tokens {tokens}")
    elif kind == "static":
        b = int(load["batch"])
        static = dict(policy="static", max_num_seqs=b, max_batched_tokens=b * isl, concurrency=b)
        after = with_engine(SimConfig(**base, kv_cache_dtype=kv, **static), "trtllm",
                            given={"policy", "max_num_seqs", "max_batched_tokens"})
        after = _fit_batch(after, b * -(-(isl + osl) // 16))
        before = SimConfig(**base, kv_cache_dtype=before_kv, **{**static, "max_batched_tokens": 8192},
                           admission="chunk")
        before = _fit_batch(before, b * -(-(isl + osl) // 16))
        n = b
        notes.append(f"static batch {b}: all prompts in one context step (before: 8,192-token steps)")
    elif kind == "single":
        after = with_engine(SimConfig(**base, kv_cache_dtype=kv, concurrency=1),
                            "trtllm" if "TensorRT" in p["engine"] else "vllm")
        if after.max_batched_tokens < isl and "TensorRT" in p["engine"]:
            after = dataclasses.replace(after, max_batched_tokens=isl)
        before = SimConfig(**base, kv_cache_dtype=before_kv, concurrency=1, admission="chunk")
        n = 1
    elif kind == "closed":
        c = int(load["concurrency"])
        given = dict(p.get("given", {}))
        after = with_engine(SimConfig(**base, **given, kv_cache_dtype=kv, concurrency=c),
                            p.get("engine_preset", "vllm"), given=set(given))
        before = SimConfig(**base, kv_cache_dtype=before_kv, concurrency=c, admission="chunk")
        # A steady-state window needs waves after the first: at least 60 requests.
        n = max(10 * c, 60) if load.get("window") == "steady" else 10 * c
        notes.append(f"closed loop, concurrency {c}, {n} requests"
                     + (", read over the steady state" if load.get("window") == "steady" else ""))
    elif kind == "latency":  # vllm bench latency: one batch handed to the engine at once
        b = int(load["batch"])
        after = with_engine(SimConfig(**base, kv_cache_dtype=kv, concurrency=b), p.get("engine_preset", "vllm"),
                            offline=True)
        before = SimConfig(**base, kv_cache_dtype=before_kv, concurrency=b, admission="chunk")
        n = b
        notes.append(f"{b} requests at once; E2E until the last token")
    else:
        raise ValueError(f"{p['id']}: unknown load kind {kind!r}")
    if after.roofline.host_seq_s and "PyTorch backend" not in p["engine"]:
        # The preset's per-request host time is the PyTorch backend's Python executor; a C++ runtime
        # (gptSessionBenchmark, NIM's engines) has none.
        after = dataclasses.replace(after, roofline=dataclasses.replace(after.roofline, host_seq_s=0.0))
        notes.append("no per-request host time (a C++ runtime, not the PyTorch backend's executor)")
    if _mmha_era(p["engine"]):
        # TensorRT-LLM before its GQA decode kernels: the KV read once per query head.
        after = dataclasses.replace(after, roofline=dataclasses.replace(after.roofline, decode_kv_reads="per-query-head"))
        model = get_model(p["model"])
        if osl > 1 and model.num_kv_heads < model.num_heads:
            notes.append("decode attention reads the KV once per query head (--decode-kv-reads per-query-head): "
                         "TensorRT-LLM's masked MHA kernel up to v0.6 (NVIDIA/TensorRT-LLM issue #407)")
    if p.get("note"):
        notes.append(p["note"])
    return Setup(p["id"], p["source"], kind, before, after, isl, osl, n, dict(p["metrics"]), notes,
                 steady=load.get("window") == "steady")


def _mmha_era(engine: str) -> bool:
    """A TensorRT-LLM release whose decode attention read a grouped-query model's KV once per query
    head (v0.5 and v0.6; ``RooflineParams.decode_kv_reads``)."""
    return engine.startswith(("TensorRT-LLM v0.5", "TensorRT-LLM v0.6"))


def _fit_batch(config: SimConfig, blocks: int) -> SimConfig:
    """A static batch the source ran fitted its memory; size the KV cache for it if ours is smaller."""
    from tokenpace.simulator import build_engine, build_predictor

    engine, _ = build_engine(config, build_predictor(config))
    if engine.kv.num_blocks >= blocks:
        return config
    return dataclasses.replace(config, num_gpu_blocks=blocks)


def gpus_of(setups: list[Setup]) -> set[str]:
    return {get_gpu(s.after.gpu).id for s in setups}

"""The answer a plan gives: the configurations that meet the SLO, cheapest first, why the rest do
not, the Pareto frontier of cost against p99 TTFT, one sentence for the winner, the engine flags to
reproduce it, what-ifs (growth), and which predictor priced it with its validated error."""

from __future__ import annotations

import dataclasses
import math
from datetime import datetime, timezone
from typing import Any

from tokenpace._version import __version__
from tokenpace.plan.search import Evaluation
from tokenpace.simulator.catalog import get_gpu, get_model
from tokenpace.simulator.error_band import error_bands

KIND = "plan"
SCHEMA_VERSION = 1


def answer(config: Any, evaluations: list[Evaluation]) -> dict[str, Any]:
    t = config.traffic
    met = sorted((e for e in evaluations if e.meets and e.cost(t) is not None),
                 key=lambda e: (e.cost(t)["usd_per_hour"], e.at_rate.ttft_p99_ms or math.inf))
    unpriced = [e for e in evaluations if e.meets and e.cost(t) is None]
    rest = [e for e in evaluations if not e.meets]
    band = error_bands()
    doc: dict[str, Any] = {
        "kind": KIND, "schema_version": SCHEMA_VERSION,
        "tool": {"name": "tokenpace", "version": __version__},
        "created": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "model": get_model(config.model).id, "traffic": t.to_dict(),
        "slo": {"name": config.slo.name, "limits_ms": config.slo.limits_ms(), "attainment": config.slo.attainment},
        "predictor": _predictor(config, band),
        "prices": {gpu: p.to_dict() for gpu, p in sorted(config.prices.items())},
        "candidates": len(evaluations), "finalists": config.top,
        "ranked": [_row(e, t, i + 1) for i, e in enumerate(met)],
        "unpriced": [_row(e, t, None) for e in unpriced],
        "rejected": [_row(e, t, None) for e in sorted(rest, key=_rejected_order)],
        "frontier": [_row(e, t, None) for e in pareto(met, t)],
        "winner": None,
    }
    if met:
        w = met[0]
        doc["winner"] = {**_row(w, t, 1), "sentence": sentence(w, config), "flags": flags(w, config.model, t.shares_prefixes)}
    doc["what_ifs"] = what_ifs(evaluations, t)
    if config.growth:
        doc["growth"] = {"factor": config.growth, "rate_rps": t.rate * config.growth,
                         "finalists": [_growth(e, t, config.growth) for e in met[:config.top] if e.max_rps]}
    return doc


def _predictor(config: Any, band: dict[str, Any]) -> dict[str, Any]:
    if getattr(config, "predictor", "roofline") == "kernels":
        return {"name": "kernels", "detail": "step costs from aiconfigurator-core's measured GEMM, attention, MoE "
                "and all-reduce tables; queueing from the event simulation", "error_band": band["kernels"]}
    if config.calibration:
        return {"name": "calibration", "file": config.calibration,
                "applies_to": "candidates on the calibration's GPU; the others use the roofline",
                "error_band": band["calibration"], "roofline_error_band": band["roofline"]}
    return {"name": "roofline", "detail": "roofline step times with the catalog's efficiencies per GPU, "
            "precision and operator class; queueing from the event simulation", "error_band": band["roofline"]}


def _rejected_order(e: Evaluation) -> tuple:
    return (e.pruned is not None, e.binding or "", e.candidate.label())


def _row(e: Evaluation, t: Any, rank: int | None) -> dict[str, Any]:
    row = e.to_dict(t)
    row["rank"] = rank
    return row


def pareto(met: list[Evaluation], t: Any) -> list[Evaluation]:
    """Those no other beats on both cost per hour and p99 TTFT at the traffic's rate."""
    front, best_ttft = [], math.inf
    for e in sorted(met, key=lambda e: (e.cost(t)["usd_per_hour"], e.at_rate.ttft_p99_ms or math.inf)):
        ttft = e.at_rate.ttft_p99_ms if e.at_rate.ttft_p99_ms is not None else math.inf
        if ttft < best_ttft:
            front.append(e)
            best_ttft = ttft
    return front


def sentence(e: Evaluation, config: Any) -> str:
    c, t, cost = e.candidate, config.traffic, e.cost(config.traffic)
    gpu = get_gpu(c.gpu).name
    replicas = f"{e.replicas} replica{'s' if e.replicas != 1 else ''}"
    p = e.at_rate
    head = f"{c.tp} x {gpu} TP{c.tp} {c.weights.upper()} ({c.engine}), {replicas}"
    text = (f"{head}: ${cost['usd_per_hour']:,.2f}/h, ${cost['usd_per_1m_output_tokens']:,.2f} per 1M output "
            f"tokens; TTFT p99 at {t.rate:g} req/s is {p.ttft_p99_ms:,.0f} ms")
    if p.tpot_p99_ms is not None:
        text += f", TPOT p99 {p.tpot_p99_ms:,.1f} ms"
    return text + f" ({p.attainment:.0%} of requests within the SLO; one replica holds {e.max_rps:.2f} req/s)."


def flags(e: Evaluation, model: str, shares_prefixes: bool = False) -> dict[str, str]:
    """Engine command lines that reproduce the candidate (the model path is the user's). Prefix
    caching is named only when the traffic shares prefixes (else it changes nothing, and the
    engine's default stays)."""
    c = e.candidate
    config = c.sim_config(model)
    vllm = [f"vllm serve MODEL --tensor-parallel-size {c.tp}",
            f"--max-num-seqs {config.max_num_seqs}", f"--max-num-batched-tokens {config.max_batched_tokens}",
            f"--gpu-memory-utilization {config.gpu_memory_utilization:g}"]
    if c.weights == "fp8":
        vllm.append("--quantization fp8 --kv-cache-dtype fp8")
    elif c.weights in ("int4", "int8"):
        vllm.append(f"# an {c.weights.upper()} checkpoint (AWQ/GPTQ)")
    if config.policy != "chunked-prefill":
        vllm.append("--no-enable-chunked-prefill")
    # vLLM V1 and SGLang cache prefixes by default; TensorRT-LLM's KV block reuse is on by default too.
    if shares_prefixes:
        vllm.append("--enable-prefix-caching" if c.prefix_caching else "--no-enable-prefix-caching")
    if c.spec is not None:
        vllm.append(f"--speculative-config '{{\"num_speculative_tokens\": {c.spec.num_draft_tokens}, \"model\": DRAFT}}'")
    trt = [f"trtllm-serve MODEL --tp_size {c.tp}", f"--max_batch_size {config.max_num_seqs}",
           f"--max_num_tokens {config.max_batched_tokens}",
           f"--kv_cache_free_gpu_memory_fraction {config.gpu_memory_utilization:g}"]
    sglang = [f"python -m sglang.launch_server --model-path MODEL --tp {c.tp}",
              f"--max-running-requests {config.max_num_seqs}", f"--chunked-prefill-size {config.max_batched_tokens}"]
    if c.weights == "fp8":
        sglang.append("--quantization fp8 --kv-cache-dtype fp8_e4m3")
    if shares_prefixes and not c.prefix_caching:
        sglang.append("--disable-radix-cache")
        trt.append("# kv_cache_config: {enable_block_reuse: false} in --extra_llm_api_options")
    return {"vllm": " ".join(vllm), "trtllm": " ".join(trt), "sglang": " ".join(sglang),
            "replicas": f"{e.replicas} such server{'s' if e.replicas != 1 else ''} behind a load balancer"}


def _growth(e: Evaluation, t: Any, factor: float) -> dict[str, Any]:
    return {"label": e.candidate.label(), "replicas_now": e.replicas,
            "needs_another_replica_above_rps": e.replicas * e.max_rps,
            "replicas_at_growth": max(1, math.ceil(t.rate * factor / e.max_rps - 1e-9))}


WHAT_IFS = (("spec", None, "speculative decoding"), ("weights", "bf16", "FP8 weights"),
            ("kv_dtype", "bf16", "an FP8 KV cache"), ("prefix_caching", False, "prefix caching"))
MAX_WHAT_IFS = 5  # sentences per what-if, cheapest deployments first


def what_ifs(evaluations: list[Evaluation], t: Any) -> list[str]:
    """Each what-if in words: a candidate against its twin that differs only in that respect (with
    speculative decoding against without, FP8 weights against BF16, FP8 KV against the default):
    replicas, cost and tail latency at the traffic, or which of the two cannot meet the SLO."""
    by_candidate = {e.candidate: e for e in evaluations}
    out: list[str] = []
    for field, base_value, name in WHAT_IFS:
        pairs = []
        for e in evaluations:
            value = getattr(e.candidate, field)
            if value is None or value == base_value:
                continue
            twin = by_candidate.get(dataclasses.replace(e.candidate, **{field: base_value}))
            if twin is not None and (e.meets or twin.meets):
                pairs.append((twin, e))
        pairs.sort(key=lambda p: min(x.cost(t)["usd_per_hour"] if x.meets and x.cost(t) else math.inf for x in p))
        for base, alt in pairs[:MAX_WHAT_IFS]:
            out.append(_what_if(name, base, alt, t))
    return out


def _what_if(name: str, base: Evaluation, alt: Evaluation, t: Any) -> str:
    where = base.candidate.label()
    if not alt.meets:
        return f"{name} on {where}: hurts; without it the SLO is met, with it not ({alt.binding or 'pruned'})"
    if not base.meets:
        return f"{name} on {where}: needed; with it the SLO is met ({alt.replicas} replicas), without it not"
    b, a = base.cost(t), alt.cost(t)
    latency = (f"TTFT p99 {base.at_rate.ttft_p99_ms:,.0f} -> {alt.at_rate.ttft_p99_ms:,.0f} ms, "
               f"TPOT p99 {_ms(base.at_rate.tpot_p99_ms)} -> {_ms(alt.at_rate.tpot_p99_ms)}")
    if a is None or b is None:  # a GPU without a price (give one with --prices)
        return (f"{name} on {where}: {base.replicas} -> {alt.replicas} replicas, cost unknown "
                f"(no price for {base.candidate.gpu}), {latency}")
    verdict = ("pays" if a["usd_per_hour"] < b["usd_per_hour"] else
               "costs more" if a["usd_per_hour"] > b["usd_per_hour"] else "costs the same")
    return (f"{name} on {where}: {verdict}: {base.replicas} -> {alt.replicas} replicas, "
            f"${b['usd_per_hour']:,.2f} -> ${a['usd_per_hour']:,.2f}/h, {latency}")


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f} ms"

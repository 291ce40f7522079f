"""Two of the planner's checks from the issue: more GPUs never cost less per token at the same
utilisation (the replica search against forced replica counts), and a case where AIConfigurator's
static estimate and the planner's event simulation disagree (RESULTS.md section 19 explains it)."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pytest

from tokenpace.metrics.latency import e2e
from tokenpace.metrics.slo import parse_slo
from tokenpace.plan.candidates import Candidate
from tokenpace.plan.search import Traffic, evaluate, prepare, probe
from tokenpace.simulator.simulate import simulate
from tokenpace.workload.lengths import parse_length

MODEL = "llama-3.1-8b"


def test_more_gpus_never_cost_less_per_token_at_the_same_utilisation():
    slo = parse_slo("chat")
    cand = Candidate("h100-sxm", 1, "fp8", "vllm")
    base = Traffic(30.0, parse_length("512"), parse_length("128"))
    ev = evaluate(prepare(cand, MODEL, base, slo, 3.35), MODEL, base, slo)
    assert ev.meets and ev.replicas >= 1
    per_token = ev.cost(base)["usd_per_1m_output_tokens"]
    # The same utilisation on more GPUs: m times the traffic on m times the replicas is the same
    # per-replica load, so the search, free to choose, never needs more than m x the replicas, and
    # the cost per token never drops below the single deployment's by adding GPUs.
    for m in (2, 3):
        bigger = Traffic(30.0 * m, parse_length("512"), parse_length("128"))
        evm = evaluate(prepare(cand, MODEL, bigger, slo, 3.35), MODEL, bigger, slo)
        assert evm.meets and evm.replicas <= m * ev.replicas
        forced = probe(cand, MODEL, bigger, slo, bigger.rate / (m * ev.replicas))
        assert forced.attainment >= slo.attainment  # m x the GPUs at the same utilisation: still meets
    # More replicas than the fewest, at the same traffic: each meets the SLO and costs more per token.
    costs = []
    for extra in (0, 1, 2):
        k = ev.replicas + extra
        assert probe(cand, MODEL, base, slo, base.rate / k).attainment >= slo.attainment
        costs.append(dataclasses.replace(ev, replicas=k).cost(base)["usd_per_1m_output_tokens"])
    assert costs[0] == per_token and costs == sorted(costs) and len(set(costs)) == 3


def _aiconfigurator():
    from aiconfigurator_core.sdk.engine import EngineHandle

    for name in ("aiconfigurator_core", "aiconfigurator_core.sdk"):
        logging.getLogger(name).setLevel(logging.ERROR)
    return EngineHandle.compile("meta-llama/Meta-Llama-3.1-8B", "h100_sxm", "vllm", tp_size=1,
                                gemm_quant_mode="fp8", kvcache_quant_mode="fp8")


def test_aiconfigurators_static_batch_misses_the_ttft_slo_where_the_queueing_simulation_meets_it(kernel_tables):
    """Llama-3.1-8B on 1 x H100 FP8 (vLLM), 1,500 in / 300 out, 20 req/s Poisson on one replica.
    aiconfigurator answers "latency at this load" with a static batch of the mean concurrency, whose
    whole context phase is its TTFT; arrivals spread out in time are prefilled a few at a time."""
    aic = _aiconfigurator()
    slo = parse_slo("chat")
    cand = Candidate("h100-sxm", 1, "fp8", "vllm")
    traffic = Traffic(1.0, parse_length("1500"), parse_length("300"))
    rate = 20.0
    got = probe(cand, MODEL, traffic, slo, rate)
    assert got.attainment >= slo.attainment and got.ttft_p99_ms < slo.limits_ms()["ttft"]
    records = simulate(cand.sim_config(MODEL, seed=0), traffic.requests(rate, 1200)).records
    in_flight = rate * float(np.mean([e2e(r) for r in records[120:] if r.status == "ok"])) / 1e3  # Little's law
    context_ms, _generation_ms, _total = aic.run_static(batch_size=max(1, round(in_flight)), isl=1500, osl=300)
    assert context_ms > slo.limits_ms()["ttft"] > got.ttft_p99_ms
    assert context_ms > 2 * got.ttft_p99_ms  # not a near miss: the static batch prefills everyone at once

"""One candidate's capacity under the SLO, found with the event simulator (real queueing, not a
mean-field formula): the highest open-loop rate of the user's traffic shape at which one replica
still meets the SLO, then the replicas the traffic needs and what they cost.

The rate is found by bisection between 0 and the candidate's throughput ceiling (``Bounds.max_rps``).
Each probe serves the same requests (lengths drawn once, seeded) arriving at the probed rate for
``PROBE_SECONDS`` of virtual time (between ``MIN_PROBE`` and ``MAX_PROBE`` requests); the first
``WARMUP`` of them warm the engine up and are not judged. A probe meets the SLO when the fraction of
judged requests that are good reaches the SLO's attainment (metrics/slo.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenpace.metrics.latency import e2e, tpot, ttft
from tokenpace.metrics.slo import SLO
from tokenpace.plan.candidates import Bounds, Candidate, bounds
from tokenpace.plan.fit import memory_fit
from tokenpace.simulator.request import SimRequest
from tokenpace.simulator.simulate import simulate
from tokenpace.workload.arrivals import arrival_offsets
from tokenpace.workload.lengths import LengthSpec

PROBE_SECONDS = 120.0
MIN_PROBE, MAX_PROBE = 200, 2000
WARMUP = 0.1
BISECTIONS = 7  # the rate to within 1/128 of the ceiling


@dataclass(frozen=True)
class Traffic:
    rate: float  # requests/s, all replicas together
    input_tokens: LengthSpec
    output_tokens: LengthSpec
    arrival: str = "poisson"
    burstiness: float = 1.0
    seed: int = 0

    def lengths(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(self.seed)
        return self.input_tokens.sample(rng, n), self.output_tokens.sample(rng, n)

    def requests(self, rate: float, n: int) -> list[SimRequest]:
        ins, outs = self.lengths(n)
        times = arrival_offsets(rate, self.arrival, np.random.default_rng(self.seed + 1), burstiness=self.burstiness)
        return [SimRequest(int(i), int(o), arrival_s=t) for i, o, t in zip(ins, outs, times)]

    def to_dict(self) -> dict[str, Any]:
        return {"rate_rps": self.rate, "arrival": self.arrival, "burstiness": self.burstiness,
                "input_tokens": self.input_tokens.text, "output_tokens": self.output_tokens.text,
                "mean_input_tokens": self.input_tokens.mean, "mean_output_tokens": self.output_tokens.mean,
                "seed": self.seed}


@dataclass(frozen=True)
class Probe:
    rate: float
    attainment: float
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    e2e_p99_ms: float | None
    failing: str | None  # the limit most requests missed, when the SLO was not met

    def to_dict(self) -> dict[str, Any]:
        return {"rate_rps": self.rate, "attainment": self.attainment, "ttft_p99_ms": self.ttft_p99_ms,
                "tpot_p99_ms": self.tpot_p99_ms, "e2e_p99_ms": self.e2e_p99_ms, "failing": self.failing}


def probe(candidate: Candidate, model: str, traffic: Traffic, slo: SLO, rate: float) -> Probe:
    """Serve ``rate`` req/s of the traffic on one replica; judge the requests after the warm-up."""
    n = int(min(MAX_PROBE, max(MIN_PROBE, rate * PROBE_SECONDS)))
    config = candidate.sim_config(model, seed=traffic.seed)
    records = simulate(config, traffic.requests(rate, n)).records
    judged = records[int(len(records) * WARMUP):]
    values = {name: np.array([np.nan if (v := f(r)) is None else v for r in judged], dtype=np.float64)
              for name, f in (("ttft", ttft), ("tpot", tpot), ("e2e", e2e))}
    ok = np.array([r.status == "ok" for r in judged], dtype=bool)
    good = slo.good_mask(ok, values)
    attainment = float(good.mean()) if len(good) else 0.0
    failing = None
    if attainment < slo.attainment:
        misses = {m: int(np.sum(~(values[m] <= limit) & ~(np.isnan(values[m]) & (m == "tpot"))))
                  for m, limit in slo.limits_ms().items()}
        failing = max(misses, key=misses.get) if misses else "errors"
    return Probe(rate, attainment, _p99(values["ttft"]), _p99(values["tpot"]), _p99(values["e2e"]), failing)


def _p99(values: np.ndarray) -> float | None:
    values = values[~np.isnan(values)]
    return float(np.percentile(values, 99)) if len(values) else None


@dataclass
class Evaluation:
    candidate: Candidate
    price_usd_per_gpu_hour: float | None
    fit: dict[str, Any]
    bounds: Bounds | None = None
    max_rps: float | None = None  # per replica, under the SLO
    replicas: int | None = None
    at_rate: Probe | None = None  # one replica at traffic.rate / replicas
    binding: str | None = None  # what limits it: memory, ttft, tpot, e2e, throughput (met: the limit at max_rps)
    meets: bool = False
    probes: list[Probe] | None = None
    pruned: str | None = None

    def cost(self, traffic: Traffic) -> dict[str, float] | None:
        if self.replicas is None or self.price_usd_per_gpu_hour is None:
            return None
        per_hour = self.price_usd_per_gpu_hour * self.candidate.tp * self.replicas
        tokens_per_hour = traffic.rate * traffic.output_tokens.mean * 3600
        return {"usd_per_hour": per_hour, "gpus": self.candidate.tp * self.replicas,
                "usd_per_1m_output_tokens": per_hour / tokens_per_hour * 1e6}

    def optimistic_usd_per_hour(self, traffic: Traffic) -> float:
        """The cheapest this candidate could be: replicas from its throughput ceiling."""
        if self.bounds is None or self.price_usd_per_gpu_hour is None:
            return math.inf
        return self.price_usd_per_gpu_hour * self.candidate.tp * math.ceil(traffic.rate / self.bounds.max_rps)

    def to_dict(self, traffic: Traffic) -> dict[str, Any]:
        return {
            "candidate": self.candidate.to_dict(), "meets_slo": self.meets, "binding": self.binding,
            "pruned": self.pruned, "memory": self.fit,
            "bounds": None if self.bounds is None else self.bounds.to_dict(),
            "max_rps_per_replica": self.max_rps, "replicas": self.replicas,
            "headroom": (None if not self.meets or not self.max_rps
                         else self.replicas * self.max_rps / traffic.rate - 1.0),
            "at_rate": None if self.at_rate is None else self.at_rate.to_dict(),
            "cost": self.cost(traffic), "usd_per_gpu_hour": self.price_usd_per_gpu_hour,
            "probes": None if self.probes is None else [p.to_dict() for p in self.probes],
        }


def prepare(candidate: Candidate, model: str, traffic: Traffic, slo: SLO, price: float | None) -> Evaluation:
    """Memory fit and bounds, no simulation; ``binding`` set when either rules the candidate out."""
    ins, outs = traffic.lengths(MAX_PROBE)
    longest = int(np.percentile(ins + outs, 99))
    fit = memory_fit(model, candidate.gpu, candidate.weights, tp=candidate.tp, engine=candidate.engine,
                     context_tokens=longest, max_num_seqs=candidate.max_num_seqs)
    ev = Evaluation(candidate, price, fit.to_dict())
    if not fit.fits:
        ev.binding = "memory"
        return ev
    config = candidate.sim_config(model)
    kv_sequences = fit.kv_tokens // max(1, int(traffic.input_tokens.mean))
    ev.bounds = bounds(config, traffic.input_tokens.mean, traffic.output_tokens.mean, kv_sequences)
    limits = slo.limits_ms()
    if "ttft" in limits and ev.bounds.ttft_floor_ms > limits["ttft"]:
        ev.binding = "ttft"
    elif "tpot" in limits and ev.bounds.tpot_floor_ms > limits["tpot"]:
        ev.binding = "tpot"
    return ev


def evaluate(ev: Evaluation, model: str, traffic: Traffic, slo: SLO) -> Evaluation:
    """The simulated search for a prepared candidate (see the module doc)."""
    if ev.binding is not None or ev.bounds is None:
        return ev
    probes: list[Probe] = []
    lo, hi = 0.0, ev.bounds.max_rps
    first = probe(ev.candidate, model, traffic, slo, hi / 2 ** BISECTIONS)
    probes.append(first)
    if first.attainment < slo.attainment:  # not even at the lightest load
        ev.binding, ev.probes = first.failing, probes
        return ev
    lo = first.rate
    for _ in range(BISECTIONS):
        mid = (lo + hi) / 2
        p = probe(ev.candidate, model, traffic, slo, mid)
        probes.append(p)
        if p.attainment >= slo.attainment:
            lo = mid
        else:
            hi = mid
    ev.max_rps, ev.probes = lo, probes
    above = [p for p in probes if p.rate > lo and p.failing]
    ev.binding = min(above, key=lambda p: p.rate).failing if above else "throughput"
    ev.replicas = max(1, math.ceil(traffic.rate / lo - 1e-9))
    for _ in range(3):  # a probe at a lower rate can still miss (another arrival sample): add a replica
        ev.at_rate = probe(ev.candidate, model, traffic, slo, traffic.rate / ev.replicas)
        ev.meets = ev.at_rate.attainment >= slo.attainment
        if ev.meets:
            break
        ev.replicas += 1
    return ev

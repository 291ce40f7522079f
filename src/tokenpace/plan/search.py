"""One candidate's capacity under the SLO, found with the event simulator (real queueing, not a
mean-field formula): the fewest replicas that serve the user's traffic within the SLO, what they
cost, and for the finalists the highest rate one replica serves.

A probe serves ``rate`` req/s of the traffic shape on one replica: the same requests each time
(lengths drawn once, seeded), arriving at the probed rate for ``PROBE_SECONDS`` of virtual time
(between ``MIN_PROBE`` and ``MAX_PROBE`` requests); the first ``WARMUP`` of them warm the engine up
and are not judged. It meets the SLO when the fraction of judged requests that are good reaches
the SLO's attainment (metrics/slo.py).

Replicas (``evaluate``): k replicas share the traffic, so one replica sees rate / k. Starting from
the fewest the throughput ceiling allows, k doubles until a probe meets the SLO, then a bisection
finds the fewest that do. A first probe at 1/128 of the ceiling settles a candidate that cannot
meet the SLO at any size (``binding``: the limit most requests missed). Capacity (``capacity``, finalists only):
bisection on the rate between the highest seen to meet and the lowest seen to miss.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from tokenpace.errors import UsageError
from tokenpace.metrics.latency import e2e, tpot, ttft
from tokenpace.metrics.slo import SLO
from tokenpace.plan.candidates import Bounds, Candidate, bounds
from tokenpace.plan.fit import memory_fit
from tokenpace.simulator.request import SimRequest
from tokenpace.simulator.simulate import simulate
from tokenpace.workload.arrivals import arrival_offsets
from tokenpace.workload.datasets import TRACE_BLOCK_TOKENS
from tokenpace.workload.lengths import LengthSpec
from tokenpace.workload.plan import trace_block_hashes
from tokenpace.workload.shared_prefix import SharedPrefixSpec

PROBE_SECONDS = 60.0
MIN_PROBE, MAX_PROBE = 200, 1200
WARMUP = 0.1
BISECTIONS = 7  # "nearly idle": 1/128 of the throughput ceiling
CAPACITY_BISECTIONS = 4  # a finalist's capacity to within 1/16 of its bracket


@dataclass(frozen=True)
class Traffic:
    rate: float  # requests/s, all replicas together
    input_tokens: LengthSpec  # with shared_prefix: the part after the group's prefix
    output_tokens: LengthSpec
    arrival: str = "poisson"
    burstiness: float = 1.0
    seed: int = 0
    # From a dataset: each request's (input, output) tokens, drawn together so that long prompts keep
    # their own replies; input_tokens and output_tokens then hold the same values, for their means.
    pairs: tuple[tuple[int, int], ...] | None = None
    dataset: str | None = None
    # Shared prefixes, two ways: every request starts with one of ``groups`` prefixes of
    # ``prefix_tokens`` (request i has group i mod groups, as bench's interleaved order), or a trace's
    # 512-token block ids, one tuple per pair (``workload reuse --emit-trace`` writes such a trace).
    shared_prefix: SharedPrefixSpec | None = None
    hash_ids: tuple[tuple[int, ...], ...] | None = None

    @property
    def prefix_tokens(self) -> int:
        return 0 if self.shared_prefix is None else self.shared_prefix.prefix_tokens

    @property
    def mean_input(self) -> float:
        """Mean prompt tokens, prefix included."""
        return self.input_tokens.mean + self.prefix_tokens

    @property
    def shares_prefixes(self) -> bool:
        return self.shared_prefix is not None or any(self.hash_ids or ())

    def mean_uncached_input(self) -> float:
        """The mean prompt tokens that even an unbounded prefix cache must compute (a floor: with a
        shared prefix, the part after it; in a trace, the tokens past its hashed full blocks)."""
        if self.shared_prefix is not None:
            return self.input_tokens.mean
        if self.pairs is not None and self.hash_ids is not None:
            return float(np.mean([max(1, i - TRACE_BLOCK_TOKENS * min(len(h), i // TRACE_BLOCK_TOKENS))
                                  for (i, _), h in zip(self.pairs, self.hash_ids)]))
        return self.mean_input

    def lengths(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Prompt (prefix included) and output tokens of the first ``n`` requests."""
        if self.pairs is not None:
            rows = np.asarray(self.pairs, dtype=np.int64)[_draws(len(self.pairs), self.seed, n)]
            return rows[:, 0].copy(), rows[:, 1].copy()
        ins, outs = _lengths(self.input_tokens, self.output_tokens, self.seed, n)
        return ins + self.prefix_tokens, outs

    def requests(self, rate: float, n: int, block_tokens: int = 16) -> list[SimRequest]:
        ins, outs = self.lengths(n)
        times = arrival_offsets(rate, self.arrival, np.random.default_rng(self.seed + 1), burstiness=self.burstiness)
        if self.shared_prefix is not None:
            groups, p = self.shared_prefix.groups, self.prefix_tokens
            return [SimRequest(int(i), int(o), arrival_s=t, prefix_group=k % groups, prefix_tokens=p)
                    for k, (i, o, t) in enumerate(zip(ins, outs, times))]
        if self.hash_ids is not None and self.pairs is not None:
            rows = _draws(len(self.pairs), self.seed, n)
            return [SimRequest(int(i), int(o), arrival_s=t,
                               prompt_block_hashes=trace_block_hashes(self.hash_ids[r], int(i), block_tokens))
                    for r, i, o, t in zip(rows, ins, outs, times)]
        return [SimRequest(int(i), int(o), arrival_s=t) for i, o, t in zip(ins, outs, times)]

    def to_dict(self) -> dict[str, Any]:
        return {"rate_rps": self.rate, "arrival": self.arrival, "burstiness": self.burstiness,
                "input_tokens": self.input_tokens.text, "output_tokens": self.output_tokens.text,
                "mean_input_tokens": self.mean_input, "mean_output_tokens": self.output_tokens.mean,
                "dataset": self.dataset, "dataset_requests": None if self.pairs is None else len(self.pairs),
                "shared_prefix": None if self.shared_prefix is None else dataclasses.asdict(self.shared_prefix),
                "trace_block_ids": self.hash_ids is not None,
                "mean_uncached_input_tokens": self.mean_uncached_input() if self.shares_prefixes else None,
                "seed": self.seed}


@lru_cache(maxsize=8)
def _lengths(ins: LengthSpec, outs: LengthSpec, seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return ins.sample(rng, n), outs.sample(rng, n)


@lru_cache(maxsize=8)
def _draws(size: int, seed: int, n: int) -> np.ndarray:
    """Which dataset entries the first ``n`` requests are (seeded, with replacement)."""
    return np.random.default_rng(seed).integers(0, size, size=n)


def dataset_traffic(rate: float, path: str, *, tokenizer: str | None = None, output_tokens: str = "256",
                    arrival: str = "poisson", burstiness: float = 1.0, seed: int = 0,
                    trace: bool = False) -> Traffic:
    """The traffic shape of a dataset file (the formats bench reads): each entry's prompt length
    (exact with ``tokenizer``, else words) and output length (the file's, else ``output_tokens``).
    ``trace``: a trace file (bench --trace): its lengths and block ids; its timestamps are not used
    (the plan's rate and arrival process replace them)."""
    from tokenpace.config import BenchConfig
    from tokenpace.workload import plan_requests, workload_from_config

    source = {"trace": path} if trace else {"dataset": path}
    flag = "--trace" if trace else "--dataset"
    spec = workload_from_config(BenchConfig(**source, tokenizer=tokenizer, output_tokens=output_tokens,
                                            seed=seed, progress=False))
    planned = list(plan_requests(spec, text=False))
    pairs = tuple((p.input_tokens, p.output_tokens) for p in planned)
    if not pairs:
        raise UsageError(f"{flag}: {path}: no request in it")
    hash_ids = tuple(tuple(p.block_hashes or ()) for p in planned) if trace else None
    ins, outs = (LengthSpec("empirical", (), f"{path} ({what})", tuple(v)) for what, v in
                 (("prompts", (a for a, _ in pairs)), ("outputs", (b for _, b in pairs))))
    return Traffic(rate, ins, outs, arrival, burstiness, seed, pairs=pairs, dataset=path, hash_ids=hash_ids)


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
    records = simulate(config, traffic.requests(rate, n, config.block_size)).records
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
    fit = memory_fit(model, candidate.gpu, candidate.weights, kv_dtype=candidate.kv_dtype, tp=candidate.tp,
                     engine=candidate.engine, context_tokens=longest, max_num_seqs=candidate.max_num_seqs)
    ev = Evaluation(candidate, price, fit.to_dict())
    if not fit.fits:
        ev.binding = "memory"
        return ev
    config = candidate.sim_config(model)
    # With prefix caching, the floors assume every shareable block is a hit (bounds stay optimistic).
    computed = traffic.mean_uncached_input() if candidate.prefix_caching else traffic.mean_input
    kv_sequences = fit.kv_tokens // max(1, int(computed))
    try:
        ev.bounds = bounds(config, traffic.mean_input, traffic.output_tokens.mean, kv_sequences,
                           prefill_tokens=computed)
    except UsageError as exc:  # the kernel predictor has no measured table for this GPU or model
        ev.binding, ev.pruned = "predictor", str(exc)
        return ev
    limits = slo.limits_ms()
    if "ttft" in limits and ev.bounds.ttft_floor_ms > limits["ttft"]:
        ev.binding = "ttft"
    elif "tpot" in limits and ev.bounds.tpot_floor_ms > limits["tpot"]:
        ev.binding = "tpot"
    return ev


def evaluate(ev: Evaluation, model: str, traffic: Traffic, slo: SLO,
             max_replicas: int | None = None) -> Evaluation:
    """The fewest replicas that meet the SLO (see the module doc). ``max_replicas``: more than this
    would cost more than the finalists found so far; the search stops there (``pruned``)."""
    if ev.binding is not None or ev.bounds is None:
        return ev
    probes: list[Probe] = []

    def at(k: int) -> Probe:
        p = probe(ev.candidate, model, traffic, slo, traffic.rate / k)
        probes.append(p)
        return p

    ev.probes = probes
    lightest = ev.bounds.max_rps / 2 ** BISECTIONS
    fail, k = 0, max(1, math.ceil(traffic.rate / ev.bounds.max_rps - 1e-9))  # fewer: past the ceiling
    if max_replicas is not None and k > max_replicas:
        ev.pruned = f"{k} replicas at least (its throughput ceiling) would cost more than the finalists"
        return ev
    idle = probe(ev.candidate, model, traffic, slo, lightest)  # first: one probe settles the hopeless
    probes.append(idle)
    if idle.attainment < slo.attainment:
        ev.binding = idle.failing
        return ev
    while True:
        if max_replicas is not None and k > max_replicas:
            if fail >= max_replicas:
                ev.pruned = (f"{fail} replicas miss the SLO ({probes[-1].failing}); more would cost more "
                             f"than the finalists")
                ev.binding = probes[-1].failing
                return ev
            k = max_replicas
        p = at(k)
        if p.attainment >= slo.attainment:
            break
        if traffic.rate / k <= lightest:  # a miss at a load the idle probe met: noise; take the idle one
            k = math.ceil(traffic.rate / lightest)
            break
        fail, k = k, 2 * k
    good = k
    while good - fail > 1:  # the fewest between the last miss and the first meet
        mid = (fail + good) // 2
        if at(mid).attainment >= slo.attainment:
            good = mid
        else:
            fail = mid
    ev.replicas = good
    ev.at_rate = next((p for p in probes if p.rate == traffic.rate / good), None) or at(good)
    ev.meets = ev.at_rate.attainment >= slo.attainment
    if not ev.meets:
        ev.binding = ev.at_rate.failing
    return ev


def capacity(ev: Evaluation, model: str, traffic: Traffic, slo: SLO) -> Evaluation:
    """For a finalist: the highest rate one replica serves within the SLO, by bisection between
    what it was seen to meet and what it was seen to miss (or its throughput ceiling), and the
    limit that binds just above it."""
    if not ev.meets or ev.bounds is None or ev.replicas is None:
        return ev
    probes = ev.probes if ev.probes is not None else []
    lo = traffic.rate / ev.replicas
    missed = [p for p in probes if p.rate > lo and p.attainment < slo.attainment]
    hi = min((p.rate for p in missed), default=max(ev.bounds.max_rps, lo))
    binding = min(missed, key=lambda p: p.rate).failing if missed else None
    for _ in range(CAPACITY_BISECTIONS):
        mid = (lo + hi) / 2
        p = probe(ev.candidate, model, traffic, slo, mid)
        probes.append(p)
        if p.attainment >= slo.attainment:
            lo = mid
        else:
            hi, binding = mid, p.failing
    ev.max_rps, ev.probes = lo, probes
    ev.binding = binding or "throughput"
    return ev

"""``run_plan``: every candidate priced, cheapest first, with the simulator where bounds cannot decide.

Order of work: memory fit and idle-engine bounds for all (no simulation); candidates that pass are
simulated in order of the cheapest they could possibly be (replicas from their throughput ceiling),
in parallel worker processes, a batch at a time; once ``top`` candidates meet the SLO, a candidate
whose optimistic cost already exceeds the ``top``-th cheapest found is not simulated (``pruned``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from tokenpace.metrics.slo import SLO
from tokenpace.plan.answer import answer
from tokenpace.plan.candidates import Candidate
from tokenpace.plan.prices import Price
from tokenpace.plan.search import Evaluation, Traffic, capacity, evaluate, prepare


@dataclass
class PlanConfig:
    model: str
    traffic: Traffic
    slo: SLO
    candidates: list[Candidate]
    prices: dict[str, Price]
    top: int = 10
    jobs: int = 0  # worker processes; 0: one per CPU
    growth: float | None = None  # a traffic growth factor to plan for as a what-if
    calibration: str | None = None  # the calibration file, for the record
    predictor: str = "roofline"  # the step-cost model the candidates use
    extra: dict[str, Any] = field(default_factory=dict)


def run_plan(config: PlanConfig, on_progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    t, slo, model = config.traffic, config.slo, config.model
    prepared = [prepare(c, model, t, slo, _price(config, c)) for c in config.candidates]
    todo = sorted((e for e in prepared if e.binding is None), key=lambda e: e.optimistic_usd_per_hour(t))
    done = [e for e in prepared if e.binding is not None]
    jobs = config.jobs or os.cpu_count() or 1
    met: list[float] = []  # usd/h of those that meet the SLO
    with _pool(jobs) as pool:
        i = 0
        while i < len(todo):
            threshold = sorted(met)[config.top - 1] if len(met) >= config.top else None
            batch = []
            while i < len(todo) and len(batch) < 2 * jobs:
                e = todo[i]
                i += 1
                if threshold is not None and e.optimistic_usd_per_hour(t) > threshold:
                    e.pruned = (f"its throughput ceiling already costs ${e.optimistic_usd_per_hour(t):,.2f}/h, more "
                                f"than the {config.top} cheapest that meet the SLO")
                    done.append(e)
                    continue
                cap = None
                if threshold is not None and e.price_usd_per_gpu_hour:
                    cap = int(threshold // (e.price_usd_per_gpu_hour * e.candidate.tp))
                batch.append((e, model, t, slo, cap))
            for e in _map(pool, _evaluate, batch):
                done.append(e)
                cost = e.cost(t)
                if e.meets and cost is not None:
                    met.append(cost["usd_per_hour"])
            if on_progress is not None:
                on_progress(len(done), len(prepared))
        finalists = sorted((e for e in done if e.meets), key=lambda e: e.cost(t)["usd_per_hour"]
                           if e.cost(t) else float("inf"))[:config.top]
        sized = {e.candidate: e for e in _map(pool, _capacity, [(e, model, t, slo) for e in finalists])}
    return answer(config, [sized.get(e.candidate, e) for e in done])  # workers return copies


def _map(pool: Any, fn: Callable, items: list) -> list:
    return list(pool.map(fn, items)) if pool is not None else [fn(x) for x in items]


def _price(config: PlanConfig, c: Candidate) -> float | None:
    p = config.prices.get(c.gpu)
    return None if p is None else p.usd_per_gpu_hour


def _evaluate(args: tuple[Evaluation, str, Traffic, SLO, int | None]) -> Evaluation:
    e, model, t, slo, cap = args
    return evaluate(e, model, t, slo, cap)


def _capacity(args: tuple[Evaluation, str, Traffic, SLO]) -> Evaluation:
    e, model, t, slo = args
    return capacity(e, model, t, slo)


class _NoPool:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def _pool(jobs: int) -> Any:
    return _NoPool() if jobs <= 1 else ProcessPoolExecutor(max_workers=jobs)


__all__ = ["PlanConfig", "run_plan"]

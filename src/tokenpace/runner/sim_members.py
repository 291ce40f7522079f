"""`tokenpace sim --members N`: the same run under N draws of step-time noise, and how far each
headline figure moves between them.

A simulation prices every step at its mean, so its figures are points; a real engine's steps vary,
and where a percentile sits at a tipping point (two prompts sharing a step half the time, a queue
that forms now and then) its value moves from run to run by more than the steps do. Members run
the same workload with ``--step-noise`` drawn from seeds K, K+1, ... K+N-1 (``SimConfig.noise_seed``
and on): member K is the run whose files are written, the others are only summarized. The section
gives each figure's values by member, their min, median and max, and the spread (max − min) as a
percentage of the median.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any

# (label, path into the summary): the figures a run's headline reports.
FIGURES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ttft_p50_ms", ("latency_ms", "ttft", "p50")), ("ttft_p99_ms", ("latency_ms", "ttft", "p99")),
    ("tpot_p50_ms", ("latency_ms", "tpot", "p50")), ("tpot_p99_ms", ("latency_ms", "tpot", "p99")),
    ("itl_p50_ms", ("latency_ms", "itl", "p50")), ("e2e_p50_ms", ("latency_ms", "e2e", "p50")),
    ("e2e_p99_ms", ("latency_ms", "e2e", "p99")), ("output_tokens_s", ("throughput", "output_tokens_s")),
    ("requests_s", ("throughput", "requests_s")),
)


def figures(summary: dict[str, Any]) -> dict[str, float | None]:
    """A run's headline figures (None where the run has none, e.g. TPOT of one-token outputs)."""
    out: dict[str, float | None] = {}
    for label, path in FIGURES:
        value: Any = summary
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        out[label] = float(value) if isinstance(value, (int, float)) else None
    return out


def other_members(config: Any, members: int) -> list[dict[str, float | None]]:
    """The figures of members 2..``members`` of ``config`` (a SimRunConfig with step noise): each
    the same run with the next noise seed, simulated without files or progress."""
    from tokenpace.runner.simulate import run_sim

    load = dataclasses.replace(config.load, progress=False)
    out = []
    for m in range(1, members):
        engine = dataclasses.replace(config.engine, noise_seed=config.engine.noise_seed + m)
        out.append(figures(run_sim(dataclasses.replace(config, load=load, engine=engine), write=False).summary))
    return out


def members_section(first: dict[str, float | None], others: list[dict[str, float | None]],
                    step_noise: float, noise_seed: int) -> dict[str, Any]:
    """The result's ``engine.members``: each figure by member (the written run first), with its
    min, median, max and spread."""
    runs = [first, *others]
    by_figure: dict[str, Any] = {}
    for label, _ in FIGURES:
        values = [r[label] for r in runs]
        present = [v for v in values if v is not None]
        if not present:
            continue
        mid = statistics.median(present)
        by_figure[label] = {"values": values, "min": min(present), "median": mid, "max": max(present),
                            "spread_pct": round((max(present) - min(present)) / mid * 100, 2) if mid else None}
    return {"members": len(runs), "step_noise": step_noise, "noise_seeds": list(range(noise_seed, noise_seed + len(runs))),
            "figures": by_figure,
            "definition": "the same workload simulated once per noise seed, each step's time times a lognormal "
                          "factor of mean 1 (--step-noise: its log's standard deviation); the files are the first "
                          "member's; spread_pct = (max − min) / median × 100"}

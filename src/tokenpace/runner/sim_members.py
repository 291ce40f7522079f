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

from tokenpace.metrics.summary import figure_value

# (key, path in a summary as `compare --fail-if` names it, label): the figures a run's headline reports.
FIGURES: tuple[tuple[str, str, str], ...] = (
    ("ttft_p50_ms", "ttft.p50", "TTFT p50 (ms)"), ("ttft_p99_ms", "ttft.p99", "TTFT p99 (ms)"),
    ("tpot_p50_ms", "tpot.p50", "TPOT p50 (ms)"), ("tpot_p99_ms", "tpot.p99", "TPOT p99 (ms)"),
    ("itl_p50_ms", "itl.p50", "ITL p50 (ms)"), ("e2e_p50_ms", "e2e.p50", "E2E p50 (ms)"),
    ("e2e_p99_ms", "e2e.p99", "E2E p99 (ms)"), ("output_tokens_s", "throughput.output_tokens_s", "output tok/s"),
    ("requests_s", "throughput.requests_s", "req/s"),
)


def figures(summary: dict[str, Any]) -> dict[str, float | None]:
    """A run's headline figures (None where the run has none, e.g. TPOT of one-token outputs)."""
    return {key: figure_value(summary, path) for key, path, _ in FIGURES}


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
    for key, _, label in FIGURES:
        values = [r[key] for r in runs]
        present = [v for v in values if v is not None]
        if not present:
            continue
        mid = statistics.median(present)
        by_figure[key] = {"label": label, "values": values, "min": min(present), "median": mid, "max": max(present),
                            "spread_pct": round((max(present) - min(present)) / mid * 100, 2) if mid else None}
    return {"members": len(runs), "step_noise": step_noise, "noise_seeds": list(range(noise_seed, noise_seed + len(runs))),
            "figures": by_figure,
            "definition": "the same workload simulated once per noise seed, each step's time times a lognormal "
                          "factor of mean 1 (--step-noise: its log's standard deviation); the files are the first "
                          "member's; spread_pct = (max − min) / median × 100"}

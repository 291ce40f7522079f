"""Compare runs: every key figure side by side, with delta and relative change against the first
(base) run, and for latency percentiles whether the difference is beyond run-to-run noise
(``reports.bootstrap``). Measured and simulated runs compare the same way: both are summaries of
the same records. Runs of the same requests (``reports.pairing``: a measured run and its simulation)
have their per-request percentiles judged with the requests resampled in pairs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tokenpace.metrics.latency import PER_REQUEST
from tokenpace.reports.bootstrap import NoiseVerdict, paired_difference, percentile_difference
from tokenpace.reports.gates import Gate, GateResult, figure_value, judge, summary_path
from tokenpace.reports.pairing import paired_samples_ms, same_requests
from tokenpace.results import RunData
from tokenpace.reports.series import metric_samples_ms

# (path, label, unit, better): better is "lower" or "higher", for colouring only.
KEY_FIGURES: tuple[tuple[str, str, str, str], ...] = (
    *((f"{m}.{s}", f"{label} {s}", "ms", "lower")
      for m, label in (("ttft", "TTFT"), ("ttft_from_scheduled", "TTFT sched"), ("tpot", "TPOT"),
                       ("itl", "ITL"), ("e2e", "E2E"))
      for s in ("p50", "p90", "p99")),
    ("throughput.output_tokens_s", "output tokens/s", "tok/s", "higher"),
    ("throughput.total_tokens_s", "total tokens/s", "tok/s", "higher"),
    ("throughput.requests_s", "requests/s", "req/s", "higher"),
    ("goodput.requests_s", "goodput requests/s", "req/s", "higher"),
    ("goodput.output_tokens_s", "goodput tokens/s", "tok/s", "higher"),
    ("goodput.fraction", "goodput fraction", "", "higher"),
    ("cost.usd_per_1m_output_tokens", "$ per 1M output tokens", "$", "lower"),
    ("cost.usd_per_1m_good_output_tokens", "$ per 1M good tokens", "$", "lower"),
    ("counts.error", "errors", "", "lower"),
    ("counts.timeout", "timeouts", "", "lower"),
)
# Only p50 and p99 are judged: each judgement is wrong 5% of the time by chance, so fewer is better.
NOISE_QUANTILES = {"p50": 0.5, "p99": 0.99}


@dataclass(frozen=True)
class Cell:
    value: float | None
    delta: float | None = None
    relative: float | None = None  # fraction: 0.1 = +10%
    noise: NoiseVerdict | None = None


@dataclass
class Row:
    path: str
    label: str
    unit: str
    better: str
    cells: list[Cell] = field(default_factory=list)  # one per run, the base first


@dataclass
class Comparison:
    runs: list[RunData]
    rows: list[Row]
    gates: list[GateResult]
    # Per run, whether it holds the base's requests (judged in pairs); the base's own entry is False.
    paired: list[bool] = field(default_factory=list)

    @property
    def failed_gates(self) -> list[GateResult]:
        return [g for g in self.gates if g.failed]


def compare_runs(runs: Sequence[RunData], gates: Sequence[Gate] = ()) -> Comparison:
    base, *others = runs
    summaries = [r.doc.get("summary") or {} for r in runs]
    samples: dict[tuple[int, str], np.ndarray] = {}
    paired = [False] + [same_requests(base.records, other.records) for other in others]

    def samples_of(i: int, metric: str) -> np.ndarray:
        if (i, metric) not in samples:
            samples[(i, metric)] = metric_samples_ms(runs[i].records, metric)
        return samples[(i, metric)]

    pairs: dict[tuple[int, str], tuple[np.ndarray, np.ndarray]] = {}

    def pairs_of(i: int, metric: str) -> tuple[np.ndarray, np.ndarray] | None:
        """Run i's samples aligned with the base's, where the runs pair and the metric is per request."""
        if not paired[i] or metric not in PER_REQUEST:
            return None
        if (i, metric) not in pairs:  # p50 and p99 judge the same pairs
            pairs[(i, metric)] = paired_samples_ms(base.records, runs[i].records, metric)
        return pairs[(i, metric)]

    rows = []
    for path, label, unit, better in KEY_FIGURES:
        values = [figure_value(s, path) for s in summaries]
        if all(v is None for v in values):
            continue
        row = Row(path, label, unit, better, [Cell(values[0])])
        for i, value in enumerate(values[1:], start=1):
            row.cells.append(_cell(values[0], value,
                                   _noise(path, samples_of, pairs_of, i) if value is not None else None))
        rows.append(row)
    results = [judge(gate, other.label, summaries[0], summaries[i], base.label)
               for gate in gates for i, other in enumerate(others, start=1)]
    return Comparison(list(runs), rows, results, paired)


def _cell(base: float | None, value: float | None, noise: NoiseVerdict | None) -> Cell:
    if base is None or value is None:
        return Cell(value)
    delta = value - base
    relative = delta / abs(base) if base else None
    return Cell(value, delta, relative, noise)


def _noise(path: str, samples_of, pairs_of, i: int) -> NoiseVerdict | None:
    keys = summary_path(path)
    if keys[0] != "latency_ms" or len(keys) != 3 or keys[2] not in NOISE_QUANTILES:
        return None
    pairs = pairs_of(i, keys[1])
    if pairs is not None:
        return paired_difference(*pairs, NOISE_QUANTILES[keys[2]])
    base, new = samples_of(0, keys[1]), samples_of(i, keys[1])
    if base.size == 0 or new.size == 0:
        return NoiseVerdict("no records", None)
    return percentile_difference(base, new, NOISE_QUANTILES[keys[2]])

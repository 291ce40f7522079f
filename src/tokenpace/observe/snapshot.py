"""One scrape of an engine's ``/metrics``, parsed into the quantities of its table.

Parsing uses prometheus_client's text parser. It is pure Python and slow (about 11 ms for the
built-in server's 240 lines, several times that for a real vLLM), and the poller runs on the
benchmark client's event loop, where a stall delays the reading of chunks and so the measured
latencies. So a scrape keeps only the lines of the families its engine's table names (a cheap
scan by name) before they are parsed; histograms, needed only at the start and end of a run,
are parsed only then (``parse(..., histograms=True)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from .families import ENGINE_FAMILIES, QUANTITIES, sample_names
from .histograms import Histogram

Samples = dict[str, list[tuple[dict[str, str], float]]]


@dataclass
class Snapshot:
    t_ns: int  # monotonic time the scrape was taken
    values: dict[str, float] = field(default_factory=dict)  # gauges and counters of the table
    histograms: dict[str, Histogram] = field(default_factory=dict)


def all_sample_names(text: str) -> set[str]:
    """Every sample name in an exposition (full parse: used to detect the engine)."""
    return {s.name for family in text_string_to_metric_families(text) for s in family.samples}


def select_lines(text: str, wanted: frozenset[str]) -> str:
    """The sample lines (and ``# TYPE`` lines) of the wanted sample names only."""
    kept = []
    for line in text.splitlines():
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) == 4 and parts[1] == "TYPE" and (
                    parts[2] in wanted or parts[2] + "_bucket" in wanted):
                kept.append(line)
            continue
        end = len(line)
        for stop in ("{", " "):
            at = line.find(stop)
            if 0 <= at < end:
                end = at
        if line[:end] in wanted:
            kept.append(line)
    return "\n".join(kept) + "\n"


def samples(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, float(s.value)))
    return out


def extract(engine: str, found: Samples, *, histograms: bool) -> tuple[dict[str, float], dict[str, Histogram]]:
    """The engine table's quantities in these samples: the first name present for each."""
    values: dict[str, float] = {}
    hists: dict[str, Histogram] = {}
    for key, names in ENGINE_FAMILIES[engine].items():
        q = QUANTITIES[key]
        if q.kind == "histogram":
            if histograms:
                h = next((h for name in names if (h := _histogram(found, name)) is not None), None)
                if h is not None:
                    hists[key] = h
            continue
        for name in names:
            rows = next((found[s] for s in sample_names(q.kind, name) if s in found), None)
            if rows:
                vals = [v for _, v in rows if math.isfinite(v)]
                if vals:
                    values[key] = max(vals) if q.combine == "max" else sum(vals)
                break
    return values, hists


def _histogram(found: Samples, name: str) -> Histogram | None:
    rows = found.get(name + "_bucket")
    if not rows:
        return None
    by_bound: dict[float, float] = {}
    for labels, value in rows:  # summed over label sets other than `le`
        try:
            bound = float(labels.get("le", "nan"))
        except ValueError:
            continue
        if not math.isnan(bound):
            by_bound[bound] = by_bound.get(bound, 0.0) + value
    if math.inf not in by_bound:
        return None
    buckets = tuple(sorted(by_bound.items()))
    count = sum(v for _, v in found.get(name + "_count", ())) or buckets[-1][1]
    total = sum(v for _, v in found.get(name + "_sum", ()))
    return Histogram(buckets, count, total)


def parse(text: str, engine: str, t_ns: int, *, histograms: bool) -> Snapshot:
    """A snapshot of the engine's quantities; histograms only when asked for."""
    values, hists = extract(engine, samples(text), histograms=histograms)
    return Snapshot(t_ns, values, hists)


@dataclass
class Selector:
    """Keeps the lines an engine's table needs: gauges and counters always, histograms on demand."""

    engine: str
    scalars: frozenset[str] = frozenset()
    everything: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        table = ENGINE_FAMILIES[self.engine]
        self.everything = frozenset(s for key, names in table.items() for n in names
                                    for s in sample_names(QUANTITIES[key].kind, n))
        self.scalars = frozenset(s for key, names in table.items() if QUANTITIES[key].kind != "histogram"
                                 for n in names for s in sample_names(QUANTITIES[key].kind, n))

    def parse(self, text: str, t_ns: int, *, histograms: bool) -> Snapshot:
        kept = select_lines(text, self.everything if histograms else self.scalars)
        return parse(kept, self.engine, t_ns, histograms=histograms)

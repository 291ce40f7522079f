"""How close each operator class comes to the hardware's peak: catalog data (data/efficiency.json,
written by hand with a source for each figure, and data/efficiency_measured.json, derived from
measured kernel tables by ``scripts/derive_efficiency.py``).

An entry names GPUs (ids, or "*"), a compute precision ("bf16", "fp8" or "*") and optionally an
engine ("vllm", "sglang", "trtllm": the ``--engine`` preset; "*" or absent: any, and the only
entries that apply without a preset), and gives some of the figures below, each as
``{"value": x, "source": "..."}``. For each figure the most specific entry that gives it wins: GPU,
then precision, then engine (GPU and precision and engine, then GPU and precision, ..., then "*",
the fallback every figure has); at equal specificity the later entry (a user's file comes last).
``weight_bandwidth`` may also give ``by_rows``, ``[[rows, efficiency], ...]`` with rows ascending:
the efficiency of streaming a GEMM's weights at that many rows (tokens), interpolated linearly
between them and held past either end, as measured GEMMs leave the memory-bound regime gradually.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenpace.errors import UsageError
from tokenpace.simulator.catalog._files import builtin_entries, entries_of, normalize, read_json

FIGURES = ("gemm_flops", "weight_bandwidth", "attention_prefill_flops", "attention_decode_bandwidth",
           "elementwise_bandwidth", "allreduce_bus_bandwidth", "allreduce_base_latency_s",
           "allreduce_hop_latency_s")
_FRACTIONS = FIGURES[:6]
BUILTIN_FILES = ("efficiency", "efficiency_measured")  # data/<name>.json, in this order


@dataclass(frozen=True, slots=True)
class Efficiency:
    """The figures for one GPU, compute precision and engine, and where each came from."""

    gemm_flops: float
    weight_bandwidth: float
    attention_prefill_flops: float
    attention_decode_bandwidth: float
    elementwise_bandwidth: float
    allreduce_bus_bandwidth: float
    allreduce_base_latency_s: float
    allreduce_hop_latency_s: float
    sources: tuple[tuple[str, str], ...] = ()  # (figure, source)
    weight_bandwidth_by_rows: tuple[tuple[int, float], ...] = ()  # (rows, efficiency); () for one value

    def weight_bandwidth_at(self, rows: float) -> float:
        """The weight-streaming efficiency of a GEMM of ``rows`` rows: ``by_rows`` interpolated
        (held past its ends), else the one value."""
        curve = self.weight_bandwidth_by_rows
        if not curve:
            return self.weight_bandwidth
        xs = [m for m, _ in curve]
        i = bisect.bisect_left(xs, rows)
        if i == 0:
            return curve[0][1]
        if i == len(xs):
            return curve[-1][1]
        (m0, e0), (m1, e1) = curve[i - 1], curve[i]
        return e0 + (e1 - e0) * (rows - m0) / (m1 - m0)

    def to_dict(self) -> dict[str, Any]:
        src = dict(self.sources)
        out = {f: {"value": getattr(self, f), "source": src.get(f, "")} for f in FIGURES}
        if self.weight_bandwidth_by_rows:
            out["weight_bandwidth"]["by_rows"] = [list(p) for p in self.weight_bandwidth_by_rows]
        return out


def efficiency_entries(extra: str | Path | None = None) -> list[dict[str, Any]]:
    """The built-in entries, then a user's (later entries win at the same specificity)."""
    entries = [e for name in BUILTIN_FILES for e in builtin_entries("efficiency", name)]
    if extra is not None:
        entries = entries + entries_of(read_json(extra), "efficiency")
    return entries


def get_efficiency(gpu_id: str, compute: str, extra: str | Path | None = None,
                   engine: str | None = None) -> Efficiency:
    """Each figure from the most specific entry for ``gpu_id`` computing in ``compute`` under the
    ``engine`` preset (None: entries for any engine only)."""
    gpu_id, compute = normalize(gpu_id), normalize(compute)
    engine = normalize(engine) if engine else None
    best: dict[str, tuple] = {}  # figure -> (specificity, order, value, source, by_rows)
    for order, e in enumerate(efficiency_entries(extra)):
        gpus = e.get("gpu", "*")
        gpus = [gpus] if isinstance(gpus, str) else list(gpus)
        on_gpu = gpu_id in {normalize(g) for g in gpus}
        if not on_gpu and "*" not in gpus:
            continue
        prec = normalize(str(e.get("compute", "*")))
        if prec not in ("*", compute):
            continue
        eng = normalize(str(e.get("engine", "*")))
        if eng not in ("*", engine):
            continue
        rank = 4 * on_gpu + 2 * (prec == compute) + (eng == engine)
        for f in FIGURES:
            if f not in e:
                continue
            value, source, by_rows = _figure(e[f], f)
            if f not in best or (rank, order) >= best[f][:2]:
                best[f] = (rank, order, value, source, by_rows)
    missing = [f for f in FIGURES if f not in best]
    if missing:
        raise UsageError(f"efficiency catalog gives no {', '.join(missing)} for {gpu_id} {compute} (add a '*' entry)")
    return Efficiency(**{f: best[f][2] for f in FIGURES}, sources=tuple((f, best[f][3]) for f in FIGURES),
                      weight_bandwidth_by_rows=best["weight_bandwidth"][4])


def _figure(raw: Any, name: str) -> tuple[float, str, tuple[tuple[int, float], ...]]:
    value, source = (raw.get("value"), str(raw.get("source", ""))) if isinstance(raw, dict) else (raw, "")
    value = _number(value, name)
    by_rows: tuple[tuple[int, float], ...] = ()
    if isinstance(raw, dict) and raw.get("by_rows"):
        if name != "weight_bandwidth":
            raise UsageError(f"efficiency figure {name} takes no by_rows (only weight_bandwidth does)")
        try:
            pairs = [(int(m), v) for m, v in raw["by_rows"]]
        except (TypeError, ValueError):
            raise UsageError(f"{name} by_rows must be [[rows, efficiency], ...]") from None
        by_rows = tuple((m, _number(v, name)) for m, v in pairs)
        rows = [m for m, _ in by_rows]
        if rows != sorted(set(rows)) or rows[0] < 1:
            raise UsageError(f"{name} by_rows must have rows ascending, each at least 1")
    return value, source, by_rows


def _number(value: Any, name: str) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"efficiency figure {name} must be a number, not {value!r}") from None
    ok = 0 < value <= 1 if name in _FRACTIONS else 0 <= value < 1
    if not ok:
        raise UsageError(f"efficiency figure {name} out of range: {value}")
    return value

"""How close each operator class comes to the hardware's peak: catalog data (data/efficiency.json).

An entry names GPUs (ids, or "*") and a compute precision ("bf16", "fp8" or "*") and gives some of
the figures below, each as ``{"value": x, "source": "..."}``. For each figure the most specific entry
that gives it wins: GPU and precision, then GPU, then precision, then "*" (the fallback every figure
has). A user's file in the same layout adds entries that win over the built-in ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenpace.errors import UsageError
from tokenpace.simulator.catalog._files import builtin_entries, entries_of, normalize, read_json

FIGURES = ("gemm_flops", "weight_bandwidth", "attention_prefill_flops", "attention_decode_bandwidth",
           "elementwise_bandwidth", "allreduce_bus_bandwidth", "allreduce_base_latency_s",
           "allreduce_hop_latency_s")
_FRACTIONS = FIGURES[:6]


@dataclass(frozen=True, slots=True)
class Efficiency:
    """The figures for one GPU and one compute precision, and where each came from."""

    gemm_flops: float
    weight_bandwidth: float
    attention_prefill_flops: float
    attention_decode_bandwidth: float
    elementwise_bandwidth: float
    allreduce_bus_bandwidth: float
    allreduce_base_latency_s: float
    allreduce_hop_latency_s: float
    sources: tuple[tuple[str, str], ...] = ()  # (figure, source)

    def to_dict(self) -> dict[str, Any]:
        src = dict(self.sources)
        return {f: {"value": getattr(self, f), "source": src.get(f, "")} for f in FIGURES}


def efficiency_entries(extra: str | Path | None = None) -> list[dict[str, Any]]:
    """The built-in entries, then a user's (later entries win at the same specificity)."""
    entries = builtin_entries("efficiency")
    if extra is not None:
        entries = entries + entries_of(read_json(extra), "efficiency")
    return entries


def get_efficiency(gpu_id: str, compute: str, extra: str | Path | None = None) -> Efficiency:
    """Each figure from the most specific entry for ``gpu_id`` computing in ``compute``."""
    gpu_id, compute = normalize(gpu_id), normalize(compute)
    best: dict[str, tuple[int, int, float, str]] = {}  # figure -> (specificity, order, value, source)
    for order, e in enumerate(efficiency_entries(extra)):
        gpus = e.get("gpu", "*")
        gpus = [gpus] if isinstance(gpus, str) else list(gpus)
        on_gpu = gpu_id in {normalize(g) for g in gpus}
        if not on_gpu and "*" not in gpus:
            continue
        prec = normalize(str(e.get("compute", "*")))
        if prec not in ("*", compute):
            continue
        rank = 2 * on_gpu + (prec == compute)
        for f in FIGURES:
            if f not in e:
                continue
            value, source = _figure(e[f], f)
            if f not in best or (rank, order) >= best[f][:2]:
                best[f] = (rank, order, value, source)
    missing = [f for f in FIGURES if f not in best]
    if missing:
        raise UsageError(f"efficiency catalog gives no {', '.join(missing)} for {gpu_id} {compute} (add a '*' entry)")
    return Efficiency(**{f: best[f][2] for f in FIGURES}, sources=tuple((f, best[f][3]) for f in FIGURES))


def _figure(raw: Any, name: str) -> tuple[float, str]:
    value, source = (raw.get("value"), str(raw.get("source", ""))) if isinstance(raw, dict) else (raw, "")
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"efficiency figure {name} must be a number, not {value!r}") from None
    ok = 0 < value <= 1 if name in _FRACTIONS else 0 <= value < 1
    if not ok:
        raise UsageError(f"efficiency figure {name} out of range: {value}")
    return value, source

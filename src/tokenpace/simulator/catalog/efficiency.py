"""How close each operator class comes to the hardware's peak: catalog data (data/efficiency.json,
written by hand with a source for each figure, and data/efficiency_measured.json, derived from
measured kernel tables by ``scripts/derive_efficiency.py``).

An entry names GPUs (ids, or "*"), a compute precision ("bf16", "fp8" or "*") and optionally an
engine ("vllm", "sglang", "trtllm": the ``--engine`` preset; "*" or absent: any, and the only
entries that apply without a preset), and gives some of the figures below, each as
``{"value": x, "source": "..."}``. For each figure the most specific entry that gives it wins: GPU,
then precision, then engine (GPU and precision and engine, then GPU and precision, ..., then "*",
the fallback every figure has); at equal specificity the later entry (a user's file comes last).
``weight_bandwidth`` may also give ``by_rows``, ``[[rows, efficiency, latency_s], ...]`` with rows
ascending: a GEMM of that many rows (tokens) streams its weights at that efficiency after a fixed
``latency_s`` per GEMM call (optional, 0 if left out), both interpolated linearly between the
points and held past either end, as measured GEMMs leave the memory-bound regime gradually and
each call has a fixed cost (launch; for FP8 the activation's quantization).
``attention_decode_bandwidth`` may give ``by_group``, ``[[query heads per KV head, efficiency],
...]``, interpolated the same way: decode kernels read each KV head once for its group of query
heads, and a kernel for one query head per KV head reads the cache less efficiently.
``gemm_flops`` may give ``by_size``, ``[[weights, efficiency], ...]`` with weights ascending: a
layer whose GEMMs (one GPU's share of QKV, O, gate/up and down) hold that many weights reaches
that efficiency at prefill rows, interpolated linearly in the logarithm of the size and held past
either end, as larger matrices keep more of the tensor cores busy (FP8 GEMMs on Hopper: about 0.5
of peak in layers of 100 M weights, 0.6-0.65 in layers of 300-400 M).
``allreduce_bus_bandwidth`` may give ``by_message``, ``[[GPUs, elements, seconds], ...]``: one
all-reduce's measured latency over that many GPUs for a message of that many 16-bit elements,
ascending in GPUs then elements. The roofline interpolates it linearly at a step's message where
it has the step's GPU count (past the largest message, proportionally to the size), as the line
of latency plus bytes at the bus bandwidth is too fast for mid-size messages (0.5-32 MB, a decode
step's); at other GPU counts it prices the line.
``moe_efficiency`` (optional: without it a mixture of experts' experts are priced with the GEMM
figures) is a MoE layer's time as a fraction of its roofline at peak: max(the routed tokens'
expert FLOPs at the compute peak, the touched experts' weight bytes at HBM bandwidth) over the
measured latency; its ``by_size_rows``, ``[[expert weights, rows per expert, efficiency], ...]``
ascending in weights then rows, gives it by one expert's weights on one GPU (hidden × expert
intermediate / TP) and the GEMM rows each touched expert gets, interpolated linearly in rows and
in the logarithm of the size, held past either end: fine-grained experts (Qwen3-30B-A3B's 2048 ×
768) run their grouped GEMMs far further from peak than Mixtral's 4096 × 14336.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from tokenpace.errors import UsageError
from tokenpace.simulator.catalog._files import builtin_entries, entries_of, normalize, read_json

FIGURES = ("gemm_flops", "weight_bandwidth", "attention_prefill_flops", "attention_decode_bandwidth",
           "elementwise_bandwidth", "allreduce_bus_bandwidth", "allreduce_base_latency_s",
           "allreduce_hop_latency_s", "elementwise_latency_s")
OPTIONAL = ("moe_efficiency",)  # figures an entry may give and the catalog need not
_FRACTIONS = FIGURES[:6] + OPTIONAL
BUILTIN_FILES = ("efficiency", "efficiency_measured")  # data/<name>.json, in this order
# data/efficiency_moe.json: the derived moe_efficiency figures (large curves), read only to price a
# mixture of experts, so that a dense model's start-up does not parse them.
MOE_FILE = "efficiency_moe"


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
    elementwise_latency_s: float  # the fixed GPU time of one elementwise kernel
    sources: tuple[tuple[str, str], ...] = ()  # (figure, source)
    # (rows, efficiency, latency per GEMM s); () where weight streaming is one value
    weight_bandwidth_by_rows: tuple[tuple[int, float, float], ...] = ()
    # (query heads per KV head, efficiency); () where decode attention is one value
    attention_decode_by_group: tuple[tuple[int, float], ...] = ()
    # (weights of one layer's GEMMs on one GPU, efficiency); () where GEMM FLOPs are one value
    gemm_flops_by_size: tuple[tuple[float, float], ...] = ()
    # (GPUs, 16-bit elements, seconds of one all-reduce); () where none is measured
    allreduce_by_message: tuple[tuple[int, int, float], ...] = ()
    moe_efficiency: float | None = None  # None: no MoE figure; experts priced as GEMMs
    # (one expert's weights on one GPU, GEMM rows per touched expert, efficiency)
    moe_efficiency_by_size_rows: tuple[tuple[float, float, float], ...] = ()

    def moe_curve_at(self, expert_weights: float) -> tuple[tuple[float, float], ...] | None:
        """(rows per touched expert, efficiency) of a MoE layer whose experts hold ``expert_weights``
        weights on one GPU: ``by_size_rows`` interpolated in log size between the two sizes around
        it (held past the ends), on the union of their rows, so that ``curve_at`` interpolating
        it in rows is exact; the one value where there is no curve; None where there is no figure."""
        if self.moe_efficiency is None:
            return None
        if not self.moe_efficiency_by_size_rows:
            return ((1.0, self.moe_efficiency),)
        sizes = sorted({w for w, _, _ in self.moe_efficiency_by_size_rows})
        curves = {w: tuple((r, e) for ww, r, e in self.moe_efficiency_by_size_rows if ww == w) for w in sizes}
        x = math.log(max(expert_weights, 1.0))
        i = bisect.bisect_left([math.log(w) for w in sizes], x)
        lo, hi = sizes[max(i - 1, 0)], sizes[min(i, len(sizes) - 1)]
        share = 0.0 if lo == hi else (x - math.log(lo)) / (math.log(hi) - math.log(lo))
        rows = sorted({r for r, _ in curves[lo]} | {r for r, _ in curves[hi]})
        return tuple((r, curve_at(curves[lo], r) * (1 - share) + curve_at(curves[hi], r) * share) for r in rows)

    def moe_efficiency_at(self, expert_weights: float, rows: float) -> float | None:
        """A MoE layer's efficiency for experts of ``expert_weights`` weights on one GPU, each
        touched expert given ``rows`` rows (``moe_curve_at`` at those rows); None where the
        catalog gives none."""
        curve = self.moe_curve_at(expert_weights)
        return None if curve is None else curve_at(curve, rows)

    def allreduce_curve(self, gpus: int) -> tuple[tuple[int, ...], tuple[float, ...]] | None:
        """(message elements, seconds) of one all-reduce over ``gpus`` GPUs as ``by_message``
        gives them; None where it gives none at that count."""
        points = [(e, s) for n, e, s in self.allreduce_by_message if n == gpus]
        if not points:
            return None
        return tuple(e for e, _ in points), tuple(s for _, s in points)

    def gemm_flops_at(self, layer_weights: float) -> float:
        """The GEMM FLOPs efficiency of a layer whose GEMMs hold ``layer_weights`` weights on one
        GPU: ``by_size`` interpolated in log size (held past its ends), else the one value."""
        if not self.gemm_flops_by_size:
            return self.gemm_flops
        curve = tuple((math.log(w), e) for w, e in self.gemm_flops_by_size)
        return _interpolate(curve, math.log(max(layer_weights, 1.0)), 1)

    def attention_decode_bandwidth_at(self, group: float) -> float:
        """The decode attention's KV-streaming efficiency with ``group`` query heads per KV head:
        ``by_group`` interpolated (held past its ends), else the one value."""
        if not self.attention_decode_by_group:
            return self.attention_decode_bandwidth
        return _interpolate(self.attention_decode_by_group, group, 1)

    def weight_bandwidth_at(self, rows: float) -> float:
        """The weight-streaming efficiency of a GEMM of ``rows`` rows: ``by_rows`` interpolated
        (held past its ends), else the one value."""
        return self._at(rows, 1) if self.weight_bandwidth_by_rows else self.weight_bandwidth

    def gemm_latency_at(self, rows: float) -> float:
        """The fixed seconds of one GEMM call of ``rows`` rows (``by_rows`` interpolated; else 0)."""
        return self._at(rows, 2) if self.weight_bandwidth_by_rows else 0.0

    def _at(self, rows: float, column: int) -> float:
        return _interpolate(self.weight_bandwidth_by_rows, rows, column)

    def to_dict(self) -> dict[str, Any]:
        src = dict(self.sources)
        out = {f: {"value": getattr(self, f), "source": src.get(f, "")} for f in FIGURES}
        if self.weight_bandwidth_by_rows:  # [rows, efficiency, latency_s]
            out["weight_bandwidth"]["by_rows"] = [list(p) for p in self.weight_bandwidth_by_rows]
        if self.attention_decode_by_group:
            out["attention_decode_bandwidth"]["by_group"] = [list(p) for p in self.attention_decode_by_group]
        if self.gemm_flops_by_size:
            out["gemm_flops"]["by_size"] = [list(p) for p in self.gemm_flops_by_size]
        if self.allreduce_by_message:
            out["allreduce_bus_bandwidth"]["by_message"] = [list(p) for p in self.allreduce_by_message]
        if self.moe_efficiency is not None:
            out["moe_efficiency"] = {"value": self.moe_efficiency, "source": src.get("moe_efficiency", "")}
            if self.moe_efficiency_by_size_rows:
                out["moe_efficiency"]["by_size_rows"] = [list(p) for p in self.moe_efficiency_by_size_rows]
        return out


def efficiency_entries(extra: str | Path | None = None, moe: bool = False) -> list[dict[str, Any]]:
    """The built-in entries (with ``moe``, the MoE figures' file too), then a user's (later entries
    win at the same specificity)."""
    names = BUILTIN_FILES + ((MOE_FILE,) if moe else ())
    entries = [e for name in names for e in builtin_entries("efficiency", name)]
    if extra is not None:
        entries = entries + entries_of(read_json(extra), "efficiency")
    return entries


def get_efficiency(gpu_id: str, compute: str, extra: str | Path | None = None,
                   engine: str | None = None, moe: bool = False) -> Efficiency:
    """Each figure from the most specific entry for ``gpu_id`` computing in ``compute`` under the
    ``engine`` preset (None: entries for any engine only); ``moe``: with the built-in
    ``moe_efficiency`` figures (a user's file may give one either way)."""
    gpu_id, compute = normalize(gpu_id), normalize(compute)
    engine = normalize(engine) if engine else None
    if extra is None:  # the built-in catalog alone: resolved once per process (a plan builds many predictors)
        return _builtin_efficiency(gpu_id, compute, engine, moe)
    return _resolve(gpu_id, compute, extra, engine, moe)


@lru_cache(maxsize=256)
def _builtin_efficiency(gpu_id: str, compute: str, engine: str | None, moe: bool = False) -> Efficiency:
    return _resolve(gpu_id, compute, None, engine, moe)


def _resolve(gpu_id: str, compute: str, extra: str | Path | None, engine: str | None,
             moe: bool = False) -> Efficiency:
    best: dict[str, tuple] = {}  # figure -> (specificity, order, value, source, curve)
    for order, e in enumerate(efficiency_entries(extra, moe)):
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
        for f in FIGURES + OPTIONAL:
            if f not in e:
                continue
            value, source, curve = _figure(e[f], f)
            if f not in best or (rank, order) >= best[f][:2]:
                best[f] = (rank, order, value, source, curve)
    missing = [f for f in FIGURES if f not in best]
    if missing:
        raise UsageError(f"efficiency catalog gives no {', '.join(missing)} for {gpu_id} {compute} (add a '*' entry)")
    moe = best.get("moe_efficiency")
    given = [f for f in FIGURES + OPTIONAL if f in best]
    return Efficiency(**{f: best[f][2] for f in FIGURES}, sources=tuple((f, best[f][3]) for f in given),
                      weight_bandwidth_by_rows=best["weight_bandwidth"][4],
                      attention_decode_by_group=best["attention_decode_bandwidth"][4],
                      gemm_flops_by_size=best["gemm_flops"][4],
                      allreduce_by_message=best["allreduce_bus_bandwidth"][4],
                      moe_efficiency=moe[2] if moe else None, moe_efficiency_by_size_rows=moe[4] if moe else ())


def curve_at(curve: tuple, x: float) -> float:
    """A curve of (x, y) points, x ascending: piecewise-linear, held past either end."""
    return _interpolate(curve, x, 1)


def _interpolate(curve: tuple, x: float, column: int) -> float:
    """Piecewise-linear through (point[0], point[column]), held past either end."""
    i = bisect.bisect_left([p[0] for p in curve], x)
    if i == 0:
        return curve[0][column]
    if i == len(curve):
        return curve[-1][column]
    (x0, y0), (x1, y1) = (curve[i - 1][0], curve[i - 1][column]), (curve[i][0], curve[i][column])
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def _figure(raw: Any, name: str) -> tuple[float, str, tuple]:
    """(value, source, curve): the curve is ``by_rows``, ``by_group``, ``by_size``, ``by_message`` or
    ``by_size_rows`` where the figure takes one."""
    value, source = (raw.get("value"), str(raw.get("source", ""))) if isinstance(raw, dict) else (raw, "")
    value = _number(value, name)
    if isinstance(raw, dict) and raw.get("by_message"):
        if name != "allreduce_bus_bandwidth":
            raise UsageError(f"efficiency figure {name} takes no by_message (only allreduce_bus_bandwidth does)")
        try:
            points = tuple((int(n), int(e), float(s)) for n, e, s in raw["by_message"])
        except (TypeError, ValueError):
            raise UsageError(f"{name} by_message must be [[GPUs, elements, seconds], ...]") from None
        if not all(0 < s < 60 for _, _, s in points):  # (a gigabyte over PCIe takes about a second)
            raise UsageError(f"{name} by_message seconds out of range (0, 60)")
        keys = [(n, e) for n, e, _ in points]
        if keys != sorted(set(keys)) or min(n for n, _ in keys) < 2 or min(e for _, e in keys) < 1:
            raise UsageError(f"{name} by_message must be ascending in GPUs (at least 2), then elements (at least 1)")
        return value, source, points
    if isinstance(raw, dict) and raw.get("by_size_rows"):
        if name != "moe_efficiency":
            raise UsageError(f"efficiency figure {name} takes no by_size_rows (only moe_efficiency does)")
        try:
            triples = [(float(w), float(r), v) for w, r, v in raw["by_size_rows"]]
        except (TypeError, ValueError):
            raise UsageError(f"{name} by_size_rows must be [[expert weights, rows per expert, efficiency], "
                             "...]") from None
        points = tuple((w, r, _number(v, name)) for w, r, v in triples)
        keys = [(w, r) for w, r, _ in points]
        if keys != sorted(set(keys)) or min(w for w, _ in keys) < 1 or min(r for _, r in keys) < 1:
            raise UsageError(f"{name} by_size_rows must be ascending in expert weights, then rows (each at least 1)")
        return value, source, points
    if isinstance(raw, dict) and raw.get("by_group"):
        if name != "attention_decode_bandwidth":
            raise UsageError(f"efficiency figure {name} takes no by_group (only attention_decode_bandwidth does)")
        try:
            pairs = [(int(g), v) for g, v in raw["by_group"]]
        except (TypeError, ValueError):
            raise UsageError(f"{name} by_group must be [[query heads per KV head, efficiency], ...]") from None
        group = tuple((g, _number(v, name)) for g, v in pairs)
        if [g for g, _ in group] != sorted({g for g, _ in group}) or group[0][0] < 1:
            raise UsageError(f"{name} by_group must have groups ascending, each at least 1")
        return value, source, group
    if isinstance(raw, dict) and raw.get("by_size"):
        if name != "gemm_flops":
            raise UsageError(f"efficiency figure {name} takes no by_size (only gemm_flops does)")
        try:
            sizes = tuple((float(w), _number(v, name)) for w, v in raw["by_size"])
        except (TypeError, ValueError):
            raise UsageError(f"{name} by_size must be [[layer weights, efficiency], ...]") from None
        if [w for w, _ in sizes] != sorted({w for w, _ in sizes}) or sizes[0][0] < 1:
            raise UsageError(f"{name} by_size must have sizes ascending, each at least 1")
        return value, source, sizes
    by_rows: tuple[tuple[int, float, float], ...] = ()
    if isinstance(raw, dict) and raw.get("by_rows"):
        if name != "weight_bandwidth":
            raise UsageError(f"efficiency figure {name} takes no by_rows (only weight_bandwidth does)")
        try:
            points = [(int(p[0]), p[1], p[2] if len(p) > 2 else 0.0) for p in raw["by_rows"] if 2 <= len(p) <= 3]
            if len(points) != len(raw["by_rows"]):
                raise ValueError
        except (TypeError, ValueError, IndexError):
            raise UsageError(f"{name} by_rows must be [[rows, efficiency, latency_s], ...]") from None
        by_rows = tuple((m, _number(v, name), _number(lat, f"{name} latency_s", fraction=False)) for m, v, lat in points)
        rows = [p[0] for p in by_rows]
        if rows != sorted(set(rows)) or rows[0] < 1:
            raise UsageError(f"{name} by_rows must have rows ascending, each at least 1")
    return value, source, by_rows


def _number(value: Any, name: str, fraction: bool | None = None) -> float:
    """A fraction of a peak in (0, 1], or seconds in [0, 1)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"efficiency figure {name} must be a number, not {value!r}") from None
    ok = 0 < value <= 1 if (name in _FRACTIONS if fraction is None else fraction) else 0 <= value < 1
    if not ok:
        raise UsageError(f"efficiency figure {name} out of range: {value}")
    return value

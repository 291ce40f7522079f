"""The roofline's efficiencies derived from aiconfigurator-core's measured kernel tables.

For one GPU and engine's tables (or several engines', their samples pooled), each figure is a fraction of the GPU catalog's peak, computed
from table latencies read through ``KernelTables`` (the kernel predictor's own lookups: the same
kernel per dtype, exact at grid points) over representative shapes:

- the shapes are every dense model of our catalog at the tensor-parallel degrees it is served at
  in the figure's precision (``serving_configs``: FP8 weights take half the memory, so FP8
  deployments run at half the TP, as the published Llama-3.1-70B FP8 runs at TP1 and TP2 do):
  one GPU's share of each layer;
- ``gemm_flops``: a layer's GEMM FLOPs (2·m·n·k summed over QKV, O, up/gate, down) over their
  summed latency × the dense peak of the dtype, at prefill row counts (``PREFILL_ROWS``);
  ``by_size``: each layer shape's median over those rows, by the layer's weights on one GPU (the
  median where several shapes or engines share a size), which the roofline interpolates at its
  model's layer: measured FP8 GEMMs on Hopper reach about 0.5 of peak in layers of 100 M weights
  and 0.6-0.65 in layers of 300-400 M, so one median for all misprices large models' prefill;
- ``weight_bandwidth``: at each row count of ``CURVE_ROWS`` (``by_rows``), the least-squares
  line through the layers' summed GEMM latencies, time = GEMMs × latency + weight bytes /
  (efficiency × HBM bandwidth): a fixed cost per GEMM call (launch, and for FP8 the activation's
  quantization: 12-13 µs per GEMM in TensorRT-LLM's FP8 tables on Hopper) and a streaming rate.
  One efficiency alone misses small layers by 15-25% with FP8 (it is the ratio of two shapes'
  different fixed costs); the line is within 1-3% of the tables. The roofline interpolates both
  by a step's rows, as the measured ridge between memory- and compute-bound is soft; ``value`` is
  the efficiency's median over the decode rows (1-256);
- ``attention_prefill_flops``: one prompt of ``PREFILL_TOKENS`` tokens (no cached prefix), causal
  FLOPs 4·heads·head_dim·n(n+1)/2 (as the roofline counts them) over the context-attention latency
  × the peak of the attention precision (FP8 with an FP8 KV cache, as the roofline prices it);
- ``attention_decode_bandwidth``: a decode step of ``DECODE_BATCHES`` sequences with
  ``DECODE_KV_TOKENS`` tokens of KV each: KV bytes (2·kv_heads·head_dim × bytes per value × tokens
  × sequences) over the generation-attention latency × HBM bandwidth; ``by_group``: the median at
  each count of query heads per KV head among the shapes, as the kernels read a KV head once for
  its whole group (H100 and H200 FP8: 0.55-0.76 with one query head per KV head, as Llama-2 7B and
  13B have, 0.82-0.88 with 4-8);
- all-reduce (the engine's own, else NCCL's, over 2, 4 and 8 GPUs where measured):
  ``allreduce_bus_bandwidth`` = NCCL's bus bandwidth, 2(t−1)/t × bytes / latency, at messages of
  at least ``ALLREDUCE_LARGE_ELEMENTS`` 16-bit values, over one direction of the link;
  ``allreduce_base_latency_s`` and ``allreduce_hop_latency_s``: the least-squares line
  base + 2(t−1)·hop through the latency of a ``ALLREDUCE_SMALL_ELEMENTS``-value message at each t;
  ``by_message``: the measured latency itself at each GPU count and message size (with several
  tables, their median at each size), which the roofline interpolates where it has the step's
  GPU count: between the small-message latency and the bandwidth regime (0.5-32 MB, a decode
  step's messages) the two-figure line runs up to 2.5 times faster than the tables (TP8 on H100,
  1M elements: 14 against 35 µs).

- ``moe_efficiency``: ``derive_moe.moe_efficiency``.

Each figure but the two lines (weight streaming, all-reduce latency) is the median of its
samples, each sample counted at most 1 (``capped``); the spread (min, max, count), or the line's
error on the tables, goes in its source. The elementwise passes have no table on these GPUs and are not derived. Nothing here runs at simulation
time: ``scripts/derive_efficiency.py`` writes the figures into ``data/efficiency_measured.json``.
"""

from __future__ import annotations

import numpy as np

from tokenpace.errors import UsageError
from tokenpace.simulator.catalog import GPU, ModelSpec, get_gpu, list_models
from tokenpace.simulator.kernels.derive_moe import moe_efficiency
from tokenpace.simulator.kernels.figure import DTYPES, MS, Figure, capped, figure
from tokenpace.simulator.kernels.predictor import attention_heads_per_gpu, layer_gemm_shapes
from tokenpace.simulator.kernels.tables import BORROWED, KernelTables

PREFILL_ROWS = (2048, 4096, 8192)
CURVE_ROWS = (1, 8, 16, 32, 64, 96, 128, 160, 192, 256, 384, 512, 768, 1024, 2048)
DECODE_ROWS = tuple(m for m in CURVE_ROWS if m <= 256)
GEMMS_PER_LAYER = 4  # QKV, O, gate/up, down
PREFILL_TOKENS = (2048, 4096, 8192, 16384)
DECODE_BATCHES = (8, 16, 32, 64, 128, 256)
DECODE_KV_TOKENS = (1023, 2047, 4095, 8191, 16383)  # the tables' KV-length grid points
DECODE_MIN_KV_BYTES = 128 << 20  # a layer's KV reads past every one of these GPUs' L2 cache (<= 96 MB)
ALLREDUCE_SMALL_ELEMENTS = 4096  # one token of a 4,096-wide model
ALLREDUCE_LARGE_ELEMENTS = 2**25  # 64 MB of 16-bit values: NCCL's bandwidth regime
ALLREDUCE_GPUS = (2, 4, 8)
SERVING_WEIGHT_BYTES = 40e9  # a model is served at the smallest TP whose 16-bit weights per GPU fit this


def serving_configs(models: list[ModelSpec] | None = None, bytes_per_weight: float = 2) -> list[tuple[ModelSpec, int]]:
    """Every dense catalog model at the smallest TP (1, 2, 4 or 8) whose weights per GPU, at
    ``bytes_per_weight``, fit in ``SERVING_WEIGHT_BYTES``, and at twice that TP (up to 8)."""
    out = []
    for m in models if models is not None else list_models():
        if m.is_moe:
            continue
        tps = [tp for tp in (1, 2, 4, 8) if m.params * bytes_per_weight / tp <= SERVING_WEIGHT_BYTES] or [8]
        first = tps[0]
        out += [(m, tp) for tp in sorted({first, min(2 * first, 8)})]
    return out


def _layer(configs):
    for model, tp in configs:
        yield f"{model.id}/tp{tp}", layer_gemm_shapes(model, tp)


def gemm_efficiency(tables: list[KernelTables], gpu: GPU, compute: str, configs) -> tuple[Figure, Figure]:
    """(gemm_flops, weight_bandwidth) for ``compute`` ("bf16", "fp8" or "fp4") GEMMs, the samples of every
    table in ``tables`` pooled."""
    dtype, bpw, _ = DTYPES[compute]
    peak, bw = gpu.peak_flops(compute), gpu.hbm_bytes_s
    rows = np.array(sorted(set(PREFILL_ROWS) | set(CURVE_ROWS)), dtype=float)
    flops, layer_s, layer_bytes = [], [], []  # per layer: latencies at each row count; weight bytes
    by_size: dict[int, list[float]] = {}  # a layer's weights -> each shape's median prefill efficiency
    for t in tables:
        for _, shapes in _layer(configs):
            lat_s = sum(t.gemm_curve(dtype, n, k, rows) for n, k in shapes.values()) * MS
            weights = sum(n * k for n, k in shapes.values())
            layer = [e for m, e in zip(rows, 2 * rows * weights / (lat_s * peak)) if m in PREFILL_ROWS]
            flops += layer
            by_size.setdefault(weights, []).append(float(np.median(capped(layer))))
            layer_s.append(lat_s)
            layer_bytes.append(weights * bpw)
    at = {int(m): i for i, m in enumerate(rows)}
    lat_by_rows = np.array(layer_s)  # layers x row counts
    curve, residuals = [], []
    for m in CURVE_ROWS:
        eff, latency, rel = streaming_line(np.array(layer_bytes), lat_by_rows[:, at[m]], bw)
        curve.append((m, round(eff, 4), float(f"{latency:.4g}")))
        residuals += list(rel)
    shapes_said = f"{len(layer_s)} layer GEMM sets ({len(configs)} model/TP shapes x {len(tables)} tables)"
    kernel = "; ".join(sorted({t.gemm_kernel(dtype) for t in tables}))
    sizes = tuple((w, round(float(np.median(e)), 4)) for w, e in sorted(by_size.items()))
    g = figure(flops, f"{dtype} GEMMs ({kernel}) at m = {', '.join(map(str, PREFILL_ROWS))} rows, {shapes_said}: "
                      f"2mnk / (latency x {peak / 1e12:g} TFLOP/s); by_size: each shape's median by its "
                      "layer's weights on one GPU", sizes)
    res = np.abs(residuals)
    w = Figure(float(np.median([e for m, e, _ in curve if m in DECODE_ROWS])), res,
               f"{dtype} GEMMs ({kernel}), {shapes_said}, at each m of by_rows: least squares of a layer's "
               f"time = {GEMMS_PER_LAYER} x latency + n k x {bpw} B / (efficiency x {bw / 1e12:g} TB/s); "
               f"value: the median efficiency over m = {DECODE_ROWS[0]}-{DECODE_ROWS[-1]}",
               tuple(curve), statistic=f"the line's |error| on the tables' layers: median {np.median(res):.1%}, "
                                       f"max {res.max():.1%}")
    return g, w


def streaming_line(weight_bytes: np.ndarray, seconds: np.ndarray, bandwidth: float) -> tuple[float, float, np.ndarray]:
    """(efficiency, latency per GEMM, relative errors) of the least-squares line seconds =
    GEMMS_PER_LAYER × latency + weight_bytes / (efficiency × bandwidth); the latency held at 0
    where the best line has it negative. The efficiency is capped at 1 (see ``capped``)."""
    x = weight_bytes / bandwidth
    a = np.stack([np.full_like(x, GEMMS_PER_LAYER), x], axis=1)
    (latency, slope), *_ = np.linalg.lstsq(a, seconds, rcond=None)
    if latency < 0:
        latency, slope = 0.0, float(x @ seconds / (x @ x))
    eff = min(1.0, 1 / slope)
    return float(eff), float(latency), (GEMMS_PER_LAYER * latency + x / eff) / seconds - 1


def attention_efficiency(tables: list[KernelTables], gpu: GPU, compute: str,
                         configs) -> tuple[Figure, Figure] | None:
    """(attention_prefill_flops, attention_decode_bandwidth) with the KV cache ``compute`` implies
    (FP8 KV for "fp8", attended at the FP8 peak; BF16 otherwise), from the tables that measure it;
    None where none does."""
    _, kv_bytes, kv_dtype = DTYPES[compute]
    peak, bw = gpu.peak_flops(compute), gpu.hbm_bytes_s
    shapes = sorted({(*attention_heads_per_gpu(m, tp), m.head_dim) for m, tp in configs})
    prefill, decode, kernels, versions, by_group = [], [], set(), [], {}
    for t in tables:
        try:
            pairs = [(t.attention("context", *shape, kv_dtype), t.attention("generation", *shape, kv_dtype))
                     for shape in shapes]
        except UsageError:  # this engine's tables have no such KV cache (SGLang's FP8 context attention)
            continue
        versions.append(f"{t.backend} {t.version}")
        for (heads, kv_heads, hd), (ctx, gen) in zip(shapes, pairs):
            kernels |= {ctx.kernel, gen.kernel}
            for n in PREFILL_TOKENS:
                prefill.append(4 * heads * hd * n * (n + 1) / 2 / (ctx.ms(1, n) * MS * peak))
            for b in DECODE_BATCHES:
                for s in DECODE_KV_TOKENS:
                    kv = b * s * 2 * kv_heads * hd * kv_bytes
                    if kv >= DECODE_MIN_KV_BYTES:
                        decode.append(kv / (gen.ms(b, s) * MS * bw))
                        by_group.setdefault(heads // kv_heads, []).append(decode[-1])
    if not versions:
        return None
    said = f"{len(shapes)} (heads, KV heads, head dim) per GPU, {kv_dtype} KV ({'; '.join(versions)}), kernels {', '.join(sorted(kernels))}"
    p = figure(prefill, f"context attention, one prompt of {', '.join(map(str, PREFILL_TOKENS))} tokens, {said}: "
                        f"causal 4 h d n(n+1)/2 / (latency x {peak / 1e12:g} TFLOP/s)")
    d = figure(decode, f"generation attention, {DECODE_BATCHES[0]}-{DECODE_BATCHES[-1]} sequences x "
                       f"{DECODE_KV_TOKENS[0]}-{DECODE_KV_TOKENS[-1]} KV tokens with at least "
                       f"{DECODE_MIN_KV_BYTES >> 20} MiB of KV per layer, {said}: "
                       f"KV bytes / (latency x {bw / 1e12:g} TB/s); by_group: the median at each count "
                       f"of query heads per KV head",
               tuple((g, round(float(np.median(capped(v))), 4)) for g, v in sorted(by_group.items())))
    return p, d


def allreduce_efficiency(tables: list[KernelTables], gpu: GPU) -> tuple[Figure, Figure, Figure] | None:
    """(allreduce_bus_bandwidth, allreduce_base_latency_s, allreduce_hop_latency_s); None where no
    all-reduce over 2, 4 or 8 GPUs is measured. With several tables, the latency at each GPU count
    is their median."""
    link = gpu.link_bytes_s_per_direction
    busbw, by_n, sources = [], {}, set()
    curves: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    for t in tables:
        for n in ALLREDUCE_GPUS:
            try:
                size, lat_ms, source = t.allreduce(n)
            except UsageError:  # not measured at this GPU count
                continue
            sources.add(source)
            lat = lat_ms * MS
            big = size >= ALLREDUCE_LARGE_ELEMENTS
            busbw += list(2 * (n - 1) / n * size[big] * 2 / lat[big] / link)
            by_n.setdefault(n, []).append(float(np.interp(ALLREDUCE_SMALL_ELEMENTS, size, lat)))
            curves.setdefault(n, []).append((size, lat))
    small = {n: float(np.median(v)) for n, v in sorted(by_n.items())}
    if len(small) < 2 or not busbw:
        return None
    hops = np.array([2 * (n - 1) for n in small])
    lat = np.array(list(small.values()))
    hop, base = np.polyfit(hops, lat, 1)
    hop, base = max(float(hop), 0.0), max(float(base), 0.0)
    said = f"{'; '.join(sorted(sources))}, over {', '.join(map(str, small))} GPUs"
    bus = figure(busbw, f"{said}: bus bandwidth 2(t-1)/t x 2 B x elements / latency at >= "
                        f"{ALLREDUCE_LARGE_ELEMENTS} elements, of {link / 1e9:g} GB/s per direction; "
                        f"by_message: [GPUs, 16-bit elements, seconds] as measured"
                        + (" (the tables' median at each size)" if len(tables) > 1 else ""),
                 by_rows=allreduce_curves(curves))
    lat_said = (f"{said}: least squares of base + 2(t-1) hop through the latency of a "
                f"{ALLREDUCE_SMALL_ELEMENTS}-element message ({', '.join(f'{v * 1e6:.1f}' for v in lat)} us)")
    fit = f"least-squares line through {len(lat)} GPU counts"
    return bus, Figure(base, lat, lat_said, statistic=fit), Figure(hop, lat, lat_said, statistic=fit)


def allreduce_curves(curves: dict[int, list[tuple[np.ndarray, np.ndarray]]]) -> tuple[tuple[int, int, float], ...]:
    """(GPUs, elements, seconds) at every message size of the first table for each GPU count:
    the tables' median latency there (each table interpolated onto those sizes)."""
    out = []
    for n, got in sorted(curves.items()):
        sizes = got[0][0]
        lat = np.median([np.interp(sizes, s, l) for s, l in got], axis=0)
        out += [(n, int(s), float(f"{v:.4g}")) for s, v in zip(sizes, lat)]
    return tuple(out)


COMMAND = "python scripts/derive_efficiency.py --write"


def _source(figure_: Figure, where: str) -> str:
    return f"{where}: {figure_.detail}; {figure_.spread()} ({COMMAND})"


def _as_entry(figures: dict[str, Figure], where: str) -> dict:
    out = {}
    for name, f in figures.items():
        e = {"value": round(f.value, 4) if f.value >= 1e-3 else float(f"{f.value:.4g}"), "source": _source(f, where)}
        if f.by_rows:  # weight streaming's by rows, decode attention's by group, GEMM FLOPs' by size
            key = {"attention_decode_bandwidth": "by_group", "gemm_flops": "by_size",
                   "allreduce_bus_bandwidth": "by_message", "moe_efficiency": "by_size_rows"}.get(name, "by_rows")
            e[key] = [list(p) for p in f.by_rows]
        out[name] = e
    return out


def catalog_entries(gpu_ids: list[str], gpu: GPU, tables: list[KernelTables], aic_version: str,
                    device: str, configs=None) -> list[dict]:
    """The efficiency-catalog entries for the GPUs ``gpu_ids`` (measured on ``gpu``, the table's
    ``device``): per engine and for no engine ("*": the engines' samples pooled), per compute
    precision the GEMM and attention figures, and the all-reduce figures."""
    computes = ["bf16"] + (["fp8"] if gpu.fp8_tflops else []) + (["fp4"] if gpu.fp4_tflops else [])
    shapes = {c: serving_configs(bytes_per_weight=DTYPES[c][1]) if configs is None else configs for c in computes}
    entries = []
    for engine, ts in [(t.backend, [t]) for t in tables] + [("*", tables)]:
        names = "; ".join(f"{t.backend} {t.version}" for t in ts)
        where = f"aiconfigurator-core {aic_version} tables ({names}) on {ts[0].system} ({device})"
        if engine == "*":
            where += ", the engines' samples pooled"
        for compute in computes:
            dtype = DTYPES[compute][0]
            figs: dict[str, Figure] = {}
            have = [t for t in ts if dtype in t.gemm_dtypes()]
            if have:
                figs["gemm_flops"], figs["weight_bandwidth"] = gemm_efficiency(have, gpu, compute, shapes[compute])
            attn = attention_efficiency(ts, gpu, compute, shapes[compute]) if compute != "fp4" else None
            if attn:
                figs["attention_prefill_flops"], figs["attention_decode_bandwidth"] = attn
            moe = moe_efficiency(ts, gpu, compute)
            if moe:
                figs["moe_efficiency"] = moe
            if figs:
                entries.append({"gpu": gpu_ids, "compute": compute, "engine": engine, **_as_entry(figs, where)})
        ar = allreduce_efficiency(ts, gpu)
        if ar:
            names = ("allreduce_bus_bandwidth", "allreduce_base_latency_s", "allreduce_hop_latency_s")
            entries.append({"gpu": gpu_ids, "compute": "*", "engine": engine,
                            **_as_entry(dict(zip(names, ar)), where)})
    borrowed = [g for g in map(get_gpu, gpu_ids[1:]) if g.hbm_tb_s != gpu.hbm_tb_s]
    if not borrowed:
        return entries
    same = [i for i in gpu_ids if i not in {g.id for g in borrowed}]
    out = [{**e, "gpu": same} for e in entries]
    for part in borrowed:
        out += [borrowed_part(e, gpu, part) for e in entries]
    return out


def split_moe(entries: list[dict]) -> tuple[list[dict], list[dict]]:
    """``entries`` as the two catalog files hold them: every figure but ``moe_efficiency``
    (data/efficiency_measured.json), and the ``moe_efficiency`` figures alone (data/efficiency_moe.json,
    read only to price a mixture of experts)."""
    dense = [{k: v for k, v in e.items() if k != "moe_efficiency"} for e in entries]
    moe = [{k: e[k] for k in ("gpu", "compute", "engine", "moe_efficiency")} for e in entries if "moe_efficiency" in e]
    return dense, moe


def borrowed_part(entry: dict, measured: GPU, part: GPU) -> dict:
    """``entry`` (measured on ``measured``) for ``part``: the same silicon with another memory (the
    A100 40GB beside the 80GB the tables were measured on). Compute fractions carry over as they are.
    Weight streaming by rows does not: past the ridge the measured GEMMs are compute-bound, and the
    line's "efficiency" there is compute time expressed as bytes over the measured part's bandwidth,
    which the same fraction of a smaller bandwidth would make slower although the SMs and clocks are
    the same. Nor does it at one row: there the measured GEMMs stream at a rate their SMs set (the
    A100 80GB's 0.74 of 2.039 TB/s, 1.50 TB/s, below what its HBM copies), which the same SMs keep
    on a slower memory up to what that memory streams at all. So at each row count a GEMM streams
    at the measured part's rate, at most this part's measured copy rate (``BORROWED``):
    efficiency x (measured bandwidth / this part's), at most copy rate / this part's bandwidth."""
    out = {**entry, "gpu": [part.id]}
    w = entry.get("weight_bandwidth")
    if not w or not w.get("by_rows"):
        return out
    _, copy_tb_s, copy_source = BORROWED[part.id]
    ratio, cap = measured.hbm_tb_s / part.hbm_tb_s, round(copy_tb_s / part.hbm_tb_s, 4)
    rows = [[m, round(min(e * ratio, cap), 4), lat] for m, e, lat in w["by_rows"]]
    value = float(np.median([e for m, e, _ in rows if m in DECODE_ROWS]))
    out["weight_bandwidth"] = {
        **w, "value": round(value, 4), "by_rows": rows,
        "source": w["source"] + f"; for the {part.name} ({part.hbm_tb_s:g} TB/s, the same SMs): each row count's "
                                f"efficiency x {measured.hbm_tb_s:g}/{part.hbm_tb_s:g} (the measured part's rate), "
                                f"at most {cap:g} ({copy_source})"}
    return out

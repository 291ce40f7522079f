"""The roofline's ``moe_efficiency`` derived from aiconfigurator-core's measured MoE tables.

Every gated mixture-of-experts shape and TP the engine's MoE tables measured without expert
parallelism in the figure's precision (read as ``--predictor kernels`` reads them:
``moe.moe_table``), at each token count measured: max(the routed tokens' expert FLOPs on one GPU,
k·T·(3·hidden·inter/tp)·2, at the compute peak; the touched experts' weight bytes on one GPU at HBM
bandwidth, ``experts_touched`` as the roofline counts them) over the measured latency.
``by_size_rows``: each shape's curve at the rows per touched expert of ``MOE_ROWS`` (within the rows
it measured), keyed by one GPU's share of an expert (hidden × inter / tp, as the roofline looks it
up; the median where shapes share a size). Measured efficiencies differ by expert size more than by
anything else (B200 NVFP4 under TensorRT-LLM: 0.05-0.32 at Qwen3-30B-A3B's 2048 × 768 experts,
0.19-0.34 at Mixtral's 4096 × 14336). Nothing here runs at simulation time:
``scripts/derive_efficiency.py --write`` writes the figures into ``data/efficiency_moe.json``.
"""

from __future__ import annotations

import numpy as np

from tokenpace.errors import UsageError
from tokenpace.simulator.catalog import GPU, experts_touched
from tokenpace.simulator.kernels.figure import DTYPES, MS, Figure, capped, figure
from tokenpace.simulator.kernels.moe import moe_shapes, moe_table
from tokenpace.simulator.kernels.tables import KernelTables

MOE_ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)  # GEMM rows per touched expert


def moe_efficiency(tables: list[KernelTables], gpu: GPU, compute: str) -> Figure | None:
    """``moe_efficiency`` for ``compute`` weights from the MoE tables of ``tables`` (pooled); None
    where none measured a gated MoE without expert parallelism in that precision."""
    _, bpw, _ = DTYPES[compute]
    weights = {"bf16": "bf16", "fp8": "fp8", "fp4": "nvfp4"}[compute]
    peak, bw = gpu.peak_flops(compute), gpu.hbm_bytes_s
    samples, by_size, said = [], {}, set()
    for t in tables:
        for hidden, inter, k, e, tp in moe_shapes(t, weights):
            try:
                m = moe_table(t, weights, hidden, inter, k, e, tp=tp)
            except UsageError:  # measured only with a kernel we do not read (min-latency, non-gated)
                continue
            said.add(f"{t.backend} {m.version} {m.kernel} {m.dtype} {m.distribution}")
            tokens = m.tokens
            expert = 3 * hidden * inter / tp  # one GPU's share of an expert
            touched = experts_touched(e, k, tokens)
            ideal = np.maximum(2 * tokens * k * expert / peak, touched * expert * bpw / bw)
            eff = capped(ideal / (m.ms * MS))
            samples += list(eff)
            rows = tokens * k / touched
            curve = by_size.setdefault(hidden * inter // tp, {})
            for r in MOE_ROWS:
                if rows[0] <= r <= rows[-1]:
                    curve.setdefault(r, []).append(float(np.interp(r, rows, eff)))
    if not samples:
        return None
    points = tuple((w, r, round(float(np.median(v)), 4)) for w, c in sorted(by_size.items()) for r, v in sorted(c.items()))
    return figure(samples, f"MoE layers ({'; '.join(sorted(said))}), {len(by_size)} expert sizes on one GPU (every "
                           f"shape and TP measured without expert parallelism), every token count measured: "
                           f"max(2 k T 3 h i / tp / {peak / 1e12:g} TFLOP/s, touched experts x 3 h i / tp x {bpw:g} "
                           f"B / {bw / 1e12:g} TB/s) / latency; by_size_rows: [h x i / tp, rows per touched expert, "
                           "efficiency], each shape interpolated at those rows (the median where shapes share a "
                           "size)", points)

"""The measured mixture-of-experts layer (aiconfigurator-core's ``moe_perf`` tables) for the kernel
predictor: one layer's latency by tokens, at one model's exact expert shape.

``moe/<backend>/<version>/moe_perf.parquet`` (beside the tables ``tables.py`` reads): one
mixture-of-experts layer (routing's permutation, the experts' gated GEMMs, the weighted sum back)
over ``num_tokens`` tokens, per ``hidden_size``, ``inter_size`` (one expert's), ``topk``,
``num_experts``, ``moe_dtype``, ``moe_tp_size``, ``moe_ep_size``, ``distribution`` (how unevenly the
tokens spread over the experts) and ``kernel_source`` → ``latency`` (ms).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tokenpace.errors import UsageError
from tokenpace.simulator.kernels.tables import KernelTables, _pick_kernel, _read, _version_key

# Our weight precisions → the MoE tables' moe_dtype. FP8 weights: FP8 per tensor (ModelOpt's
# checkpoints) or with block scales (Qwen's and DeepSeek's own FP8 checkpoints); where an engine's
# tables measured both, the faster (``_faster``): a deployment picks its FP8 checkpoint and MoE backend
# by speed, and vLLM 0.24.0's per-tensor rows on H100 are its ModelOpt FlashInfer-CUTLASS path, 2-3x
# slower than its BF16 MoE there, while its block-scaled Triton kernel is faster than BF16.
MOE_DTYPES = {"bf16": ("bfloat16",), "fp16": ("bfloat16",), "fp8": ("fp8", "fp8_block"), "nvfp4": ("nvfp4",),
              "int4": ("int4_wo",)}
# How unevenly tokens are routed, best first: aiconfigurator's own default for these models (a
# power law of exponent 1.2 over the experts, ``sdk/models/moe.py``), then the others measured.
MOE_DISTRIBUTIONS = ("power_law_1.2", "power_law_1.01", "balanced")
# TensorRT-LLM's MoE kernels by default (CUTLASS); its min-latency kernels run only in a mode an
# engine turns on for small batches, so they are never picked. Other engines: the kernel with most rows.
_MOE_PREFERRED = ("moe_torch_flow_cutlass", "moe_torch_flow")


@dataclass(frozen=True, slots=True)
class MoETable:
    """One MoE layer's latencies (ms) by tokens on one GPU, and where they came from."""

    tokens: np.ndarray  # ascending
    ms: np.ndarray
    kernel: str
    version: str
    dtype: str  # the table's moe_dtype
    distribution: str  # the routing skew measured


def moe_table(tables: KernelTables, weights: str, hidden: int, inter: int, topk: int, experts: int, tp: int,
              gated: bool = True) -> MoETable:
    """One MoE layer of this exact shape (``hidden``, one expert's ``inter``, ``topk`` of
    ``experts``) at ``weights`` precision, its experts split over ``tp`` GPUs (no expert
    parallelism): the rows of this engine's version when it measured the shape, else of its
    newest version that did. No shape is scaled from another: routing and the experts' GEMM
    sizes change the kernel's efficiency too much for that."""
    dtypes = MOE_DTYPES.get(weights)
    if dtypes is None:
        raise UsageError(f"--predictor kernels has no MoE tables for {weights} weights "
                         f"(it has {', '.join(sorted(MOE_DTYPES))}); use --predictor roofline")
    cols = ["kernel_source", "moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts",
            "moe_tp_size", "moe_ep_size", "distribution", "latency"]
    for version, path in _moe_files(tables):
        d = _read(path, cols)
        kernels = d["kernel_source"].astype(str)
        min_latency = np.char.find(kernels, "min_latency") >= 0
        nongated = np.char.find(kernels, "nongated") >= 0
        sel = ((d["hidden_size"] == hidden) & (d["inter_size"] == inter) & (d["topk"] == topk)
               & (d["num_experts"] == experts) & (d["moe_tp_size"] == tp) & (d["moe_ep_size"] == 1)
               & ~min_latency & (nongated != gated))
        found = []
        for dtype in dtypes:
            at = sel & (d["moe_dtype"].astype(str) == dtype)
            for dist in MOE_DISTRIBUTIONS:
                rows = at & (d["distribution"].astype(str) == dist)
                if not rows.any():
                    continue
                names = set(kernels[rows])
                kernel = next((k for k in _MOE_PREFERRED if k in names), None) or _pick_kernel(kernels[rows])
                rows &= kernels == kernel
                tokens, idx = np.unique(d["num_tokens"][rows], return_index=True)
                found.append(MoETable(tokens.astype(float), d["latency"][rows][idx].astype(float), kernel, version,
                                      dtype, dist))
                break
        if found:
            return _faster(found)
    raise UsageError(f"no measured MoE layer of {experts} experts, top-{topk}, hidden {hidden}, expert "
                     f"intermediate {inter}, {weights} weights at TP{tp} for {tables.backend} on {tables.system}; "
                     "use --predictor roofline")


def _faster(tables: list[MoETable]) -> MoETable:
    """The fastest of one shape's tables in several dtypes (FP8 per tensor and block-scaled): the
    lowest geometric-mean latency over the token counts they all span (the first where they share
    none)."""
    if len(tables) == 1:
        return tables[0]
    lo, hi = max(t.tokens[0] for t in tables), min(t.tokens[-1] for t in tables)
    grid = np.unique(np.concatenate([t.tokens[(t.tokens >= lo) & (t.tokens <= hi)] for t in tables]))
    if not len(grid):
        return tables[0]
    return min(tables, key=lambda t: float(np.mean(np.log(np.interp(grid, t.tokens, t.ms)))))


def moe_shapes(tables: KernelTables, weights: str) -> list[tuple[int, int, int, int, int]]:
    """(hidden, inter, topk, experts, TP) of every MoE shape this engine's tables measured without
    expert parallelism in ``weights``' MoE dtypes, in any version."""
    dtypes = MOE_DTYPES.get(weights, ())
    keys = ("hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size")
    shapes: set[tuple[int, int, int, int, int]] = set()
    for _, path in _moe_files(tables):
        d = _read(path, ["moe_dtype", *keys, "moe_ep_size"])
        sel = (d["moe_ep_size"] == 1) & np.isin(d["moe_dtype"].astype(str), dtypes)
        shapes |= {tuple(int(x) for x in row) for row in zip(*(d[c][sel] for c in keys))}
    return sorted(shapes)


def _moe_files(tables: KernelTables) -> list[tuple[str, Path]]:
    """(version, path) of this engine's MoE tables: the version of ``tables`` first, then the others
    newest first."""
    base = tables.dir / "moe" / tables.backend
    versions = sorted((p.name for p in base.iterdir() if (p / "moe_perf.parquet").is_file()),
                      key=_version_key, reverse=True) if base.is_dir() else []
    versions.sort(key=lambda v: v != tables.version)  # stable: the rest keep their order
    return [(v, base / v / "moe_perf.parquet") for v in versions]

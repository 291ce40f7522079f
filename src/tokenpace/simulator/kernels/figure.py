"""A figure derived from measured kernel tables (``derive``, ``derive_moe``): its value, samples and
curve, and the dtypes each compute precision reads."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MS = 1e-3
# compute -> (GEMM dtype, bytes per weight, KV dtype); NVFP4 weights come with an FP8 KV cache, whose
# attention the "fp8" entry prices (the roofline attends at the KV's precision), so "fp4" has GEMMs only.
DTYPES = {"bf16": ("bfloat16", 2, "bfloat16"), "fp8": ("fp8", 1, "fp8"), "fp4": ("nvfp4", 0.5 + 1 / 16, "fp8")}


@dataclass(frozen=True)
class Figure:
    """One derived figure: its value, its samples (or the line's errors), what they were, and its
    curve where it has one (weight streaming by rows, decode attention by group)."""

    value: float
    samples: np.ndarray
    detail: str
    by_rows: tuple[tuple, ...] = ()  # (rows, efficiency, latency per GEMM s), (group, efficiency) or (GPUs, elements, s)
    statistic: str = ""  # what the value is, where not the median of the samples

    def spread(self) -> str:
        s = self.samples
        return self.statistic or f"median of {len(s)}, min {s.min():.3g}, max {s.max():.3g}"


def figure(samples, detail: str, by_rows: tuple[tuple, ...] = ()) -> Figure:
    """The median of ``samples``, each counted at most 1 (see ``capped``)."""
    s = capped(samples)
    return Figure(float(np.median(s)), s, detail, by_rows)


def capped(samples) -> np.ndarray:
    """Fractions of a peak, each at most 1. A table entry faster than the HBM peak had its operands
    in the L2 cache between the collector's repeated calls (small GEMMs on the L40S's 96 MB L2); in a
    model the next layer's weights are not there, and HBM is the bound."""
    return np.minimum(np.asarray(samples, dtype=float), 1.0)

"""What the fitted step model cannot express of a run's decode steps: a correction per batch size.

The fit (``fit.py``) explains every step with a few terms: FLOPs and bytes at two efficiencies,
overheads per step, sequence and token, ggml's row groups. Some engines' decode steps follow none
of them. On llama.cpp's CPU kernels (Gemma 3 270M, one thread, one KV buffer for all slots) one
ubatch of k decoding sequences costs 18.8, ~48, 80, 64, 98, 82, 119, 97 ms for k = 1 to 8
(``benchmarks/llama_ubatch_layout.py --kv-unified``, RESULTS 7n): 3 costs more than 4, 5 more than
6, 7 more than 8. No single row-group structure fits that, so the fit lands between, and every
other load's prediction inherits its misses.

So after the fit, each decode batch size with enough decode-only steps gets the mean of their
residuals (measured − fitted seconds) as ``RooflineParams.decode_delta_s``: a measured efficiency
curve by batch size, on top of the model (which still prices each step's own contexts). Only steps
during which no request arrived count (an arrival's host time is its own term). A batch size with
fewer than ``MIN_STEPS`` such steps gets none and is priced by the model alone: the report lists
the sizes corrected, and ``sim``'s coverage note already says which sizes a calibration saw.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from tokenpace.simulator.calibrate.steps import ObservedStep
from tokenpace.simulator.step_price import RooflineParams

MIN_STEPS = 3  # decode-only steps of one batch size, for its correction


def decode_deltas(params: RooflineParams, steps: Sequence[ObservedStep],
                  predicted_s: np.ndarray) -> tuple[RooflineParams, list[dict]]:
    """``params`` with the correction per decode batch size, and the report's rows (one per size
    seen: its steps, the mean residual, whether it was kept). ``predicted_s``: the fit's price of
    each step, in ``steps``' order."""
    residuals: dict[int, list[float]] = {}
    for step, predicted in zip(steps, predicted_s):
        b = step.batch
        if b.prefill or step.arrivals or b.decode_tokens_per_seq != 1 or not b.num_decode:
            continue
        residuals.setdefault(b.num_decode, []).append(step.duration_s - float(predicted))
    if not residuals:
        return params, []
    deltas: list[float | None] = [None] * max(residuals)
    rows = []
    for k in sorted(residuals):
        r = residuals[k]
        kept = len(r) >= MIN_STEPS
        mean = float(np.mean(r))
        if kept:
            deltas[k - 1] = mean
        rows.append({"decode_seqs": k, "steps": len(r), "mean_residual_ms": round(mean * 1e3, 3),
                     "corrected": kept})
    while deltas and deltas[-1] is None:
        deltas.pop()
    return replace(params, decode_delta_s=tuple(deltas)), rows

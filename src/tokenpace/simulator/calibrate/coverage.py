"""Whether a calibrated simulation stays within what its calibration saw.

A calibration fits the step-time model to the steps of one measured run, and those steps held
decode batches of the sizes that run's load produced (a closed loop at concurrency 4: mostly 4,
some 2 and 3). Inside that span the fit interpolates; outside it, it extrapolates, and a real
engine's step time need not follow the model there: on llama.cpp's CPU backend, a calibration
from concurrency 4 overstated the step at batch 1 by 78% (benchmarks/RESULTS.md section 7c),
because its quantized matmuls take a different kernel below four rows. So a calibrated
simulation states the span and, when more than ``MIN_SHARE`` of its decode steps lie outside it,
says the prediction extrapolates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tokenpace.simulator.timeline import TimelineRow

MIN_SHARE = 0.10  # decode steps outside the calibrated span before a run is said to extrapolate


def calibration_scope(calibration: Any, path: str) -> dict[str, Any]:
    """What a simulation needs to know of ``calibration`` (a Calibration read from ``path``)."""
    observed = (calibration.fit.get("observations") or {}).get("decode_batch_sizes") or []
    loads = [run.get("load") or {} for run in (calibration.source.get("runs") or [])]
    return {"path": str(path), "decode_batch_sizes": sorted(int(b) for b in observed),
            "fitted_on": [{k: load.get(k) for k in ("concurrency", "rate")} for load in loads]}


def coverage(scope: dict[str, Any], timeline: Sequence[TimelineRow]) -> dict[str, Any]:
    """The simulated decode steps against the calibrated span of decode batch sizes; ``note`` says
    how they stand, in words (a warning when ``extrapolates``)."""
    seen = scope.get("decode_batch_sizes") or []
    steps: dict[int, int] = {}
    for row in timeline:
        if row.decode_seqs:
            steps[row.decode_seqs] = steps.get(row.decode_seqs, 0) + row.steps
    total = sum(steps.values())
    out: dict[str, Any] = {**scope, "simulated_decode_batch_sizes": sorted(steps), "decode_steps": total}
    if not seen or not total:
        out.update(decode_steps_outside=None, share_outside=None, extrapolates=False,
                   note="the calibration saw no decode step: its span is unknown" if not seen else
                   "no decode step simulated")
        return out
    lo, hi = seen[0], seen[-1]
    outside = {b: n for b, n in steps.items() if not lo <= b <= hi}
    share = sum(outside.values()) / total
    extrapolates = share > MIN_SHARE
    if extrapolates:
        note = (f"{share:.0%} of the simulated decode steps had batch sizes ({_listed(sorted(outside))}) "
                f"outside the {span_text(seen)} the calibration saw: their step times are extrapolated "
                "(calibrate from a run whose load spans these batches)")
    elif outside:
        note = f"{share:.0%} of the simulated decode steps outside the decode batches {span_text(seen)} it saw"
    else:
        note = f"every simulated decode batch within the {span_text(seen)} it saw"
    out.update(decode_steps_outside=sum(outside.values()), share_outside=share, extrapolates=extrapolates,
               note=note)
    return out


def lone_gemv_warning(params: Any, steps: Sequence[Any]) -> str | None:
    """A warning when the fitted structure runs a step's rows past the last full row group one by one
    (ggml's GEMV) and no decode step of the run had fewer sequences than a group: then no step ran
    GEMV rows alone, and what a lone decode step costs (concurrency 1, or a queue draining) is not
    determined. On a Zen 4 CPU ggml grouped decode rows by 2, a run at concurrency 4 held no step of
    one sequence, and its calibration priced one 95-216% high (RESULTS 7zf). ``params``: the fitted
    RooflineParams; ``steps``: the ObservedSteps it was fitted to."""
    from tokenpace.simulator.step_price import GEMV_REMAINDERS

    rg = params.row_group
    if rg < 2 or params.row_remainder not in GEMV_REMAINDERS:
        return None
    if any(not s.batch.prefill and 0 < s.batch.num_decode < rg for s in steps):
        return None
    return (f"no decode step of the run had fewer than {rg} sequences (the fitted GEMM row group), so none ran "
            "GEMV rows alone: what a lone decode step costs is not determined, and predictions at loads that "
            "run one (concurrency 1, a queue draining) are extrapolated; calibrate from runs that include one "
            "(tokenpace calibrate c1.json c4.json)")


def span_text(sizes: Sequence[int]) -> str:
    if not sizes:
        return "none"
    return str(sizes[0]) if sizes[0] == sizes[-1] else f"{sizes[0]}–{sizes[-1]}"


def _listed(sizes: Sequence[int]) -> str:
    """Discrete sizes, listed (a span past six: they would not fit a line)."""
    return ", ".join(map(str, sizes)) if len(sizes) <= 6 else span_text(sizes)

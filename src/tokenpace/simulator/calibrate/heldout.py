"""How a calibration prices another run's engine steps: the step model checked apart from the queueing.

A prediction at another load can miss for two reasons: the step model prices that load's steps
wrongly (a batch size the fitted run never showed), or the simulated engine batches the requests
differently from the real one (which prompts enter together: a closed loop's phase). ``step_errors``
separates the two. It reconstructs the other run's engine steps as calibration does
(``observe_steps``), prices each with the calibration's step model (the step's own batch and
contexts, plus the host time of the requests that arrived during it), and compares, by step kind,
decode batch size and number of prompts. A group whose priced median is off says the step model is;
groups that are right under a prediction that is not say the batching is.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import numpy as np

from tokenpace.record import RequestRecord
from tokenpace.simulator.calibrate.calibration import Calibration
from tokenpace.simulator.calibrate.steps import ObservedStep, observe_steps
from tokenpace.simulator.roofline import RooflinePredictor


def priced_steps(calibration: Calibration, records: Iterable[RequestRecord]
                 ) -> tuple[RooflinePredictor, list[tuple[ObservedStep, float]]]:
    """The calibration's step model, and the run's unambiguous engine steps, each with its price in
    seconds (its batch and contexts, plus the host time of the requests that arrived during it).
    Raises ``UsageError`` where the run has no streamed request (as calibration does)."""
    observed = observe_steps(records, max_batched_tokens=calibration.max_batched_tokens,
                             max_num_seqs=calibration.max_num_seqs)
    params = calibration.roofline
    predictor = RooflinePredictor(calibration.model, calibration.hardware, calibration.weights,
                                  calibration.kv_cache_dtype, calibration.tp, params)
    return predictor, [(step, predictor.step_s(step.batch) + step.arrivals * params.arrival_s)
                       for step in observed.steps]


def step_errors(calibration: Calibration, records: Iterable[RequestRecord]) -> list[dict[str, Any]]:
    """The run's unambiguous engine steps, measured against the calibration's price, one row per
    (kind, decoding sequences, prompts) seen: steps, the medians in ms, the error of the priced median
    (priced / measured − 1, in %), and both totals in seconds. Raises ``UsageError`` where the run has
    no streamed request (as calibration does)."""
    groups: dict[tuple[str, int, int], list[tuple[float, float]]] = defaultdict(list)
    for step, priced in priced_steps(calibration, records)[1]:
        groups[step.kind, step.batch.num_decode, len(step.batch.prefill)].append((step.duration_s, priced))
    rows = []
    for (kind, decodes, prompts), pairs in sorted(groups.items(), key=lambda kv: (kv[0][2] > 0, kv[0][1:])):
        measured, priced = np.array(pairs).T
        m, p = float(np.median(measured)), float(np.median(priced))
        rows.append({"kind": kind, "decode_seqs": decodes, "prompts": prompts, "steps": len(pairs),
                     "measured_ms": round(m * 1e3, 3), "priced_ms": round(p * 1e3, 3),
                     "error_pct": round((p / m - 1) * 100, 1),
                     "measured_total_s": round(float(measured.sum()), 4),
                     "priced_total_s": round(float(priced.sum()), 4)})
    return rows

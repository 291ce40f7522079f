"""The simulator's validated error: how far its predictions fell from published measurements.

``data/error_band.json`` holds one entry per way a step is priced: ``roofline`` and ``kernels``
(written by ``python benchmarks/sim_fidelity.py --write-band`` from its run over the published
points), and ``calibration`` (a note from ``benchmarks/calibrate_llama.py``'s last repeats, written
by hand). Each entry has a ``source``; the two predictors' also carry ``median_abs_error`` (fractions
by metric group: throughput, ttft, tpot) and ``worst`` (the largest errors, as text). Every
simulated run quotes the entry for its predictor (``sim``'s result and console, the HTML report)
and so does every plan: a prediction is shown with how far such predictions have been off
(`tokenpace.reports.validated.band_text` says it in one line).
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any


@functools.cache
def _bands() -> dict[str, Any]:
    return json.loads(resources.files("tokenpace.simulator").joinpath("data/error_band.json").read_text("utf-8"))


def error_bands() -> dict[str, dict[str, Any]]:
    """Every entry of the shipped file (a copy), by name: roofline, kernels, calibration."""
    return {k: dict(v) for k, v in _bands().items() if not k.startswith("_")}


def error_band(predictor: str, calibrated: bool = False) -> dict[str, Any]:
    """The entry that describes a run priced by ``predictor`` ("roofline" or "kernels"), or by a
    calibration (whose step model is the roofline's, fitted to the user's own runs)."""
    return error_bands()["calibration" if calibrated else predictor]


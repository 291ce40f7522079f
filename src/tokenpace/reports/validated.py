"""A predictor's validated error (``tokenpace.simulator.error_band``'s entries) in one line."""

from __future__ import annotations

from typing import Any


def band_text(band: dict[str, Any], *, worst: bool = True) -> str:
    """The medians by metric group (or a calibration's note), then the worst errors: each of them
    with ``worst``, else only the largest."""
    m = band.get("median_abs_error")
    if not m:
        return band.get("note", "")
    n = band.get("points") or {}
    on = f" on {n['throughput']}/{n['ttft']}/{n['tpot']} published points" if {"throughput", "ttft", "tpot"} <= set(n) else ""
    text = f"median |error| throughput {m['throughput']:.1%}, TTFT {m['ttft']:.1%}, TPOT/ITL {m['tpot']:.1%}{on}"
    if worst and band.get("worst"):
        return f"{text}; worst {band['worst']}"
    if band.get("worst_abs_error") is not None:
        return f"{text}, worst {band['worst_abs_error']:.0%}"
    return text


def band_line(band: dict[str, Any]) -> str:
    """The short form every header and console line uses: the medians and the largest |error|, or
    for a calibration (fitted to the user's own runs) how such calibrations have done so far."""
    if band.get("median_abs_error"):
        return band_text(band, worst=False)
    return f"calibrations so far: {band_text(band)}"

"""The machine's own speed around a measured level, and an error with its drift taken out
(``benchmarks/calibrate_llama.py``): a shared VM's speed moves by up to half from one minute to the
next (RESULTS 7v), so each level is bracketed by probes of one fixed shape (3 requests one at a
time), and a prediction can be scaled by how much slower the probes ran around its level than
around the fitted one(s). A 3-request probe is about as noisy as the drift it would remove, so the
adjusted error is a hint, not the target."""

from __future__ import annotations

import statistics

METRICS = ("ttft_p50_ms", "tpot_p50_ms", "output_tok_s")


def speed(bracket: list[dict[str, float] | None]) -> dict[str, float] | None:
    """A level's machine speed: the mean of the probes just before and just after it."""
    if any(p is None for p in bracket):
        return None
    return {k: statistics.fmean(p[k] for p in bracket) for k in ("ttft_p50_ms", "tpot_p50_ms")}


def drift_adjusted(pred: dict[str, float], meas: dict[str, float], here: dict[str, float] | None,
                   fitted: list[dict[str, float] | None]) -> dict[str, float] | None:
    """The error once the machine's drift is taken out: the prediction scaled by how much slower the
    probes ran around this level than around the fitted level(s) (their geometric mean): TTFT by the
    probes' TTFT, TPOT by their TPOT, tokens/s by the inverse of their TPOT. None without probes."""
    if here is None or any(f is None for f in fitted):
        return None
    ratio = {k: here[k] / statistics.geometric_mean([f[k] for f in fitted]) for k in ("ttft_p50_ms", "tpot_p50_ms")}
    adjusted = {"ttft_p50_ms": pred["ttft_p50_ms"] * ratio["ttft_p50_ms"],
                "tpot_p50_ms": pred["tpot_p50_ms"] * ratio["tpot_p50_ms"],
                "output_tok_s": pred["output_tok_s"] / ratio["tpot_p50_ms"]}
    return {"speed_ratio": {k: round(v, 3) for k, v in ratio.items()},
            "error_pct": {k: round((adjusted[k] / meas[k] - 1) * 100, 1) for k in METRICS}}

"""Calibrate the simulator's step-time model from a measured run.

    from tokenpace.simulator.calibrate import calibrate, write_calibration
    cal = calibrate(records, model="gemma.gguf", hardware="cpu.json", max_num_seqs=8)
    write_calibration(cal, "cal.json")        # then: tokenpace sim --calibration cal.json ...

Parts: ``steps`` reconstructs the engine steps the run went through from its records; ``fit``
finds the MFU, MBU and the step and sequence overheads that explain their durations best;
``priors`` says what a term the steps cannot determine is assumed to be (from the model and the
hardware file alone); ``client`` measures a closed-loop client's turnaround; ``calibration`` is the file that carries
the result, the engine it describes and the fit's quality; ``heldout`` prices another run's steps with a
calibration (``step_errors``: the step model checked apart from the queueing).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from tokenpace.errors import UsageError
from tokenpace.record import RequestRecord
from tokenpace.simulator.calibrate.calibration import Calibration, load_calibration, write_calibration
from tokenpace.simulator.calibrate.client import (closed_loop_turnaround, closed_loop_turnarounds, copies_turnaround,
                                                  first_wave_gap, join_window, stream_join_from_places,
                                                  turnaround_spread)
from tokenpace.simulator.calibrate.coverage import lone_gemv_warning
from tokenpace.simulator.calibrate.decode_table import MIN_STEPS as MIN_DECODE_STEPS, decode_deltas
from tokenpace.simulator.calibrate.fit import (
    BOUNDS, MBU_BOUNDS, REMAINDERS, ROW_GROUPS, Fit, fit_roofline, step_weights,
)
from tokenpace.simulator.calibrate.priors import (
    DECODE_MFU_PRIOR, describe_decode_mfu_prior, describe_sequence_prior, sequence_prior_s,
)
from tokenpace.simulator.calibrate.heldout import step_errors
from tokenpace.simulator.calibrate.steps import ObservedStep, StepObservations, observe_steps
from tokenpace.simulator.catalog import (
    GPU, ModelSpec, Precision, get_gpu, get_model, get_precision, is_gguf_file,
)
from tokenpace.simulator.roofline import RooflineParams, RooflinePredictor

__all__ = ["Calibration", "ObservedStep", "StepObservations", "calibrate", "load_calibration",
           "observe_steps", "step_errors", "write_calibration"]

MIN_STEPS = 8
# ggml's CPU flash attention computes a batch of at least GGML_FA_TILE_Q (64) query rows in 64 x 64 tiles
# over the KV cells in use, skipping a KV tile the mask hides from every row of the query tile
# (ggml/src/ggml-cpu/common.h, ops.cpp: ggml_compute_forward_flash_attn_ext_tiled; shared_kv.tiled_cells).
LLAMA_CPP_ATTENTION_TILE_ROWS = 64
# What the report says of a parameter the run could not determine, and of what is not fitted.
UNDETERMINED = {
    "seq_overhead_s": "the steps could not tell a per-sequence cost from the other terms (every step held one "
                      "sequence, or a fit with it held at its prior explains them within 10% of the best RMS "
                      "error): assumed its prior, {prior}",
    "token_overhead_s": "a per-token cost did not explain the steps better than the FLOPs and bytes already "
                        "do (it is collinear with compute on compute-bound steps): assumed 0",
    "gemv_row_s": "computing the rows past the last full row group one by one (ggml's GEMV) did not explain "
                  "the steps better than padding them, or the steps could not tell it from the other terms: "
                  "assumed 0",
    "gemm_step_s": "no cost of running the GEMM kernel beyond its FLOPs and bytes was called for, or the steps "
                   "could not tell it from the other terms: assumed 0",
    "arrival_s": "the steps could not tell the host time of a request's arrival from the other terms (no step "
                 "of a batch seen both with and without a request arriving during it): assumed 0",
    "kv_scan_s": "the steps could not tell a cost per query row and KV cell of the step's whole batch (one KV "
                 "buffer shared by every sequence, each row visiting every cell) from the other terms: assumed 0",
    "head_step_s": "the steps could not tell a cost of a step of two or more sequences (an LM head over two or "
                   "more output rows) from the other terms: assumed 0",
    "row_remainder": "the steps could not tell whether a step's prompts ran in kernel invocations of their own, "
                     "after the decode tokens' (\"gemv-ubatch\": llama.cpp with a KV stream per slot splits a batch "
                     "into ubatches of equal tokens per sequence) or in one with them (\"gemv-pass\"): both fits are "
                     "within 10% of the best RMS error; the better of the two is kept",
    "decode_mfu": "the steps could not tell the decode rows' GEMM efficiency (a closed loop at one concurrency "
                  "runs one row-group count per batch size: a fit with it at its prior explains them within 10% "
                  "of the best RMS error along its profile): assumed its prior, {decode_prior}",
}
SHARED_KV_REMAINDER = ("\"gemv-ubatch\" not tried: with one KV buffer llama.cpp cuts a batch into ubatches in "
                       "batch order (split_simple, where a KV stream per slot splits them by sequence), so a step's "
                       "prompts share the decode tokens' kernel invocations; tried, it priced lone prompts 10-12% "
                       "low from a c=4 run (RESULTS 7zh)")
ASSUMED = {
    "efficiency_by_operator_class": "one MFU and one MBU replace the efficiency catalog's figures for every "
                                    "operator class (one run's steps cannot separate GEMM from attention "
                                    "efficiency); the catalog's ratios are not kept",
    "allreduce_latency_s": "not fitted: the catalog's base + 2(t-1) hops (all-reduces only run under TP)",
}


def calibrate(records: Iterable[RequestRecord] | Sequence[Iterable[RequestRecord]], *, model: str | ModelSpec,
              hardware: str | GPU,
              weights: str | Precision | None = None, kv_cache_dtype: str | Precision = "bf16", tp: int = 1,
              policy: str | None = None, max_num_seqs: int | None = None,
              max_batched_tokens: int | None = None, closed_loop_concurrency: int | None = None,
              source: dict[str, Any] | None = None, shared_kv: bool = False,
              attention_tile_rows: int | None = None, apply_join_window: bool | str = "arrival",
              apply_stream_interval: bool = True) -> Calibration:
    """Fit MFU, MBU and the per-step and per-sequence overheads of the roofline model to the
    run's engine steps.

    ``records``: one run's records, or a list of runs' records (their steps are pooled).
    ``closed_loop_concurrency``: the runs were closed loops with this many clients; their
    turnaround (from an end to the next send) is then measured for the simulator's clients.
    ``weights``: the weight precision; None takes a GGUF model's own (measured from the file),
    else BF16. The engine limits are recorded for ``sim --calibration``; ``max_batched_tokens``
    also tells which prompts were split over steps. ``shared_kv``: the engine ran one KV buffer for
    all sequences (llama.cpp's ``--kv-unified``), whose scan ``kv_scan_s`` then prices and the fit
    determines; else it stays 0. ``attention_tile_rows``: with ``shared_kv``, a step of at least this
    many query rows computes attention in tiles over every cell in use, the other sequences' cells
    priced as attention pairs (``RooflineParams.attention_tile_rows``); None: llama.cpp's CPU flash
    attention tile (``LLAMA_CPP_ATTENTION_TILE_ROWS``) with ``shared_kv``, else 0. ``apply_join_window``: where closed-loop sends that came after a
    step ended still joined the next one while another request waited to be taken in, the
    simulated engine gets the measured join window and its clients the measured spread of
    turnarounds (the default, "arrival" or True; False or "none": both are only reported,
    ``fit["client_turnaround"]``). ``apply_join_window="finish"``: the window opens after a step in
    which a sequence finished too (``RooflineParams.join_after``), and is measured from every send
    just after a step, whether or not another request waited. ``apply_stream_interval``: where the
    turnaround is copied and the run shows which places in a step's stream got their client's next
    request into the next step and which did not (``StepObservations.stream_places``), the simulated
    engine streams a step's sequences as far apart as the run's chunks came
    (``RooflineParams.stream_interval_s``) and takes in a next request that reaches it up to the
    fitted ``stream_join_s`` after the last (``client.stream_join_from_places``), so that a client
    whose sequence was streamed early gets its next request into the next batch, the join window
    applying too (the default; False: measured and reported only. Over seven sets of llama.cpp runs,
    medians past issue 25's targets 4 and 12 with it, 8 and 16 without: RESULTS 7zj)."""
    if apply_join_window == "none":
        apply_join_window = False
    m, hw = get_model(model), get_gpu(hardware)
    if weights is None:
        weights = model if isinstance(model, str) and is_gguf_file(model) else "bf16"
    w, kv = get_precision(weights), get_precision(kv_cache_dtype)
    runs = list(records)
    if not runs or isinstance(runs[0], RequestRecord):
        runs = [runs]  # one run
    observed = _pool([observe_steps(run, max_batched_tokens=max_batched_tokens, max_num_seqs=max_num_seqs)
                      for run in runs])
    if len(observed.steps) < MIN_STEPS:
        raise UsageError(f"only {len(observed.steps)} engine steps could be told apart in the run "
                         f"(skipped: {observed.skipped or 'none'}); calibration needs at least {MIN_STEPS}")
    if attention_tile_rows is None:
        attention_tile_rows = LLAMA_CPP_ATTENTION_TILE_ROWS if shared_kv else 0
    if attention_tile_rows < 0:
        raise UsageError(f"attention_tile_rows must be >= 0, not {attention_tile_rows}")
    base = RooflineParams(attention_tile_rows=attention_tile_rows)
    predictor = RooflinePredictor(m, hw, w, kv, tp, base)
    fit = fit_roofline(predictor, observed.steps, base, seq_prior_s=sequence_prior_s(m, hw),
                       decode_mfu=DECODE_MFU_PRIOR, shared_kv=shared_kv)
    fit, corrections = _with_decode_deltas(fit, observed.steps)
    report = fit_report(fit, observed, prior=describe_sequence_prior(m, hw),
                        decode_prior=describe_decode_mfu_prior(hw), shared_kv=shared_kv)
    report["decode_corrections"] = corrections
    lone = lone_gemv_warning(fit.params, observed.steps)
    if lone:
        report["warnings"] = [lone]
    report["observations"]["runs"] = len(runs)
    turnaround = first_gap = 0.0
    params, spread = fit.params, ()
    if closed_loop_concurrency:
        # Copied only where it mattered: where a good share of the clients' next requests missed the
        # step that began as the previous ones ended (llama.cpp: 47-87%); an engine that takes nearly
        # every request a moment into a step (the simulator's real-time server) is better copied with
        # none. The join window below lets the copied turnaround still join where the engine did.
        pairs = [closed_loop_turnaround(run, closed_loop_concurrency) for run in runs]
        counted = sum(n for _, n in pairs)
        measured = sum(t * n for t, n in pairs) / counted if counted else 0.0
        joined, waited = observed.joins_after_start
        after = "finish" if apply_join_window == "finish" else "arrival"
        # (A window that opens after finishes is asked for: whether a send joins is then the window's
        # and the turnarounds' to decide, so the turnaround is copied whichever way most went.)
        turnaround = measured if copies_turnaround(joined, waited) or after == "finish" else 0.0
        # The first wave's sends, one after another: copied where the turnaround is (an engine that
        # began its steps without the clients' late sends began its first step without the later
        # first sends too).
        gap, gaps_counted = first_wave_gap(runs)
        first_gap = gap if turnaround else 0.0
        # Sends that joined a step although they came after the step before ended, while another
        # request waited to be taken in: the engine takes requests in between steps. The join window
        # and the clients' spread of turnarounds are measured, reported and (unless told not to)
        # applied: with the first wave's gap, they brought the fitted level's TTFT within 2% on two
        # sets of llama.cpp runs, where without them it missed by 7% (RESULTS 7z; before the gap,
        # 7q found them making it worse).
        # The engine streams a step's sequences one after another (RESULTS 7zb), so a client whose
        # sequence came early can send its next request before the next batch forms: taken in up to
        # ``stream_join_s`` after the step's last chunk (negative: before it). The join window applies
        # on top (a waiting request's slot launch holds the next batch back, 7y).
        # The cutoff is fitted from the places in the stream whose clients got in (the engine's order),
        # where the run shows both outcomes; else nothing is applied.
        interval = observed.stream_interval_s if turnaround else 0.0
        stream = bool(interval and apply_stream_interval)
        offsets_joined, offsets_waited = observed.join_offsets
        basis = observed.join_offsets_any if after == "finish" else (offsets_joined, offsets_waited)
        window = join_window(*basis) if turnaround else 0.0
        measured_spread: tuple[float, ...] = ()
        if window or interval:
            gaps = np.concatenate([closed_loop_turnarounds(run, closed_loop_concurrency) for run in runs])
            measured_spread = turnaround_spread(gaps)
        by_places = stream_join_from_places(observed.stream_places, interval, measured_spread) if interval else None
        stream = stream and by_places is not None
        stream_join_s = by_places if by_places is not None else 0.0
        if stream:
            params = replace(params, stream_interval_s=interval, stream_join_s=stream_join_s)
        if window or stream:
            if stream or apply_join_window:
                spread = measured_spread
            if apply_join_window and window:
                params = replace(params, join_window_s=window, join_after=after)
        report["client_turnaround"] = {"median_ms": round(measured * 1e3, 3), "sends": counted,
                                       "next_requests_joined_the_step_begun": joined,
                                       "next_requests_waited_a_step": waited,
                                       "simulated_turnaround_ms": round(turnaround * 1e3, 3),
                                       "first_wave_gap_ms": round(gap * 1e3, 3), "first_wave_gaps": gaps_counted,
                                       "simulated_first_wave_gap_ms": round(first_gap * 1e3, 3),
                                       "while_another_waited": {
                                           "joined": len(offsets_joined), "waited": len(offsets_waited),
                                           "joined_delay_ms": _ms_range(offsets_joined),
                                           "waited_delay_ms": _ms_range(offsets_waited)},
                                       "join_window_ms": round(window * 1e3, 3),
                                       "join_window_after": after,
                                       "turnarounds_ms": [round(t * 1e3, 3) for t in measured_spread],
                                       "join_window_applied": bool(params.join_window_s),
                                       "stream_interval_ms": round(observed.stream_interval_s * 1e3, 4),
                                       "stream_join_ms": round(stream_join_s * 1e3, 4),
                                       "stream_join_fitted": by_places is not None,
                                       "next_request_in_time_by_chunks_after": _places_table(observed.stream_places),
                                       "stream_interval_applied": stream}
    return Calibration(model=m, hardware=hw, weights=w, kv_cache_dtype=kv, roofline=params, tp=tp,
                       policy=policy, max_num_seqs=max_num_seqs, max_batched_tokens=max_batched_tokens,
                       turnaround_s=turnaround, turnarounds_s=spread, first_wave_gap_s=first_gap, fit=report,
                       source=source or {})


def _ms_range(values: Sequence[float]) -> list[float] | None:
    return [round(min(values) * 1e3, 3), round(max(values) * 1e3, 3)] if values else None


def _with_decode_deltas(fit: Fit, steps: list[ObservedStep]) -> tuple[Fit, dict[str, Any]]:
    """The fit with a correction per decode batch size (``decode_table``), its predictions and
    RMS error those of the corrected model (what the simulator runs), and what the report says."""
    params, rows = decode_deltas(fit.params, steps, fit.predicted_s)
    added = np.array([0.0 if s.batch.prefill else params.decode_delta(s.batch.num_decode, s.batch.decode_tokens_per_seq)
                      for s in steps])
    predicted = fit.predicted_s + added
    y, w = np.array([s.duration_s for s in steps]), step_weights(steps)

    def rms(p: np.ndarray) -> float:
        return float(np.sqrt(np.sum(w * (p / y - 1.0) ** 2) / np.sum(w)))

    report = {"method": "after the fit, each decode batch size with at least "
                        f"{MIN_DECODE_STEPS} decode-only steps (no request arriving during them) gets the mean of "
                        "their residuals (measured − fitted seconds), added to the model's price of every "
                        "decode-only step of that size: a measured efficiency curve by batch size",
              "by_batch": rows, "rms_relative_error_before": round(rms(fit.predicted_s), 5),
              "rms_relative_error_after": round(rms(predicted), 5)}
    return replace(fit, params=params, predicted_s=predicted), report


def _pool(observations: list[StepObservations]) -> StepObservations:
    if len(observations) == 1:
        return observations[0]
    skipped: Counter[str] = Counter()
    prompt_steps: Counter[int] = Counter()
    for o in observations:
        skipped.update(o.skipped)
        prompt_steps.update(o.prompt_steps)
    return StepObservations(steps=[s for o in observations for s in o.steps],
                            requests=sum(o.requests for o in observations),
                            gap_threshold_ms=max(o.gap_threshold_ms for o in observations), skipped=dict(skipped),
                            prompt_steps=dict(sorted(prompt_steps.items())),
                            joins_after_start=(sum(o.joins_after_start[0] for o in observations),
                                               sum(o.joins_after_start[1] for o in observations)),
                            join_offsets=_pooled_offsets(o.join_offsets for o in observations),
                            join_offsets_any=_pooled_offsets(o.join_offsets_any for o in observations),
                            stream_spreads=tuple(x for o in observations for x in o.stream_spreads),
                            stream_places=tuple(x for o in observations for x in o.stream_places))


def _places_table(places) -> dict[str, list[int]]:
    """``StepObservations.stream_places`` as {chunks after: [next requests in time, steps seen]}."""
    table: dict[int, list[int]] = {}
    for after, joined in places:
        row = table.setdefault(after, [0, 0])
        row[0] += joined
        row[1] += 1
    return {str(a): table[a] for a in sorted(table)}


def _pooled_offsets(pairs) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Runs' (joined, waited) delays, pooled."""
    pairs = list(pairs)
    return tuple(t for p in pairs for t in p[0]), tuple(t for p in pairs for t in p[1])


def fit_report(fit: Fit, observed: StepObservations, prior: str = "0",
               decode_prior: str = "MFU's", shared_kv: bool = False) -> dict[str, Any]:
    """What the calibration file says about the fit: method, data, parameters' ranges, residuals."""
    steps = observed.steps
    y = np.array([s.duration_s for s in steps])
    rel = fit.predicted_s / y - 1.0
    kinds = np.array([s.kind for s in steps])
    residuals = {"all": _stats(rel)}
    for kind in ("prefill", "mixed", "decode"):
        if (kinds == kind).any():
            residuals[kind] = _stats(rel[kinds == kind])
    by_batch = []
    decode_only = kinds == "decode"
    sizes = np.array([s.batch.num_decode for s in steps])
    for b in sorted(set(sizes[decode_only].tolist())):
        pick = decode_only & (sizes == b)
        measured, predicted = float(np.median(y[pick])), float(np.median(fit.predicted_s[pick]))
        p10, p90 = np.percentile(y[pick], [10, 90])
        by_batch.append({"decode_seqs": b, "steps": int(pick.sum()), "measured_ms": round(measured * 1e3, 3),
                         "measured_p10_ms": round(float(p10) * 1e3, 3), "measured_p90_ms": round(float(p90) * 1e3, 3),
                         "predicted_ms": round(predicted * 1e3, 3),
                         "error_pct": round((predicted / measured - 1) * 100, 1)})
    return {
        "method": "weighted least squares on relative step-time residuals; MFU on a log grid over "
                  f"[{BOUNDS[0]}, {BOUNDS[1]}] and MBU over [{MBU_BOUNDS[0]}, {MBU_BOUNDS[1]}] (above 1: faster "
                  "than the hardware file's bandwidth, as weights in a CPU's cache are) refined around the best "
                  "point, the step, sequence, token, kernel-path and arrival overheads in closed form (>= 0) at each "
                  f"point, for each GEMM row group in {list(ROW_GROUPS)} with its remainder {' or '.join(REMAINDERS)} "
                  "(ggml's GEMV: row by row, a weight pass each, or row by row at a fitted cost; gemv-ubatch: a "
                  "weight pass each, with the prompts in kernel invocations of their own, as equally simple as "
                  "gemv-pass, the better of the two kept; there the decode "
                  "rows' GEMM FLOPs at a decode MFU of their own, held at its prior unless a profile over it, "
                  "MFU, MBU and the overheads searched again at each value, says otherwise), each with the "
                  "per-sequence overhead fitted and held at its prior; the simplest model (no per-token term, the "
                  "per-sequence overhead at its prior, a padded remainder, the smallest row group) whose RMS "
                  "error is within the ranges' limit of the best is kept",
        "weights": "steps with prompt tokens and decode-only steps weigh half each; within the decode steps "
                   "each batch size seen weighs alike",
        "fitted": ["mfu", "mbu", "step_overhead_s", "seq_overhead_s", "token_overhead_s", "row_group",
                   "row_remainder", "gemv_row_s", "gemm_step_s", "decode_mfu", "arrival_s", "kv_scan_s", "head_step_s", "decode_delta_s"],
        "undetermined": {name: UNDETERMINED[name].format(prior=prior, decode_prior=decode_prior)
                         for name in fit.undetermined},
        "assumed": {**ASSUMED, "row_remainder": SHARED_KV_REMAINDER} if shared_kv else ASSUMED,
        "rms_relative_error": round(fit.rms_rel, 5),
        "ranges": {k: [_sig(lo), _sig(hi) if np.isfinite(hi) else None] for k, (lo, hi) in fit.ranges.items()},
        "ranges_definition": "values over which the best weighted RMS relative error stays within 10% "
                             "of the minimum (or 1 point of it): narrow means well determined by this run",
        "at_bound": list(fit.at_bound),
        "observations": observed.describe(),
        "residuals_pct": residuals,
        "decode_step_by_batch": by_batch,
        "step_noise": step_noise(y, fit.predicted_s, kinds),
    }


def step_noise(measured_s: np.ndarray, predicted_s: np.ndarray, kinds: np.ndarray) -> dict[str, Any]:
    """How widely the run's steps spread around the fitted model: the robust standard deviation
    (1.4826 × the median absolute deviation) of log(measured / fitted), over all steps and by kind.
    ``tokenpace sim --step-noise`` takes ``sd``: the simulated steps then spread as these did (the
    model's own misfit counted in, so it is an upper bound on the engine's noise)."""
    log_ratio = np.log(measured_s / predicted_s)

    def sd(x: np.ndarray) -> float:
        return round(float(1.4826 * np.median(np.abs(x - np.median(x)))), 4)

    return {"sd": sd(log_ratio),
            "by_kind": {k: sd(log_ratio[kinds == k]) for k in ("prefill", "mixed", "decode") if (kinds == k).any()},
            "definition": "1.4826 × the median absolute deviation of log(measured / fitted step seconds), "
                          "the model's misfit included; simulate with tokenpace sim --step-noise SD"}


def _stats(rel: np.ndarray) -> dict[str, float | int]:
    pct = rel * 100
    return {"steps": int(len(pct)), "mean": round(float(pct.mean()), 2),
            "rms": round(float(np.sqrt((pct ** 2).mean())), 2),
            "p90_abs": round(float(np.percentile(np.abs(pct), 90)), 2)}


def _sig(x: float) -> float:
    return float(f"{x:.4g}")

"""What ``benchmarks/calibrate_llama.py`` prints: each repeat's fit and predictions (with how its
steps held prompts, ``prompts_per_step``), and the errors' median and range over the repeats.

How far a median error can be trusted (``resampled_errors``, ``print_resolution``): a level's p50
comes from 16-48 requests, and at 2-8 clients a closed loop's TTFTs fall into bands (a prompt beside
decodes, behind another prompt, ...), so which requests a run holds moves its p50 by more than the
targets. The measured run and its simulation draw the same lengths (request i alike in both), so the
requests are resampled in pairs (``tokenpace.reports.bootstrap.paired_ratio_replicates``): what the
draw of lengths puts into both p50s cancels, and what is left is how the two disagree. The 95%
interval of the median over the repeats then says whether a miss lies past the target whatever
requests the runs happened to hold."""

from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np

from tokenpace.reports.bootstrap import paired_ratio_replicates
from tokenpace.reports.pairing import paired_samples_ms, same_requests
from tokenpace.results.records import read_records

from _machine_speed import METRICS

# The latency metrics resampled (output tokens/s is a whole run's: no request carries it alone).
RESAMPLED = {"ttft_p50_ms": "ttft", "tpot_p50_ms": "tpot"}
# Each level's target for |error|: from one run, the other levels within 10%; from several, every level within 5%.
TARGET_ONE, TARGET_SEVERAL = 10.0, 5.0


def prompts_per_step(step_rows: list[dict]) -> dict[int, int]:
    """How many of a run's steps read off its records computed 1, 2, ... prompts, from its
    ``step_errors`` rows. Past the slots a closed loop's queued prompts share a step only where
    requests ended in the same step, so this shows how grouped a run's phase was (RESULTS 7zi: at
    c=16 the engine's 3-7 steps of several prompts against the simulation's 1 made about 5 of the
    12.5 points of its TPOT error)."""
    counts: dict[int, int] = {}
    for row in step_rows:
        if row["prompts"]:
            counts[row["prompts"]] = counts.get(row["prompts"], 0) + row["steps"]
    return dict(sorted(counts.items()))


def print_fit(result: dict) -> None:
    r = result["roofline"]
    terms = " · ".join(f"{k.removesuffix('_s')} {r[k] * 1e9:.1f} ns" if k == "kv_scan_s" else
                       f"{k.removesuffix('_s')} {r[k] * 1e3:.2f} ms" for k in r
                       if k.endswith("_s") and k not in ("allreduce_latency_s", "decode_delta_s") and r[k])
    print(f"  fit from c={result['fit_from']}: MFU {r['mfu']:.3f} · MBU {r['mbu']:.3f} · row group "
          f"{r['row_group']} ({r.get('row_remainder', 'pad')}) · {terms or 'no overheads'} · RMS step error "
          f"{result['rms_step_error'] * 100:.1f}% over {result['steps']} steps; undetermined: "
          f"{', '.join(result['undetermined']) or 'none'}")
    by_batch = " ".join(f"{b['decode_seqs']}:{b['measured_ms']:.0f}/{b['predicted_ms']:.0f}"
                        for b in result["decode_step_by_batch"])
    print(f"    decode step ms by batch, measured/fitted: {by_batch}")
    deltas = r.get("decode_delta_s") or []
    if deltas:
        print("    correction by decode batch, ms: " + " ".join(
            f"{k}:{d * 1e3:+.1f}" for k, d in enumerate(deltas, 1) if d is not None))
    for row in result["rows"]:
        cells = [f"{row['measured'][k]:.1f} / {row['predicted'][k]:.1f} ({row['error_pct'][k]:+.1f}%)" for k in METRICS]
        mark = "*" if row["fitted_here"] else " "
        adj = row.get("drift_adjusted")
        tail = "" if adj is None else (f"  · machine {adj['speed_ratio']['tpot_p50_ms']:.2f}x, drift-adjusted "
                                       + " ".join(f"{adj['error_pct'][k]:+.1f}%" for k in METRICS))
        print(f"    c={row['concurrency']:<2}{mark} TTFT {cells[0]:>26}  TPOT {cells[1]:>24}  tok/s {cells[2]:>22}{tail}")
        if not row["fitted_here"]:  # the step model apart from the batching: its steps, priced
            print("          its steps' ms, measured/priced: " + " ".join(
                f"{g['decode_seqs']}{'+' + str(g['prompts']) + 'p' if g['prompts'] else ''}:"
                f"{g['measured_ms']:.0f}/{g['priced_ms']:.0f}" for g in row["steps"] if g["steps"] >= 3))
        shared = row.get("prompts_per_step")
        if shared:  # (keys are strings once read back from JSON)
            meas, sim = ({int(k): n for k, n in shared[side].items()} for side in ("measured", "simulated"))
            if max([*meas, *sim, 1]) > 1:
                print("          steps by prompts in them, measured/simulated: " + " ".join(
                    f"{k}:{meas.get(k, 0)}/{sim.get(k, 0)}" for k in sorted({*meas, *sim})))


def summary(results: list[list[dict]], fit_from: list[list[int]], levels: list[int]) -> list[dict]:
    """Per fit and level: each metric's error, median and range over the repeats."""
    table = []
    for f, srcs in enumerate(fit_from):
        for i, c in enumerate(levels):
            rows = [rep[f]["rows"][i] for rep in results]
            errs = {k: [row["error_pct"][k] for row in rows] for k in METRICS}
            adjusted = [row["drift_adjusted"] for row in rows if row.get("drift_adjusted")]
            table.append({"fit_from": "+".join(map(str, srcs)), "concurrency": c, "fitted_here": c in srcs,
                          **{k: _spread(v) for k, v in errs.items()},
                          "drift_adjusted": {k: _spread([a["error_pct"][k] for a in adjusted]) for k in METRICS}
                          if len(adjusted) == len(rows) else None})
    return table


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def print_table(table: list[dict], key: str | None = None) -> None:
    print(f"  {'fit':>7} {'c':>3}  {'TTFT p50':>24}  {'TPOT p50':>24}  {'output tok/s':>24}")
    for row in table:
        cells_of = row if key is None else row[key]
        cells = [f"{cells_of[k]['median']:+.1f}% [{cells_of[k]['min']:+.1f}, {cells_of[k]['max']:+.1f}]" for k in METRICS]
        print(f"  {row['fit_from']:>7} {row['concurrency']:>2}{'*' if row['fitted_here'] else ' '}  "
              f"{cells[0]:>24}  {cells[1]:>24}  {cells[2]:>24}")


def resampled_errors(measured: Path, predicted: Path, seed: int) -> dict[str, np.ndarray]:
    """Per latency metric, the predicted p50's error (%) over 2,000 resamples of the requests, each
    measured request drawn with the simulated request of the same index (the same lengths)."""
    meas, pred = read_records(measured), read_records(predicted)
    if not same_requests(meas, pred):
        raise SystemExit(f"{predicted} does not hold {measured}'s requests: cannot pair them")
    return {name: paired_ratio_replicates(*paired_samples_ms(meas, pred, metric), 0.5, seed=seed) * 100
            for name, metric in RESAMPLED.items()}


def target(row: dict) -> float:
    """The |error| a table row must stay within (issue 25, requirement 3)."""
    return TARGET_SEVERAL if "+" in row["fit_from"] else TARGET_ONE


def resolution(results: list[list[dict]], fit_from: list[list[int]], levels: list[int]) -> list[dict]:
    """Per fit and level: the 95% interval of the median error over the repeats, each repeat's
    requests resampled in pairs (the same resample number taken across the repeats' own draws)."""
    table = []
    for f, srcs in enumerate(fit_from):
        for i, c in enumerate(levels):
            rows = [rep[f]["rows"][i] for rep in results]
            interval = {}
            for k in RESAMPLED:
                medians = np.median(np.vstack([row["_resampled"][k] for row in rows]), axis=0)
                lo, hi = np.quantile(medians, [0.025, 0.975])
                interval[k] = (float(lo), float(hi))
            table.append({"fit_from": "+".join(map(str, srcs)), "concurrency": c, "fitted_here": c in srcs,
                          "interval": interval})
    return table


def print_resolution(table: list[dict], errors: list[dict]) -> None:
    """The intervals, and which medians past the target lie past it whatever requests the runs held."""
    print(f"\nthe medians' 95% interval when each repeat's requests are resampled in pairs (measured request i with "
          f"simulated request i: the same lengths); target |error| {TARGET_ONE:g}% from one run, {TARGET_SEVERAL:g}% "
          "from several")
    print(f"  {'fit':>7} {'c':>3}  {'TTFT p50':>18}  {'TPOT p50':>18}")
    verdicts = {"beyond": [], "unresolved": [], "within, sure": 0, "within, unsure": 0}
    for row, err in zip(table, errors):
        cells = []
        for k in RESAMPLED:
            lo, hi = row["interval"][k]
            cells.append(f"[{lo:+.1f}, {hi:+.1f}]")
            t, median = target(row), err[k]["median"]
            name = f"c={row['concurrency']} {k.split('_')[0].upper()} from {row['fit_from']} ({median:+.1f}%)"
            if abs(median) > t:
                verdicts["beyond" if lo > t or hi < -t else "unresolved"].append(name)
            else:
                verdicts["within, sure" if -t <= lo and hi <= t else "within, unsure"] += 1
        print(f"  {row['fit_from']:>7} {row['concurrency']:>2}{'*' if row['fitted_here'] else ' '}  "
              f"{cells[0]:>18}  {cells[1]:>18}")
    print(f"  medians past their target: {len(verdicts['beyond']) + len(verdicts['unresolved'])}; past it over "
          f"the whole interval: {len(verdicts['beyond'])} ({', '.join(verdicts['beyond']) or 'none'}); "
          f"the interval reaching back inside: {len(verdicts['unresolved'])} "
          f"({', '.join(verdicts['unresolved']) or 'none'})")
    print(f"  medians within their target: {verdicts['within, sure'] + verdicts['within, unsure']}; the whole "
          f"interval within it: {verdicts['within, sure']}")


def without_resamples(results: list[list[dict]]) -> list[list[dict]]:
    """The repeats' results as ``--json`` prints them: each row without its resampled errors."""
    return [[{**r, "rows": [{k: v for k, v in row.items() if k != "_resampled"} for row in r["rows"]]} for r in rep]
            for rep in results]

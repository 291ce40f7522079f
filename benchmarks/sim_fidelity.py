"""How close the simulator comes to published measurements, before and after engine presets.

Runs every point of REFERENCE section 5 and of ``published_points.json`` (TensorRT-LLM trtllm-bench
max-throughput rows, gptSessionBenchmark static batches and batch-1 TTFT, a vLLM single stream) with
the setup each source describes (``_fidelity_points.py``), twice: ``before`` (the documented flags
as they behaved before engine presets) and ``after`` (the source engine's preset). Prints each
point's error, the median |error| per metric group (throughput, TTFT, TPOT/ITL, E2E) and the worst
points. The roofline efficiencies are the library defaults (the efficiency catalog); nothing is
fitted to any point.

Then, apart, the extra published points of ``extra_points.json`` (beside this script: NIM's
closed-loop table under load, read over its steady state, and vLLM CI latency runs under TP), with
medians of their own, so the issue's figures stay comparable from run to run, and again for their
dense models alone (mixture-of-experts rows left out), so those stay comparable as MoE rows join.

    .venv/bin/python benchmarks/sim_fidelity.py                          # ../shared/published_points.json
    .venv/bin/python benchmarks/sim_fidelity.py --points PATH --json     # another file; machine-readable
    .venv/bin/python benchmarks/sim_fidelity.py --no-extra               # the issue's points only
    .venv/bin/python benchmarks/sim_fidelity.py --write-band             # and update the validated error
                                                                          # every sim and plan quotes
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _aic_estimate import estimate as aic_estimate  # noqa: E402
from _fidelity_band import BAND_FILE, write_band  # noqa: E402
from _fidelity_points import Setup, published_points, reference_points  # noqa: E402

import dataclasses  # noqa: E402

from tokenpace.errors import UsageError  # noqa: E402
from tokenpace.simulator import RooflineParams, SimConfig, SimRequest, get_model, simulate  # noqa: E402
from tokenpace.simulator.kernels import tables_available  # noqa: E402

WHENS = ("before", "after", "kernels", "aic")

GROUPS = {
    "throughput": ("output_tok_s_total", "output_tok_s_per_gpu", "output_tok_s", "prefill_tok_s", "decode_tok_s"),
    "TTFT": ("ttft_ms",),
    "TPOT/ITL": ("itl_ms", "tpot_ms"),
    "E2E": ("e2e_ms",),
}


def measure(s: Setup, config: SimConfig) -> dict[str, float]:
    """The point's metrics the way its source reports them (and, under "config", the configuration
    the simulator resolved: a preset's workload heuristic applies inside ``simulate``)."""
    res = simulate(config, [SimRequest(s.prompt, s.output) for _ in range(s.n)])
    return {**_metrics(s, config, res), "config": res.config}


def _metrics(s: Setup, config: SimConfig, res) -> dict[str, float]:
    recs = [r for r in res.records if r.status == "ok"]
    if len(recs) < len(res.records):
        raise RuntimeError(f"{s.name}: {len(res.records) - len(recs)} requests failed")
    start = min(r.sent_ns for r in recs)
    end = max(r.last_token_ns for r in recs)
    out = sum(r.output_tokens for r in recs)
    if s.kind == "offline":
        return {"output_tok_s_total": out / ((end - start) / 1e9), "preemptions": res.stats["preemptions"]}
    if s.kind == "static":
        return {"output_tok_s_per_gpu": out / ((end - start) / 1e9) / config.tp}
    if s.kind == "batch":  # prefill all prompts, then decode
        prefill_end = max(r.first_token_ns for r in recs)
        return {"prefill_tok_s": s.n * s.prompt / (prefill_end / 1e9),
                "decode_tok_s": s.n * (s.output - 1) / ((end - prefill_end) / 1e9)}
    if s.kind == "latency":
        return {"e2e_ms": (end - start) / 1e6}
    if s.steady:
        return _steady(recs, config.concurrency)
    r = recs[-1]
    ttft = (r.first_token_ns - r.sent_ns) / 1e6
    tpot = statistics.fmean((x.last_token_ns - x.first_token_ns) / (x.output_tokens - 1) / 1e6
                            for x in recs) if s.output > 1 else float("nan")
    return {"ttft_ms": ttft, "itl_ms": tpot, "tpot_ms": tpot,
            "output_tok_s": r.output_tokens / ((r.last_token_ns - r.sent_ns) / 1e9),
            "e2e_ms": (r.last_token_ns - r.sent_ns) / 1e6}


def _steady(recs, concurrency: int) -> dict[str, float]:
    """A closed loop's means over its steady state, as genai-perf reports a run from its stable
    measurement windows: the requests sent after the first wave had completed (the first
    ``concurrency`` completions) and done before the last request was sent (the drain); output
    tokens/s over that window, of the requests that completed in it."""
    first_wave_done = sorted(r.last_token_ns for r in recs)[concurrency - 1]
    last_send = max(r.sent_ns for r in recs)
    win = [r for r in recs if r.sent_ns >= first_wave_done and r.last_token_ns <= last_send]
    if not win or last_send <= first_wave_done:
        raise RuntimeError("no steady state: too few requests for the concurrency")
    done = [r for r in recs if first_wave_done <= r.last_token_ns <= last_send]
    return {"ttft_ms": statistics.fmean((r.first_token_ns - r.sent_ns) / 1e6 for r in win),
            "itl_ms": statistics.fmean((r.last_token_ns - r.first_token_ns) / (r.output_tokens - 1) / 1e6
                                       for r in win),
            "output_tok_s": sum(r.output_tokens for r in done) / ((last_send - first_wave_done) / 1e9)}


def group_of(metric: str) -> str:
    return next(g for g, ms in GROUPS.items() if metric in ms)


def run(setups: list[Setup]) -> list[dict]:
    rows = []
    for s in setups:
        t0 = time.perf_counter()
        got = {"before": measure(s, s.before), "after": measure(s, s.after)}
        why_not = None
        if tables_available():
            try:
                got["kernels"] = measure(s, dataclasses.replace(s.after, predictor="kernels"))
            except UsageError as exc:
                why_not = str(exc)
        else:
            why_not = "aiconfigurator-core not installed"
        aic = aic_estimate(s)
        if isinstance(aic, dict):
            got["aic"] = aic
        wall = time.perf_counter() - t0
        for metric, published in s.published.items():
            row = {"point": s.name, "metric": metric, "group": group_of(metric), "published": published,
                   "source": s.source, "kind": s.kind, "input": s.prompt, "output": s.output, "requests": s.n,
                   "assumptions": s.assumptions, "wall_s": round(wall, 2), "moe": get_model(s.after.model).is_moe}
            for when, m in got.items():
                if metric not in m:
                    continue
                row[when] = round(m[metric], 2)
                row[f"{when}_error_pct"] = round((m[metric] / published - 1) * 100, 1)
                if "preemptions" in m:
                    row[f"{when}_preemptions"] = m["preemptions"]
            if "kernels" not in got:
                row["kernels"] = row["kernels_error_pct"] = None
                row["kernels_why_not"] = why_not
            else:
                row["kernels_tables"] = _tables_line(got["kernels"]["config"])
            if "aic" not in row:
                row["aic"] = row["aic_error_pct"] = None
                row["aic_why_not"] = aic if isinstance(aic, str) else f"no estimate of {metric}"
            row["config"] = _config_line(got["after"]["config"])
            rows.append(row)
    return rows


def _config_line(d: dict) -> str:
    engine = (d.get("engine") or {}).get("preset") or "none"
    return (f"engine={engine} model={d['model']} gpu={d['gpu']} tp={d['tp']} weights={d['weights']} "
            f"kv={d['kv_cache_dtype']} policy={d['policy']} admission={d['admission']} "
            f"max_num_seqs={d['max_num_seqs']} max_batched_tokens={d['max_batched_tokens']} "
            f"memory={d['memory_model']}×{d['gpu_memory_utilization']} "
            f"step_overhead_ms={d['roofline']['step_overhead_s'] * 1e3:g}")


def _tables_line(d: dict) -> str:
    t = d["predictor"]["tables"]
    return (f"tables {t['engine']} {t['version']} on {t['system']}: GEMM {t['gemm_dtype']} "
            f"({t['gemm_kernel']}), attention {t['generation_attention']['kernel']} KV {t['kv_cache_dtype']}"
            + (f", all-reduce {t['allreduce']}" if t["allreduce"] else ""))


def summary(rows: list[dict]) -> dict[str, dict[str, float | int | None]]:
    out = {}
    for g in GROUPS:
        sel = [r for r in rows if r["group"] == g]
        out[g] = {"points": len(sel)}
        for when in WHENS:
            errs = [abs(r[f"{when}_error_pct"]) for r in sel if r.get(f"{when}_error_pct") is not None]
            out[g][f"{when}_median_abs_error_pct"] = round(statistics.median(errs), 1) if errs else None
            out[g][f"{when}_points"] = len(errs)
        # The kernel predictor beside the preset's roofline on the same points only.
        both = [r for r in sel if r.get("kernels_error_pct") is not None]
        out[g]["after_on_kernel_points_median_abs_error_pct"] = (
            round(statistics.median(abs(r["after_error_pct"]) for r in both), 1) if both else None)
        # aiconfigurator's own estimate beside ours on the points it estimates.
        aic = [r for r in sel if r.get("aic_error_pct") is not None]
        for when in ("after", "kernels"):
            errs = [abs(r[f"{when}_error_pct"]) for r in aic if r.get(f"{when}_error_pct") is not None]
            out[g][f"{when}_on_aic_points_median_abs_error_pct"] = round(statistics.median(errs), 1) if errs else None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=Path, default=ROOT / ".." / "shared" / "published_points.json",
                    help="published points (default ../shared/published_points.json from the repository root)")
    ap.add_argument("--extra", type=Path, default=Path(__file__).resolve().parent / "extra_points.json",
                    help="more published points, reported apart (default benchmarks/extra_points.json)")
    ap.add_argument("--no-extra", action="store_true", help="the issue's points only")
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    ap.add_argument("--only", metavar="TEXT", help="run the points whose id contains TEXT")
    ap.add_argument("--write-band", action="store_true",
                    help=f"write the medians and worst errors into {BAND_FILE.relative_to(ROOT)} (the validated "
                         "error every simulated run and plan quotes); not with --only or --points")
    args = ap.parse_args()
    if args.write_band and (args.only or args.no_extra or args.points != ap.get_default("points")
                            or not args.points.exists()):
        ap.error("--write-band needs the whole run: every default point, no --only, --no-extra or --points")
    setups = reference_points()
    if args.points.exists():
        setups += published_points(args.points)
    else:
        print(f"note: {args.points} not found; REFERENCE section 5's points only", file=sys.stderr)
    extra = [] if args.no_extra else published_points(args.extra)
    if args.only:
        setups = [s for s in setups if args.only in s.name]
        extra = [s for s in extra if args.only in s.name]
    rows = run(setups)
    extra_rows = run(extra)
    for r in extra_rows:
        r["extra"] = True
    summ = summary(rows)
    extra_summ = summary(extra_rows)
    if args.write_band:
        write_band(rows, extra_rows, time.strftime("%Y-%m-%d"), "python benchmarks/sim_fidelity.py --write-band")
        print(f"wrote {BAND_FILE.relative_to(ROOT)}", file=sys.stderr)
    if args.json:
        print(json.dumps({"roofline": RooflineParams().to_dict(), "summary": summ, "extra_summary": extra_summ,
                          "extra_dense_summary": summary([r for r in extra_rows if not r["moe"]]),
                          "rows": rows + extra_rows}, indent=2))
        return
    print("Roofline: library defaults " + ", ".join(f"{k}={v}" for k, v in RooflineParams().to_dict().items())
          + " (mfu/mbu None: the efficiency catalog, data/efficiency.json; after: each preset's step overhead)")
    report(rows, summ, "the issue's points (REFERENCE section 5 and published_points.json)")
    if extra_rows:
        report(extra_rows, extra_summ, f"the extra points ({args.extra.name}), apart from the issue's")
        dense = [r for r in extra_rows if not r["moe"]]
        if len(dense) < len(extra_rows):  # the dense rows' medians stay comparable as MoE rows are added
            print("\nThe extra points' dense models alone (mixtures of experts left out):")
            medians(summary(dense))


def report(rows: list[dict], summ: dict, title: str) -> None:
    print(f"\n=== {title} ===")
    last = None
    for r in rows:
        if r["point"] != last:
            last = r["point"]
            print(f"\n{last}  [{r['kind']}, {r['input']} in / {r['output']} out, {r['requests']} requests]")
            print(f"  after: {r['config']}")
            for a in r["assumptions"]:
                print(f"  - {a}")
            print(f"  kernels: {r.get('kernels_tables') or r.get('kernels_why_not')}")
            if r.get("aic_why_not"):
                print(f"  aic: {r['aic_why_not']}")
        pre = "".join(f"  preemptions {r['before_preemptions']} -> {r['after_preemptions']}"
                      for _ in [0] if "after_preemptions" in r)
        kern = ("kernels —" if r["kernels"] is None
                else f"kernels {r['kernels']:>9.2f} ({r['kernels_error_pct']:+6.1f}%)")
        kern += ("   aic —" if r["aic"] is None else f"   aic {r['aic']:>9.2f} ({r['aic_error_pct']:+6.1f}%)")
        print(f"    {r['metric']:<21} published {r['published']:>9.2f}   before {r['before']:>9.2f} "
              f"({r['before_error_pct']:+6.1f}%)   after {r['after']:>9.2f} ({r['after_error_pct']:+6.1f}%)   "
              f"{kern}{pre}")
    print("\nMedian |error| by metric group (before -> after roofline; kernels, and the roofline on the "
          "points the kernels cover):")
    medians(summ)
    for when in ("after", "kernels", "aic"):
        worst = sorted((r for r in rows if r.get(f"{when}_error_pct") is not None),
                       key=lambda r: -abs(r[f"{when}_error_pct"]))[:6]
        print(f"\nWorst points, {when}:")
        for r in worst:
            print(f"  {r[f'{when}_error_pct']:+6.1f}%  {r['point']} {r['metric']}")


def medians(summ: dict) -> None:
    for g, v in summ.items():
        if v["points"]:
            print(f"  {g:<11} {v['points']:>2} points  {v['before_median_abs_error_pct']:>5}% -> "
                  f"{v['after_median_abs_error_pct']:>5}%   kernels {v['kernels_median_abs_error_pct']}% on "
                  f"{v['kernels_points']} points (roofline {v['after_on_kernel_points_median_abs_error_pct']}% "
                  "on those)")
            if v["aic_points"]:
                print(f"  {'':<11} aiconfigurator's static estimate {v['aic_median_abs_error_pct']}% on "
                      f"{v['aic_points']} points (roofline {v['after_on_aic_points_median_abs_error_pct']}%, "
                      f"kernels {v['kernels_on_aic_points_median_abs_error_pct']}% on those)")
        else:
            print(f"  {g:<11}  0 points")


if __name__ == "__main__":
    main()

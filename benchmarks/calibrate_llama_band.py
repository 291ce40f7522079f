"""Issue 25: how far the calibrated simulator's figures move from run to run under the step spread
its calibration measured, against how far llama-server's move, and whether the measured figures
fall inside the simulated band.

Reads a `calibrate_llama.py` output folder (its `repeat-N/` folders: `measured-c{C}.json` and
`cal-c{FIT}.json`) and, for every repeat, fit and level, runs

    tokenpace sim --calibration cal-c{FIT}.json --step-noise SD --members N  (calibrate_llama.py's load)

with SD the calibration's own `fit.step_noise.sd` (or `--step-noise`). For each level and figure
(TTFT p50, TPOT p50, output tok/s) it prints:
- the members' median and their band [min, max], as errors against the measured figure (median over
  the repeats; each repeat's prediction from its own calibration);
- how many repeats' measured figure fell inside their own band;
- the spread of the measured figure over the repeats and of the members' (median over repeats),
  (max − min) / median: does the simulated engine move as much as the real one?

    .venv/bin/python benchmarks/calibrate_llama_band.py DIR                  # 8 members (~1 s a sim)
    .venv/bin/python benchmarks/calibrate_llama_band.py DIR --members 16 --fit-from 4
    .venv/bin/python benchmarks/calibrate_llama_band.py DIR --scale 2        # a set measured with --scale 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import calibrate_llama as cl  # beside this script: its load, levels and figures

FIGS = (("ttft_p50_ms", "TTFT p50"), ("tpot_p50_ms", "TPOT p50"), ("output_tok_s", "tok/s"))
MEMBER_KEYS = {"ttft_p50_ms": "ttft_p50_ms", "tpot_p50_ms": "tpot_p50_ms", "output_tok_s": "output_tokens_s"}


def predict(cal: Path, level: int, shift: int, members: int, noise: float | None, out: Path) -> dict:
    """The members' section of the level's simulated run (``engine.members``)."""
    sd = noise if noise is not None else json.loads(cal.read_text())["fit"]["step_noise"]["sd"]
    seed = cl.run_seed(cal.parent / f"measured-c{level}.json")  # the lengths its run drew
    cl.tokenpace("sim", "--calibration", str(cal), *cl.load_args(level, shift, seed), "--step-noise", repr(sd),
                 "--members", str(members), "--progress", "off", "--out", str(out))
    return json.loads(out.read_text())["engine"]["members"] | {"sd": sd}


def pct(x: float, ref: float) -> float:
    return (x / ref - 1) * 100


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", type=Path, help="a calibrate_llama.py --out-dir (with repeat-N/ folders)")
    parser.add_argument("--members", type=int, default=8, metavar="N", help="noise seeds per prediction (default 8)")
    parser.add_argument("--step-noise", type=float, metavar="SD",
                        help="the noise's SD (default: each calibration's own fit.step_noise.sd)")
    parser.add_argument("--fit-from", action="append", metavar="C[+C...]",
                        help=f"calibrations to use (default: {' and '.join(cl.DEFAULT_FITS)})")
    parser.add_argument("--scale", type=float, default=1.0, metavar="F", help="the set's --scale (default 1)")
    args = parser.parse_args()
    cl.REQUESTS = {c: max(4, round(n * args.scale)) for c, n in cl.REQUESTS.items()}
    repeats = sorted(p for p in args.dir.glob("repeat-*") if (p / "measured-c4.json").exists())
    if not repeats:
        parser.error(f"{args.dir}: no repeat-N/measured-c4.json (run calibrate_llama.py --out-dir {args.dir})")
    fits = args.fit_from or list(cl.DEFAULT_FITS)
    levels = [c for c in sorted(cl.REQUESTS) if all((r / f"measured-c{c}.json").exists() for r in repeats)]
    print(f"{args.dir}: {len(repeats)} repeat(s), levels {levels}, {args.members} members per prediction")
    inside_total = counted_total = 0
    for fit in fits:
        rows: dict[int, list[dict]] = {c: [] for c in levels}
        sds = []
        for rep in repeats:
            cal = rep / f"cal-c{fit}.json"
            if not cal.exists():
                print(f"  {cal}: missing (calibrate_llama.py --reuse --fit-from {fit} makes it)", file=sys.stderr)
                return 2
            shift = round(cl.template_tokens(rep / "measured-c4.records.jsonl"))
            for c in levels:
                measured = cl.figures(json.loads((rep / f"measured-c{c}.json").read_text()))
                band = predict(cal, c, shift, args.members, args.step_noise, rep / f"band-c{c}-from-c{fit}.json")
                rows[c].append({"measured": measured, "band": band})
            sds.append(band["sd"])
        print(f"\nfit from c={fit} · step noise SD {', '.join(f'{s:.3f}' for s in sds)} (by repeat)")
        print(f"{'level':>6} {'figure':>9} {'measured':>9} {'members p50':>12} {'band (min, max)':>18} "
              f"{'inside':>7} {'spread: engine':>15} {'members':>8}")
        for c in levels:
            for key, label in FIGS:
                meas = [r["measured"][key] for r in rows[c]]
                f = [r["band"]["figures"][MEMBER_KEYS[key]] for r in rows[c]]
                inside = sum(b["min"] <= m <= b["max"] for m, b in zip(meas, f))
                inside_total += inside
                counted_total += len(meas)
                m_mid = statistics.median(meas)
                mid = statistics.median(pct(b["median"], m) for m, b in zip(meas, f))
                lo = statistics.median(pct(b["min"], m) for m, b in zip(meas, f))
                hi = statistics.median(pct(b["max"], m) for m, b in zip(meas, f))
                engine_spread = (max(meas) - min(meas)) / m_mid * 100
                member_spread = statistics.median(b["spread_pct"] for b in f)
                print(f"{c:>6} {label:>9} {m_mid:>9.1f} {mid:>+11.1f}% {f'[{lo:+.1f}, {hi:+.1f}]%':>18} "
                      f"{f'{inside}/{len(meas)}':>7} {engine_spread:>14.1f}% {member_spread:>7.1f}%")
    print(f"\nmeasured figures inside their repeat's band: {inside_total} of {counted_total}")
    print("errors: members / measured − 1 per repeat, median over repeats; spread: (max − min) / median, the "
          "engine's over the repeats, the members' per repeat (median)")
    fit_flags = "".join(f" --fit-from {f}" for f in args.fit_from or ())
    print(f"reproduce: .venv/bin/python benchmarks/calibrate_llama_band.py {args.dir} --members {args.members}"
          + fit_flags + (f" --step-noise {args.step_noise:g}" if args.step_noise is not None else "")
          + (f" --scale {args.scale:g}" if args.scale != 1 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How often the engine computes prompts together, measured against the simulation of the same load.

Reads the runs `calibrate_llama.py` saved (its --out-dir: repeat-N/measured-cC.records.jsonl and the
predictions pred-cC-from-cF.records.jsonl) and prints, per level, measured beside predicted:

- prompt groups: the requests whose first tokens came in one step (within --same-step-ms of each
  other), counted by group size (1: a prompt computed without another);
- prompt gaps per request: a decoding request's inter-token gaps longer than --prompt-gap-ms, the
  steps in which it waited for other requests' prompts, and their mean length;
- TPOT p50 (ms), to set beside the gaps: a closed loop's TPOT is mostly those gaps.

A closed loop's TPOT depends on how the prompts of the others fall into its decode: the same prompt
time spent in fewer, larger steps (prompts computed together) or in more, smaller ones.

    .venv/bin/python benchmarks/llama_prompt_groups.py tokenpace-runs/calibrate-llama
    .venv/bin/python benchmarks/llama_prompt_groups.py DIR --levels 2,4,8 --fit 4
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from tokenpace import read_records  # noqa: E402


def ok_records(path: Path) -> list:
    return [r for r in read_records(path) if r.status == "ok" and r.chunk_ns]


def prompt_groups(records: list, same_step_ns: float) -> Counter:
    """Group sizes of first tokens that came within ``same_step_ns`` of the one before (warmups included:
    they were in the batches too)."""
    firsts = sorted(r.first_token_ns for r in records if r.first_token_ns is not None)
    sizes: Counter = Counter()
    n = 1
    for a, b in zip(firsts, firsts[1:]):
        if b - a < same_step_ns:
            n += 1
        else:
            sizes[n] += 1
            n = 1
    if firsts:
        sizes[n] += 1
    return sizes


def gaps(records: list, prompt_gap_ns: float) -> dict[str, float]:
    measured = [r for r in records if not r.warmup and len(r.chunk_ns) > 1]
    per_request, long_gaps, tpots = [], [], []
    for r in measured:
        g = [b - a for a, b in zip(r.chunk_ns, r.chunk_ns[1:])]
        big = [x for x in g if x > prompt_gap_ns]
        per_request.append(len(big))
        long_gaps += big
        tpots.append((r.chunk_ns[-1] - r.chunk_ns[0]) / (len(r.chunk_ns) - 1))
    return {"per_request": statistics.mean(per_request) if per_request else 0.0,
            "mean_ms": statistics.mean(long_gaps) / 1e6 if long_gaps else 0.0,
            "tpot_p50_ms": statistics.median(tpots) / 1e6 if tpots else 0.0}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir", type=Path, help="calibrate_llama.py's --out-dir")
    p.add_argument("--levels", default="2,4,8", metavar="C,C,...")
    p.add_argument("--fit", default="1+4+16", metavar="C[+C...]", help="the fit whose predictions to read")
    p.add_argument("--same-step-ms", type=float, default=25.0,
                   help="first tokens this close came in one step (default 25: a step's tokens spread ~1 ms a "
                        "sequence on this engine, and its steps last 38 ms or more)")
    p.add_argument("--prompt-gap-ms", type=float, default=300.0,
                   help="an inter-token gap longer than this was a step with a prompt in it (default 300: on "
                        "the benchmark's engine a decode step takes 38-210 ms and a prompt step 500 ms or more)")
    args = p.parse_args()
    repeats = sorted(d for d in args.dir.glob("repeat-*") if d.is_dir()) or [args.dir]
    print(f"Command: .venv/bin/python benchmarks/llama_prompt_groups.py {' '.join(sys.argv[1:])}")
    print("group sizes: {size: groups}; prompt gaps: per request, mean ms; TPOT p50 ms\n")
    for c in args.levels.split(","):
        for rep in repeats:
            pred_path = rep / f"pred-c{c}-from-c{args.fit}.records.jsonl"
            rows = [("measured", rep / f"measured-c{c}.records.jsonl"), (f"sim from c={args.fit}", pred_path)]
            for label, path in rows:
                if not path.exists():
                    print(f"c={c:<3} {rep.name:9} {label:18} (no {path.name})")
                    continue
                recs = ok_records(path)
                sizes = prompt_groups(recs, args.same_step_ms * 1e6)
                g = gaps(recs, args.prompt_gap_ms * 1e6)
                print(f"c={c:<3} {rep.name:9} {label:18} groups {dict(sorted(sizes.items()))!s:28} "
                      f"prompt gaps {g['per_request']:4.2f}/request, mean {g['mean_ms']:7.1f} ms  "
                      f"TPOT p50 {g['tpot_p50_ms']:6.1f}")
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

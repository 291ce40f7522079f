"""How long `tokenpace calibrate` takes, and whether two source trees fit the same figures.

Two runs to fit, made by the simulator itself (no engine needed): a closed loop at concurrency 4
with varied lengths (48 requests, as the calibration tests run) and one request at a time with one
prompt length (every request's steps alike). Each is calibrated by `tokenpace calibrate` in a fresh
process, for each tree given with ``--src`` in turn, interleaved run by run (peers in the same run
on the same noisy machine); the medians of wall and CPU seconds are compared as ratios, and the
fitted parameters of each tree are compared with the first tree's (the largest relative difference).

    .venv/bin/python benchmarks/calibrate_speed.py                             # this tree, median of 3
    OLD=$(mktemp -d) && git archive <commit> src | tar -x -C "$OLD"
    .venv/bin/python benchmarks/calibrate_speed.py --src "$OLD/src" --src src --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENGINE = ["--model", "llama-3.1-8b", "--gpu", "l4", "--quant", "int4", "--max-num-seqs", "16",
          "--max-batched-tokens", "2048"]
RUNS = {  # name: the load of the run to fit
    "c4-varied": ["--concurrency", "4", "--requests", "48", "--input-tokens", "uniform:min=64,max=512",
                  "--output-tokens", "uniform:min=8,max=48", "--seed", "3"],
    "c1-alike": ["--concurrency", "1", "--requests", "48", "--input-tokens", "256", "--output-tokens", "32",
                 "--seed", "3"],
}
FIT = ["--model", "llama-3.1-8b", "--hardware", "l4", "--quant", "int4", "--max-num-seqs", "16",
       "--max-batched-tokens", "2048"]


def tokenpace(src: Path, *args: str) -> tuple[float, float]:
    """Run ``tokenpace ARGS`` with ``src`` first on the path: (wall seconds, CPU seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "tokenpace", *args], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(src)), cwd=ROOT)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"tokenpace {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def fitted(path: Path) -> dict[str, float]:
    r = json.loads(path.read_text())["roofline"]
    return {k: float(v) for k, v in r.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def largest_difference(a: dict[str, float], b: dict[str, float]) -> float:
    return max((abs(b[k] - v) / max(abs(v), 1e-300) for k, v in a.items() if v or b.get(k)), default=0.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", action="append", type=Path, help="a source tree to time (repeatable; default: src)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per tree and run to fit (default 3)")
    args = ap.parse_args()
    trees = [p.resolve() for p in (args.src or [ROOT / "src"])]
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    work = Path(tempfile.mkdtemp(prefix="calibrate-speed-"))
    for name, load in RUNS.items():
        run = work / f"{name}.json"
        tokenpace(trees[-1], "sim", *ENGINE, *load, "--out", str(run), "--no-progress")
        times = {t: [] for t in trees}
        for i in range(args.repeat):
            for t in trees:  # interleaved: each tree's i-th run beside the others'
                out = work / f"{name}-{trees.index(t)}.json"
                times[t].append(tokenpace(t, "calibrate", str(run), *FIT, "--out", str(out)))
        first = fitted(work / f"{name}-0.json")
        print(f"\n{name} ({' '.join(load)}): median of {args.repeat}")
        base = None
        for k, t in enumerate(trees):
            wall = statistics.median(w for w, _ in times[t])
            cpu = statistics.median(c for _, c in times[t])
            base = base or (wall, cpu)
            diff = largest_difference(first, fitted(work / f"{name}-{k}.json"))
            print(f"  {str(t):<40} wall {wall:7.2f} s (ratio {wall / base[0]:.2f}) · CPU {cpu:7.2f} s "
                  f"(ratio {cpu / base[1]:.2f}) · runs {', '.join(f'{w:.1f}' for w, _ in times[t])} · "
                  f"largest relative difference from the first tree's fit {diff:.1e}")
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("reproduce: .venv/bin/python benchmarks/calibrate_speed.py"
          + "".join(f" --src {t}" for t in (args.src or [])) + f" --repeat {args.repeat}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

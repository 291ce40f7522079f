"""How much faster than real time the simulator runs.

Workload of the speed target (issue 5): Llama-3.1-8B in BF16 on one H100, chunked prefill, closed loop
with 64 concurrent streams, 1,024 prompt / 256 output tokens, 20,000 requests. A second workload
with varied lengths shows the cost when batches change at almost every step.

    .venv/bin/python benchmarks/sim_speed.py                 # both workloads, best of 3
    .venv/bin/python benchmarks/sim_speed.py --requests 5000 --repeat 1
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tokenpace.simulator import SimConfig, SimRequest, simulate  # noqa: E402


def fixed(n: int) -> list[SimRequest]:
    return [SimRequest(1024, 256) for _ in range(n)]


def varied(n: int) -> list[SimRequest]:
    rng = np.random.default_rng(0)
    return [SimRequest(int(p), int(o)) for p, o in zip(rng.integers(256, 2048, n), rng.integers(64, 512, n))]


def run(label: str, reqs: list[SimRequest], repeat: int) -> None:
    cfg = SimConfig(model="llama-3.1-8b", gpu="h100-sxm", weights="bf16", policy="chunked-prefill",
                    concurrency=64, timeline=True)
    walls = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = simulate(cfg, reqs)
        walls.append(time.perf_counter() - t0)
    wall = min(walls)
    sim_s = res.duration_s
    print(f"{label}")
    print(f"  requests {len(reqs)}  simulated {sim_s:,.1f} s  wall {wall:.2f} s (best of {repeat}: "
          + ", ".join(f"{w:.2f}" for w in walls) + ")")
    print(f"  speed: {sim_s / wall:,.0f}x real time, {len(reqs) / wall:,.0f} simulated requests/s")
    steps, rows = res.stats["engine_steps"], len(res.timeline)
    print(f"  engine steps {steps:,}  events {res.stats['events']:,}  timeline rows {rows:,}  "
          f"steps per batch {steps / rows:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=20_000, metavar="N")
    ap.add_argument("--repeat", type=int, default=3, metavar="N")
    args = ap.parse_args()
    print(f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs")
    print("Command: .venv/bin/python benchmarks/sim_speed.py"
          + ("" if args.requests == 20_000 else f" --requests {args.requests}")
          + ("" if args.repeat == 3 else f" --repeat {args.repeat}") + "\n")
    run("Target: Llama-3.1-8B/H100, 64 concurrent, 1024 in / 256 out", fixed(args.requests), args.repeat)
    run("Varied: 64 concurrent, 256–2048 in / 64–512 out (uniform)", varied(args.requests), args.repeat)


if __name__ == "__main__":
    main()

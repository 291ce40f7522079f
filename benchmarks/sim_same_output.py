"""Does a change to the simulator core change any output? Runs the same configurations against two
(or more) source trees and compares every byte of the result: records, stats and timeline.

A speed change to the engine, scheduler or KV cache must leave every simulated figure as it was.
``tests/simulator`` checks jumping against stepping and the decode cohort against stepping each
sequence; this script checks one tree against another (typically the main branch against a
working tree) on a few thousand requests per configuration: the three engine presets (vLLM's
context admission, SGLang's whole-prompt admission, TensorRT-LLM's prompt+output reservation), the
pre-preset first-chunk admission, 1,024 running sequences on a cache too small for them
(preemptions), client timeouts, a prefix cache, a small token budget, and varied lengths.

    OLD=$(mktemp -d) && git archive main src | tar -x -C "$OLD"
    .venv/bin/python benchmarks/sim_same_output.py --src "$OLD/src" --src src
    .venv/bin/python benchmarks/sim_same_output.py --src "$OLD/src" --src src --requests 1000 --only vllm-c1024

Each configuration runs in a fresh process per tree (``PYTHONPATH=<tree>``). Printed per
configuration: requests, engine steps, preemptions, timed-out requests, and the SHA-256 of the
result's JSON (``SimResult.to_dict()``, keys sorted); the last column says whether every tree gave
the same digest. Exit status 1 when any configuration differs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# One configuration against the tokenpace first on sys.path: prints one JSON line.
RUN = r"""
import dataclasses, hashlib, json, sys
import numpy as np
from tokenpace.simulator import SimConfig, SimRequest, simulate
from tokenpace.simulator.engines import with_engine

name, n = sys.argv[1], int(sys.argv[2])

def closed(prompt, output):
    return [SimRequest(prompt, output) for _ in range(n)]

def varied(seed=0):
    rng = np.random.default_rng(seed)
    return [SimRequest(int(p), int(o)) for p, o in zip(rng.integers(256, 4096, n), rng.integers(16, 1024, n))]

def open_loop(rate, prefix=False, seed=3):
    rng = np.random.default_rng(seed)
    t, out = 0.0, []
    for i in range(n):
        t += float(rng.exponential(1 / rate))
        shared = prefix and i % 3 != 0
        out.append(SimRequest(int(rng.integers(600, 2500)), int(rng.integers(1, 600)), arrival_s=t,
                              prefix_group=f"sys{i % 5}" if shared else None, prefix_tokens=512 if shared else 0))
    return out

base = SimConfig(model="llama-3.1-8b", gpu="h100-sxm", timeline=True)
cases = {
    "chunk-c1024": (dataclasses.replace(base, concurrency=1024, max_num_seqs=1024), lambda: closed(1024, 256)),
    "chunk-c64": (dataclasses.replace(base, concurrency=64), lambda: closed(1024, 256)),
    "vllm-c1024": (with_engine(dataclasses.replace(base, concurrency=1024), "vllm"), lambda: closed(1024, 256)),
    "vllm-small-cache": (with_engine(dataclasses.replace(base, concurrency=512, num_gpu_blocks=6000), "vllm"),
                         lambda: varied()),
    "sglang-c1024": (with_engine(dataclasses.replace(base, concurrency=1024), "sglang"), lambda: closed(2048, 512)),
    "trtllm-fp8-c1024": (with_engine(dataclasses.replace(base, concurrency=1024, weights="fp8"), "trtllm"),
                         lambda: closed(1024, 256)),
    "trtllm-varied": (with_engine(dataclasses.replace(base, concurrency=256, weights="fp8"), "trtllm"),
                      lambda: varied(1)),
    "chunk-preempting": (dataclasses.replace(base, concurrency=1024, max_num_seqs=1024, num_gpu_blocks=5000),
                         lambda: varied(2)),
    "timeouts": (dataclasses.replace(base, timeout_s=8.0, ttft_timeout_s=2.0, num_gpu_blocks=4000,
                                     max_num_seqs=512), lambda: open_loop(12)),
    "prefix-cache": (with_engine(dataclasses.replace(base, prefix_caching=True, num_gpu_blocks=8000), "vllm"),
                     lambda: open_loop(60, prefix=True)),
    "small-budget": (dataclasses.replace(base, concurrency=256, max_batched_tokens=192, num_gpu_blocks=9000),
                     lambda: varied(3)),
}
if name == "--list":
    print(json.dumps(list(cases)))
    sys.exit(0)
cfg, make = cases[name]
res = simulate(cfg, make())
doc = json.dumps(res.to_dict(), sort_keys=True).encode()
print(json.dumps({"sha": hashlib.sha256(doc).hexdigest()[:16], "steps": res.stats["engine_steps"],
                  "preemptions": res.stats["preemptions"], "requests": res.stats["sent"],
                  "timed_out": sum(r.status != "ok" for r in res.records)}))
"""


def run(src: Path, name: str, n: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, "-c", RUN, name, str(n)], env=env, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"{name} failed under {src}:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", action="append", type=Path, help="a tree's src/ directory (give two or more)")
    ap.add_argument("--requests", type=int, default=3000, help="requests per configuration (default 3000)")
    ap.add_argument("--only", help="comma-separated configuration names")
    args = ap.parse_args()
    srcs = [s.resolve() for s in (args.src or [ROOT / "src"])]
    names = json.loads(subprocess.run([sys.executable, "-c", RUN, "--list", "0"], capture_output=True, text=True,
                                      env={**os.environ, "PYTHONPATH": str(srcs[-1])}, check=True).stdout)
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    print(f"{args.requests} requests per configuration; trees: " + ", ".join(str(s) for s in srcs))
    print(f"{'configuration':<18} {'steps':>8} {'preempt':>8} {'timeouts':>8}  " +
          "  ".join(f"{'tree ' + str(i):<16}" for i in range(len(srcs))) + "  same")
    differ = 0
    for name in names:
        rows = [run(s, name, args.requests) for s in srcs]
        same = len({r["sha"] for r in rows}) == 1
        differ += not same
        r = rows[-1]
        print(f"{name:<18} {r['steps']:>8,} {r['preemptions']:>8,} {r['timed_out']:>8,}  " +
              "  ".join(f"{x['sha']:<16}" for x in rows) + ("  yes" if same else "  NO"), flush=True)
    print("every configuration identical" if not differ else f"{differ} configuration(s) differ")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()

"""How fast `tokenpace plan` answers: the whole command on a search of about 1,300 candidates
(10 GPU types x TP 1, 2, 4, 8 x BF16/FP8/INT4 x the vLLM, SGLang and TensorRT-LLM presets x
chunked prefill on/off x two batch limits; FP8 only where the GPU has it), Llama-3.1-8B at 20
req/s, chat SLO. Target (issue): 1,000 candidates in <= 60 s on a 2-core machine.

Prints the wall time, the CPU time of the process and its workers, and how many candidates each
stage settled (memory, idle-engine bounds, simulated, pruned). Repeats ``--runs`` times; quotes
the median.

    python benchmarks/plan_speed.py [--runs 3] [--jobs 0]
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
from collections import Counter
from pathlib import Path

GPUS = "h100-sxm,h100-pcie,h200,a100-80gb,a100-40gb,l40s,rtx-a6000,l4,h20,mi300x"
ARGS = ["plan", "--model", "llama-3.1-8b", "--rate", "20", "--slo", "chat", "--gpus", GPUS,
        "--tp", "1,2,4,8", "--quant", "bf16,fp8,int4", "--engines", "vllm,sglang,trtllm",
        "--chunked-prefill", "on,off", "--max-num-seqs", "128,256",
        "--input-tokens", "lognormal:mean=1500,sigma=0.8", "--output-tokens", "300"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=0, help="plan --jobs (0: one per CPU)")
    a = ap.parse_args()
    walls, cpus, doc = [], [], None
    for _ in range(a.runs):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "plan.json"
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "tokenpace", *ARGS, "--jobs", str(a.jobs), "--out", str(out)],
                           check=True, stdout=subprocess.DEVNULL)
            walls.append(time.perf_counter() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            doc = json.loads(out.read_text())
    rows = doc["ranked"] + doc["rejected"] + doc["unpriced"]
    stage = Counter("pruned" if r["pruned"] else ("memory" if r["binding"] == "memory" else
                    ("bounds" if r["probes"] is None else "simulated")) for r in rows)
    probes = sum(len(r["probes"] or ()) for r in rows)
    print(f"tokenpace plan: {doc['candidates']} candidates, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f} at the end")
    print(f"  wall s: {', '.join(f'{w:.1f}' for w in walls)}  (median {statistics.median(walls):.1f})")
    print(f"  CPU s (process + workers): {', '.join(f'{c:.1f}' for c in cpus)}  (median {statistics.median(cpus):.1f})")
    print(f"  settled by: memory {stage['memory']}, idle-engine bounds {stage['bounds']}, simulation "
          f"{stage['simulated']} ({probes} probes), pruned {stage['pruned']}")
    print(f"  winner: {doc['winner']['sentence'] if doc['winner'] else 'none'}")
    print("reproduce: python benchmarks/plan_speed.py --runs", a.runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

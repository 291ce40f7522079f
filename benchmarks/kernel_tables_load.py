"""What the kernel predictor's tables cost a run to load: read from aiconfigurator-core's Parquet
files (an empty cache) or from tokenpace's NumPy copy of them (a warm cache), in fresh processes.

    .venv/bin/python benchmarks/kernel_tables_load.py                 # 5 runs of each, medians
    .venv/bin/python benchmarks/kernel_tables_load.py --repeat 9

Two measures, each in a fresh process, alternating cold and warm: building the kernel predictor for
Llama-3.1-8B FP8 on H100 under vLLM's tables (CPU seconds of the construction and of the whole
process), and a whole ``tokenpace sim --predictor kernels`` (2,000 requests, 64 concurrent, 1,024 in /
256 out; CPU seconds of the process, user + system, and its peak RSS). The simulated results of the
cold and warm runs are compared byte for byte. Needs ``pip install 'tokenpace[kernels]'``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = r"""
import json, sys, time
c0 = time.process_time()
from tokenpace.simulator import get_gpu, get_model, get_precision
from tokenpace.simulator.kernels.predictor import KernelPredictor
c1 = time.process_time()
KernelPredictor(get_model("llama-3.1-8b"), get_gpu("h100-sxm"), get_precision("fp8"), get_precision("fp8"),
                engine="vllm")
print(json.dumps({"build": time.process_time() - c1, "pyarrow": "pyarrow" in sys.modules}))
"""
SIM = ["sim", "--predictor", "kernels", "--engine", "vllm", "--quant", "fp8", "--requests", "2000",
       "--concurrency", "64", "--input-tokens", "1024", "--output-tokens", "256"]


def child(argv: list[str], cache: Path) -> tuple[float, float, str]:
    """(CPU seconds, peak RSS MiB, stdout) of one fresh process (its own rusage, from wait4)."""
    env = {**os.environ, "TOKENPACE_KERNEL_CACHE": str(cache)}
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}")
        out.seek(0)
        text = out.read().decode()
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs; "
          f"load average {os.getloadavg()[0]:.1f} at the start")
    print(f"Command: .venv/bin/python benchmarks/kernel_tables_load.py --repeat {args.repeat}\n")
    tokenpace = [sys.executable, "-m", "tokenpace"]
    rows: dict[str, list[tuple[float, float, float]]] = {"cold": [], "warm": []}
    with tempfile.TemporaryDirectory() as tmp:
        warm = Path(tmp) / "warm"
        child([sys.executable, "-c", BUILD], warm)  # fill it
        outputs = {}
        for i in range(args.repeat):
            for kind in ("cold", "warm"):
                cache = warm if kind == "warm" else Path(tmp) / f"cold-{i}"
                whole, _, out = child([sys.executable, "-c", BUILD], cache)
                build = json.loads(out)
                cache = warm if kind == "warm" else Path(tmp) / f"cold-sim-{i}"
                result = Path(tmp) / f"{kind}-{i}.json"
                sim_cpu, rss, _ = child(tokenpace + SIM + ["--out", str(result)], cache)
                outputs[kind] = (Path(tmp) / f"{kind}-{i}.records.jsonl").read_bytes()
                rows[kind].append((build["build"], whole, sim_cpu, rss, build["pyarrow"]))
        same = outputs["cold"] == outputs["warm"]
    print("| cache | predictor built (CPU s) | that process (CPU s) | whole `tokenpace sim` (CPU s) | peak RSS (MiB) "
          "| pyarrow imported |")
    print("|---|---:|---:|---:|---:|---|")
    med = {}
    for kind, runs in rows.items():
        med[kind] = [statistics.median(r[j] for r in runs) for j in range(4)]
        b, w, s, m = med[kind]
        print(f"| {kind} | {b:.3f} | {w:.3f} | {s:.3f} | {m:.0f} | {runs[0][4]} |")
    print(f"\nwarm/cold, medians of {args.repeat}: predictor {med['warm'][0] / med['cold'][0]:.2f}x, "
          f"whole sim {med['warm'][2] / med['cold'][2]:.2f}x; records identical: {same}")


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"({time.perf_counter() - t0:.0f} s)")

"""How much faster than real time the simulator runs.

Workloads (issue 14's speed targets): Llama-3.1-8B in BF16 on one H100, chunked prefill, closed loop,
1,024 prompt / 256 output tokens, 20,000 requests, at concurrency 64 (target 10,000x real time for
the whole command), and with 1,024 running sequences (``--max-num-seqs 1024 --concurrency 1024``,
target 2,000x); a third with varied lengths shows the cost when batches change at almost every step.

Two measurements per workload: ``simulate()`` in this process (the simulator core), and the whole
``tokenpace sim`` command in a fresh process (start-up, the run, metrics, result and records files).
With ``--src`` given more than once, each tree's source is run in turn, interleaved run by run (a
peer in the same run on the same noisy machine), and the medians are compared as ratios. Each run's
CPU time (user + system) is reported beside its wall time: on a shared machine it moves far less
with the other load than the wall time does. Every child runs with Python's bytecode cache on
(``PYTHONDONTWRITEBYTECODE`` dropped), as an installed package runs.

    .venv/bin/python benchmarks/sim_speed.py                                  # this tree, median of 5
    .venv/bin/python benchmarks/sim_speed.py --src OLD/src --src src --repeat 5
    .venv/bin/python benchmarks/sim_speed.py --only core --requests 5000 --repeat 1
    .venv/bin/python benchmarks/sim_speed.py --only startup --repeat 9
    .venv/bin/python benchmarks/sim_speed.py --only phases --workloads c64,c1024 --repeat 3

Start-up (``--only startup``, and printed before the workloads): the interpreter alone, ``import
tokenpace``, and the modules the ``sim`` command imports before it simulates anything, each in a
fresh process: the part of the whole command's time that does not depend on the run, to set
against the 10,000x target's budget (simulated seconds / 10,000).

Floor (``--only floor``): the per-request work any run of the c64 workload's shape does in this
design, whatever the engine does (an arrival event through the heap, a ``Sequence``, its 256 chunk
times as a run of the shared step ends, or copied out of them in a tree from before runs, a
record): set against the 136 ms that 10,000x allows ``simulate()`` there.

Phases (``--only phases``): the whole command run in one fresh process with CPU timers around its
parts (imports; ``simulate()``; the records as columns; the summary; the records and timeline
JSONL; the columnar file; everything else: planning the requests, the client's limits, the
console), medians over the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# In-process run of one workload against the tokenpace found first on sys.path (a child process
# gets PYTHONPATH=<tree>/src): prints one JSON line.
CORE = r"""
import json, sys, time
import numpy as np
from tokenpace.simulator import SimConfig, SimRequest, simulate
name, n = sys.argv[1], int(sys.argv[2])
if name == "varied":
    rng = np.random.default_rng(0)
    reqs = [SimRequest(int(p), int(o)) for p, o in zip(rng.integers(256, 2048, n), rng.integers(64, 512, n))]
else:
    reqs = [SimRequest(1024, 256) for _ in range(n)]
c = 1024 if name == "c1024" else 64
cfg = SimConfig(model="llama-3.1-8b", gpu="h100-sxm", weights="bf16", policy="chunked-prefill", concurrency=c,
                max_num_seqs=1024 if name == "c1024" else 256, timeline=True)
t0, c0 = time.perf_counter(), time.process_time()
res = simulate(cfg, reqs)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"wall": wall, "cpu": cpu, "sim_s": res.duration_s, "steps": res.stats["engine_steps"],
                  "events": res.stats["events"], "preemptions": res.stats["preemptions"]}))
"""

# The whole `tokenpace sim` command in this process, with CPU timers around its parts: prints one JSON line.
PHASES = r"""
import json, sys, time
c0 = time.process_time()
import tokenpace.cli.main, tokenpace.cli.sim_cmd, tokenpace.runner.simulate as rs
imports = time.process_time() - c0
T = {}
def timed(mod, name, label):
    f = getattr(mod, name)
    def run(*a, **k):
        t = time.process_time()
        try:
            return f(*a, **k)
        finally:
            T[label] = T.get(label, 0.0) + time.process_time() - t
    setattr(mod, name, run)
timed(rs, "simulate", "simulate()")
if hasattr(rs, "RecordTable"):
    timed(rs.RecordTable, "from_records", "records as columns")
timed(rs, "summarize", "summary")
timed(rs, "_write_jsonl", "records + timeline JSONL")
timed(rs, "write_table", "columnar file")
if hasattr(rs, "write_records_table"):
    timed(rs, "write_records_table", "columnar file")
if hasattr(rs, "read_table"):
    timed(rs, "read_table", "columns read back")
c1 = time.process_time()
try:
    tokenpace.cli.main.main(sys.argv[1:])
except SystemExit:
    pass
total = time.process_time() - c1
T["everything else"] = total - sum(T.values())
print(json.dumps({"imports": imports, **T, "whole": imports + total}))
"""

# The least a run of the c64 workload's shape must do per request in this design, whatever the engine
# does: one arrival event through the heap, one Sequence, its 256 chunk times (a run of the shared
# step ends where the tree has tokenpace.chunk_runs, else copied from the shared list), one record
# (fresh process, CPU seconds; prints one JSON line).
FLOOR = r"""
import heapq, json, sys, time
from itertools import count
from tokenpace.simulator import SimRequest
from tokenpace.simulator.events import Arrival
from tokenpace.simulator.records import completed_record
from tokenpace.simulator.sequence import Sequence
n = int(sys.argv[1])
reqs = [SimRequest(1024, 256) for _ in range(n)]
try:
    from tokenpace.chunk_runs import ChunkRuns, StepEnds
except ImportError:  # a tree from before chunk times were runs
    ChunkRuns = None
ends = list(range(4 * n + 256)) if ChunkRuns is None else StepEnds()
if ChunkRuns is not None:
    ends += range(4 * n + 256)
c0 = time.process_time()
heap, order = [], count()
for i in range(n):
    heapq.heappush(heap, (i, 2, next(order), Arrival(i, i)))
while heap:
    heapq.heappop(heap)
c1 = time.process_time()
seqs = [Sequence(i, r, i) for i, r in enumerate(reqs)]
shared = {}
for i, s in enumerate(seqs):
    s.first_token_ns, s.generated = 5, 256
    if ChunkRuns is None:
        s.chunk_ns += ends[4 * i:4 * i + 256]
    else:
        s.chunk_ns = ChunkRuns(ends)
        s.chunk_ns.add(4 * i, 4 * i + 256)
recs = [completed_record(s, shared) for s in seqs]
c2 = time.process_time()
print(json.dumps({"events": c1 - c0, "sequences and records": c2 - c1, "total": c2 - c0}))
"""

WORKLOADS = {
    "c64": ("Target: Llama-3.1-8B/H100, 64 concurrent, 1024 in / 256 out", ["--concurrency", "64"]),
    "c1024": ("1,024 running: --max-num-seqs 1024 --concurrency 1024, 1024 in / 256 out",
              ["--concurrency", "1024", "--max-num-seqs", "1024"]),
    "varied": ("Varied: 64 concurrent, 256–2048 in / 64–512 out (uniform)", None),
}


def _env(src: Path) -> dict[str, str]:
    """The child's environment: ``src`` first on its path, and Python's bytecode cache on. With
    ``PYTHONDONTWRITEBYTECODE`` set (some CI images and sandboxes set it) every fresh process
    compiles the sources again, which doubled the sim command's imports here (0.27 -> 0.50 s wall);
    an installed package's users run its cached bytecode."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(src)
    return env


def core_run(src: Path, name: str, n: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CORE, name, str(n)], capture_output=True, text=True, check=True,
                         env=_env(src))
    return json.loads(out.stdout.strip().splitlines()[-1])


def command_run(src: Path, flags: list[str], n: int, out_dir: Path) -> dict:
    argv = [sys.executable, "-m", "tokenpace", "sim", "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
            "--requests", str(n), *flags, "--input-tokens", "1024", "--output-tokens", "256", "--no-progress",
            "--out", str(out_dir / "run.json")]
    t0, c0 = time.perf_counter(), _children_cpu()
    proc = subprocess.run(argv, capture_output=True, text=True, env=_env(src))
    wall, cpu = time.perf_counter() - t0, _children_cpu() - c0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr[-500:]}")
    doc = json.loads((out_dir / "run.json").read_text())
    return {"wall": wall, "cpu": cpu, "sim_s": _sim_duration(doc)}


STARTUP = {
    "python -c pass": "pass",
    "import tokenpace": "import tokenpace",
    "the sim command's imports": "import tokenpace.cli.main, tokenpace.cli.sim_cmd, tokenpace.runner.simulate",
}


def startup_runs(src: Path, repeat: int) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) seconds of each ``STARTUP`` step in a fresh process."""
    out = {}
    subprocess.run([sys.executable, "-c", STARTUP["the sim command's imports"]], check=True, env=_env(src))  # compiles once
    for label, code in STARTUP.items():
        walls, cpus = [], []
        for _ in range(repeat):
            t0, c0 = time.perf_counter(), _children_cpu()
            subprocess.run([sys.executable, "-c", code], check=True, env=_env(src))
            walls.append(time.perf_counter() - t0)
            cpus.append(_children_cpu() - c0)
        out[label] = (statistics.median(walls), statistics.median(cpus))
    return out


def phases_run(src: Path, flags: list[str], n: int, out_dir: Path) -> dict:
    argv = [sys.executable, "-c", PHASES, "sim", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--requests", str(n),
            *flags, "--input-tokens", "1024", "--output-tokens", "256", "--no-progress", "--out", str(out_dir / "run.json")]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, env=_env(src))
    return json.loads(out.stdout.strip().splitlines()[-1])


def print_phases(srcs: list[Path], names: list[str], n: int, repeat: int, out_dir: Path) -> None:
    for name in names:
        label, flags = WORKLOADS[name]
        if flags is None:
            continue
        print(f"{label} — where the whole command's CPU time goes (median of {repeat}), {n:,} requests")
        for s in srcs:
            runs = [phases_run(s, flags, n, out_dir) for _ in range(repeat)]
            med = {k: statistics.median(r.get(k, 0.0) for r in runs) for k in runs[0]}
            print(f"  {s}: " + "; ".join(f"{k} {v:.2f} s" for k, v in med.items()))
        print()


def print_floor(srcs: list[Path], n: int, repeat: int) -> None:
    print(f"Floor: per-request work alone (an arrival event, a Sequence, 256 chunk times, a record), {n:,} requests, "
          f"CPU median of {repeat}")
    for s in srcs:
        runs = []
        for _ in range(repeat):
            out = subprocess.run([sys.executable, "-c", FLOOR, str(n)], capture_output=True, text=True, check=True,
                                 env=_env(s))
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"  {s}: " + "; ".join(f"{k} {v:.3f} s" for k, v in med.items()))
    print()


def _children_cpu() -> float:
    """User + system CPU seconds of the child processes that have ended."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _sim_duration(doc: dict) -> float:
    """Simulated engine time: the virtual time the run ended at (the result's engine stats)."""
    return float(doc["engine"]["stats"]["sim_end_ns"]) / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=20_000, metavar="N")
    ap.add_argument("--repeat", type=int, default=5, metavar="N", help="runs per tree and workload (median)")
    ap.add_argument("--src", type=Path, action="append", metavar="DIR",
                    help="a tree's src/ directory to run (repeat to compare, interleaved; default: this tree)")
    ap.add_argument("--only", choices=("core", "command", "startup", "phases", "floor"),
                    help="one of the measurements")
    ap.add_argument("--workloads", default="c64,c1024,varied", help="comma-separated: c64, c1024, varied")
    args = ap.parse_args()
    srcs = [p.resolve() for p in (args.src or [ROOT / "src"])]
    print(f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs; "
          f"load average {os.getloadavg()[0]:.1f} at the start")
    print("Command: .venv/bin/python benchmarks/sim_speed.py " + " ".join(sys.argv[1:]) + "\n")
    for s in srcs:
        print(f"Start-up, {s} (median of {args.repeat}, fresh processes):")
        for label, (wall, cpu) in startup_runs(s, args.repeat).items():
            print(f"  {label}: wall {wall * 1e3:.0f} ms, CPU {cpu * 1e3:.0f} ms")
    print("  (10,000x real time for the c64 workload's ~1,358 simulated seconds is 136 ms for the whole command)\n")
    if args.only == "startup":
        return
    if args.only == "floor":
        print_floor(srcs, args.requests, args.repeat)
        return
    names = [w for w in args.workloads.split(",") if w]
    if args.only == "phases":
        with tempfile.TemporaryDirectory() as tmp:
            print_phases(srcs, names, args.requests, args.repeat, Path(tmp))
        return
    kinds = [k for k in ("core", "command") if args.only in (None, k)]
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            label, flags = WORKLOADS[name]
            for kind in kinds:
                if kind == "command" and flags is None:
                    continue
                walls: dict[Path, list[float]] = {s: [] for s in srcs}
                cpus: dict[Path, list[float]] = {s: [] for s in srcs}
                sims: dict[Path, float] = {}
                for _ in range(args.repeat):
                    for s in srcs:  # interleaved: each tree sees the same machine
                        r = (core_run(s, name, args.requests) if kind == "core"
                             else command_run(s, flags, args.requests, Path(tmp)))
                        walls[s].append(r["wall"])
                        cpus[s].append(r["cpu"])
                        sims[s] = r["sim_s"]
                what = "simulate() in process" if kind == "core" else "whole `tokenpace sim` command"
                print(f"{label} — {what}, {args.requests:,} requests")
                meds, cmeds = {}, {}
                for s in srcs:
                    meds[s], cmeds[s] = statistics.median(walls[s]), statistics.median(cpus[s])
                    print(f"  {s}: simulated {sims[s]:,.1f} s; wall median {meds[s]:.2f} s ("
                          + ", ".join(f"{w:.2f}" for w in walls[s]) + f"), {sims[s] / meds[s]:,.0f}x real time; "
                          f"CPU median {cmeds[s]:.2f} s (" + ", ".join(f"{w:.2f}" for w in cpus[s])
                          + f"), {sims[s] / cmeds[s]:,.0f}x")
                if len(srcs) > 1:
                    print("  ratio of medians to the first: wall "
                          + ", ".join(f"{meds[s] / meds[srcs[0]]:.2f}" for s in srcs[1:]) + "; CPU "
                          + ", ".join(f"{cmeds[s] / cmeds[srcs[0]]:.2f}" for s in srcs[1:]))
                print()


if __name__ == "__main__":
    main()

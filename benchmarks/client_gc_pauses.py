"""The garbage collector's pauses during a run, and what they do to the client's TTFT error.

Each run is one ``client_accuracy.py`` run (closed loop against the built-in truth server, first
wave warmup, prefill 50 ms, decode step 40 ms, 64 tokens; client pinned to CPU 0, server to CPU 1)
in a fresh child process, with the collector either

- ``quiet``: as a run is now (``runner/run_gc.py``: collected and frozen at the start, no
  automatic collection until the end), or
- ``auto``: as it was before (collected and frozen at the start, automatic collection on),

the two alternating run by run. ``gc.callbacks`` time every collection that starts while the load
runs (wall and the thread's CPU), by generation, with what it freed.

    .venv/bin/python benchmarks/client_gc_pauses.py --concurrency 512 --repeat 3
    .venv/bin/python benchmarks/client_gc_pauses.py --concurrency 256,512 --repeat 3 --client-rt
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import shlex
import subprocess
import sys
import time

from _harness import machine_line, median, pin_client, run_child, table

MODES = ("quiet", "auto")


@contextlib.asynccontextmanager
async def _auto_gc():
    """The collector as a run had it before run_gc: one collection and a freeze, then automatic."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def child(mode: str, concurrency: int, waves: int) -> dict:
    import client_accuracy
    import tokenpace.runner.loadgen as loadgen

    if mode == "auto":
        loadgen.quiet_gc = _auto_gc
    pauses: list[tuple[int, float, float, int]] = []  # generation, wall ms, CPU ms, collected
    started: list[int] = []
    in_run = [False]
    original_run = loadgen.LoadGenerator._run

    async def timed_run(self, start_at_ns):  # only collections while the load runs count
        in_run[0] = True
        try:
            await original_run(self, start_at_ns)
        finally:
            in_run[0] = False

    loadgen.LoadGenerator._run = timed_run

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            started[:] = [time.perf_counter_ns(), time.thread_time_ns(), in_run[0]]
        elif started and started[2]:
            pauses.append((info["generation"], (time.perf_counter_ns() - started[0]) / 1e6,
                           (time.thread_time_ns() - started[1]) / 1e6, info["collected"]))

    gc.callbacks.append(on_gc)
    figures = client_accuracy.run_once(concurrency, waves=waves, loop="uvloop", step_s=client_accuracy.STEP_S,
                                       tokens=client_accuracy.OUTPUT_TOKENS)
    gc.callbacks.remove(on_gc)
    figures["pauses"] = pauses
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", default="512", metavar="N[,N]", help="streams (default %(default)s)")
    ap.add_argument("--repeat", type=int, default=3, metavar="N", help="runs per mode and level (default 3)")
    ap.add_argument("--waves", type=int, default=3, metavar="N", help="requests per stream, the first warmup")
    ap.add_argument("--client-rt", action="store_true",
                    help="the client at real-time priority (diagnostic: other tenants cannot preempt it)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        run_child(args.child, child)
        return
    print(machine_line() + "; " + pin_client())
    print("Command: .venv/bin/python benchmarks/client_gc_pauses.py " + shlex.join(sys.argv[1:]) + "\n")
    results: dict[tuple[str, int], list[dict]] = {}
    for n in [int(x) for x in args.concurrency.split(",")]:
        for i in range(args.repeat):
            for mode in MODES if i % 2 == 0 else MODES[::-1]:
                kw = dict(mode=mode, concurrency=n, waves=args.waves, client_rt=args.client_rt)
                out = subprocess.run([sys.executable, __file__, "--child", json.dumps(kw)], check=True,
                                     capture_output=True, text=True).stdout
                f = json.loads(out.strip().splitlines()[-1])
                results.setdefault((mode, n), []).append(f)
                p = f["pauses"]
                print(f"  {mode:5} {n:>4} streams run {i + 1}: TTFT err p99 {f['ttft']['p99']:.2f} ms, chunk err p99 "
                      f"{f['chunk']['p99']:.2f} ms; {len(p)} collections in the run, "
                      f"{sum(x[2] for x in p):.1f} ms CPU, longest {max((x[1] for x in p), default=0):.1f} ms; "
                      f"client {f['client_cpu_s']:.2f} CPU-s; load average {os.getloadavg()[0]:.2f}", flush=True)
    print("\nCollections while the load ran (sums over the runs; wall and CPU ms) and the TTFT error (median of"
          " the runs' own percentiles, ms)\n")
    rows = []
    for (mode, n), runs in results.items():
        pauses = [x for r in runs for x in r["pauses"]]
        by_gen = [sum(1 for x in pauses if x[0] == g) for g in range(3)]
        rows.append([mode, n, len(runs), "/".join(map(str, by_gen)), sum(x[2] for x in pauses),
                     max((x[1] for x in pauses), default=0.0), max((x[2] for x in pauses if x[0] == 2), default=0.0),
                     sum(x[3] for x in pauses), median([r["ttft"]["p50"] for r in runs]),
                     median([r["ttft"]["p99"] for r in runs]),
                     " / ".join(f"{median([r['waves'][k]['p99'] for r in runs]):.2f}"
                                for k in sorted(runs[0]["waves"], key=int)),
                     median([r["chunk"]["p99"] for r in runs]), median([r["client_cpu_s"] for r in runs])])
    print(table(["gc", "streams", "runs", "collections gen 0/1/2", "CPU ms", "longest ms", "longest full, CPU ms",
                 "objects freed", "TTFT err p50", "TTFT err p99", "p99 by wave", "chunk err p99", "client CPU-s"],
                rows))


if __name__ == "__main__":
    main()

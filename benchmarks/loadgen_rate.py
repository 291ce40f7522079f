"""The highest chunk rate tokenpace's load generator sustains with schedule lag p99 under 1 ms.

Open loop (``run_bench`` with ``rate=R``, ``arrival`` constant or poisson, ``duration_s``), fixed
output length, against the built-in server in its own process (CPU 1, real-time priority when
allowed; no send log). The client runs in this process, pinned to CPU 0. A ladder of offered chunk
rates (chunk rate = request rate x output tokens, one token per chunk), each run ``--repeat`` times;
the ladder stops past tokenpace's own validity limit (lag p99 10 ms, or the client above 0.9 core);
then ``--refine`` bisection steps between the highest passing and the lowest failing step (on the
1 ms threshold when the ladder brackets it, else on 10 ms).

Per step: request rate (target, achieved), chunks/s received inside the measurement window,
schedule lag (sent_ns - scheduled_ns over measured requests) p50/p99/max, mean requests in flight and
TTFT p50 (sanity: the server's prefill is 20 ms, so a higher TTFT means queueing), client CPU (process time /
wall of the load generator, so it includes the open loop's busy-wait before each send) and the
server's CPU (so a server that saturates first is visible).

Server: prefill 20 ms, decode step 20 ms, 64 tokens (a request lives ~1.3 s; at 16,000 chunks/s that is
250 requests/s and ~325 in flight, max_num_seqs 2048 so nothing queues).

    .venv/bin/python benchmarks/loadgen_rate.py                    # constant arrivals
    .venv/bin/python benchmarks/loadgen_rate.py --arrival poisson
    .venv/bin/python benchmarks/loadgen_rate.py --ladder 2000,4000,8000 --repeat 5
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from pathlib import Path

import numpy as np

from _harness import machine_line, median, pcts, pin_client, table, truth_server

from tokenpace.config import BenchConfig
from tokenpace.runner.bench import run_bench

PREFILL_S, STEP_S, OUTPUT_TOKENS = 0.020, 0.020, 64
LAG_LIMIT_MS = 1.0  # the target of this benchmark
VALID_LAG_MS = 10.0  # tokenpace's own limit (runner/loadcheck.py): above it a run is marked invalid
IN_FLIGHT_CAP = 4096


def run_step(url: str, server, chunk_rate: float, *, arrival: str, duration_s: float, warmup_s: float,
             tokens: int, seed: int) -> dict:
    rate = chunk_rate / tokens
    with tempfile.TemporaryDirectory(prefix="tp-rate-") as tmp:
        # concurrency=IN_FLIGHT_CAP: a cap that never binds, only so that run_bench sizes the client's
        # connection pool (before 34beab1 an uncapped open loop got 16 connections: RESULTS.md).
        config = BenchConfig(url=url, rate=rate, concurrency=IN_FLIGHT_CAP, arrival=arrival,
                             duration_s=duration_s, warmup_s=warmup_s,
                             input_tokens="64", output_tokens=str(tokens), progress=False, seed=seed,
                             grace_s=10.0, out=str(Path(tmp) / "run.json"))
        server.mark()
        result = run_bench(config)
        server_cores = server.cores_since_mark()
    lo, hi = result.window_ns
    measured = [r for r in result.records if not r.warmup and r.sent_ns is not None]
    lags = [(r.sent_ns - r.scheduled_ns) / 1e6 for r in measured]
    chunks = sum(int(np.count_nonzero((np.asarray(r.chunk_ns) >= lo) & (np.asarray(r.chunk_ns) < hi)))
                 for r in result.records if r.chunk_ns)
    sends = sorted(r.sent_ns for r in measured)
    window_s = (hi - lo) / 1e9
    return {
        "rate": rate, "achieved_rps": len(sends) / window_s,
        "chunk_rate": chunks / window_s, "lag": pcts(lags),
        "client_cores": result.load["client_cpu_util"], "server_cores": server_cores,
        "in_flight": result.load["mean_in_flight"],
        "ttft_p50": median([(r.first_token_ns - r.sent_ns) / 1e6 for r in measured if r.first_token_ns]),
        "not_ok": sum(r.status != "ok" for r in measured),
    }


def summarize_step(runs: list[dict]) -> dict:
    return {
        "rate": runs[0]["rate"], "achieved_rps": median([r["achieved_rps"] for r in runs]),
        "chunk_rate": median([r["chunk_rate"] for r in runs]),
        "p50": median([r["lag"]["p50"] for r in runs]), "p99": median([r["lag"]["p99"] for r in runs]),
        "max": median([r["lag"]["max"] for r in runs]),
        "client_cores": median([r["client_cores"] for r in runs]),
        "server_cores": median([r["server_cores"] for r in runs]), "not_ok": sum(r["not_ok"] for r in runs),
        "in_flight": median([r["in_flight"] for r in runs]), "ttft_p50": median([r["ttft_p50"] for r in runs]),
        "runs": len(runs),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arrival", default="constant", choices=("constant", "poisson"))
    ap.add_argument("--ladder", default="500,1000,2000,4000,8000,12000,16000", metavar="CHUNKS_S[,..]",
                    help="offered chunk rates, chunks/s (default %(default)s)")
    ap.add_argument("--refine", type=int, default=1, metavar="N", help="bisection steps after the ladder")
    ap.add_argument("--repeat", type=int, default=3, metavar="N", help="runs per step (default 3)")
    ap.add_argument("--duration", type=float, default=4.0, metavar="SECONDS", help="measured seconds per run")
    ap.add_argument("--warmup", type=float, default=1.0, metavar="SECONDS", help="warmup seconds per run")
    ap.add_argument("--tokens", type=int, default=OUTPUT_TOKENS, metavar="N", help="output tokens per request")
    args = ap.parse_args()
    ladder = [float(x) for x in args.ladder.split(",")]
    print(machine_line() + "; " + pin_client())
    print("Command: .venv/bin/python benchmarks/loadgen_rate.py " + shlex.join(sys.argv[1:]))
    print(f"Server: prefill {PREFILL_S * 1e3:g} ms, step {STEP_S * 1e3:g} ms, {args.tokens} tokens; "
          f"{args.arrival} arrivals, {args.duration:g} s measured after {args.warmup:g} s warmup\n")
    steps: dict[float, dict] = {}
    with truth_server(None, max_num_seqs=2048, prefill_s=PREFILL_S, step_s=STEP_S) as server:
        if not server.rt:
            print("note: the server could not get real-time priority")

        def measure(chunk_rate: float) -> dict:
            runs = []
            for i in range(args.repeat):
                runs.append(run_step(server.url, server, chunk_rate, arrival=args.arrival,
                                     duration_s=args.duration, warmup_s=args.warmup, tokens=args.tokens,
                                     seed=i))
                f = runs[-1]
                print(f"  {chunk_rate:>8,.0f} chunks/s offered, run {i + 1}: lag p99 {f['lag']['p99']:.2f} ms, "
                      f"received {f['chunk_rate']:,.0f} chunks/s, client {f['client_cores']:.2f} cores, "
                      f"server {f['server_cores']:.2f} cores", flush=True)
            steps[chunk_rate] = summarize_step(runs)
            return steps[chunk_rate]

        for chunk_rate in ladder:
            step = measure(chunk_rate)
            if step["p99"] >= VALID_LAG_MS or step["client_cores"] > 0.9:
                break  # past tokenpace's own validity limit: higher steps only fail harder
        # Refine the 1 ms threshold when the ladder brackets it, else the 10 ms one.
        limit = LAG_LIMIT_MS if any(s["p99"] < LAG_LIMIT_MS for s in steps.values()) else VALID_LAG_MS
        for _ in range(args.refine):
            passing = [c for c, s in steps.items() if s["p99"] < limit]
            failing = [c for c, s in steps.items() if s["p99"] >= limit and passing and c > max(passing)]
            if not passing or not failing:
                break
            measure(round((max(passing) + min(failing)) / 2, -2))
    print(f"\nOpen loop, {args.arrival} arrivals; median of {args.repeat} runs; lag = sent - scheduled, ms\n")
    rows = []
    for chunk_rate in sorted(steps):
        s = steps[chunk_rate]
        rows.append([f"{chunk_rate:,.0f}", s["rate"], s["achieved_rps"], f"{s['chunk_rate']:,.0f}", s["p50"],
                     s["p99"], s["max"], s["in_flight"], s["ttft_p50"], s["client_cores"], s["server_cores"],
                     s["not_ok"], "yes" if s["p99"] < LAG_LIMIT_MS else "no",
                     "yes" if s["p99"] < VALID_LAG_MS else "no"])
    print(table(["offered chunks/s", "target req/s", "achieved req/s", "received chunks/s", "lag p50",
                 "lag p99", "lag max", "in flight", "TTFT p50", "client cores", "server cores", "not ok", "p99 < 1 ms", "p99 < 10 ms"], rows))
    print()
    for limit in (LAG_LIMIT_MS, VALID_LAG_MS):
        passing = [c for c, s in steps.items() if s["p99"] < limit]
        if passing:
            best = steps[max(passing)]
            print(f"Highest step with lag p99 < {limit:g} ms: {max(passing):,.0f} chunks/s offered "
                  f"({best['chunk_rate']:,.0f} received, {best['rate']:.1f} requests/s)")
        else:
            print(f"No step kept lag p99 under {limit:g} ms")


if __name__ == "__main__":
    main()

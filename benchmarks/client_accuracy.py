"""How accurate tokenpace's own timestamps are, against the built-in server's truth log.

The server (its own process, pinned to CPU 1, real-time priority when allowed) logs
``time.monotonic_ns()`` just before writing each chunk; tokenpace (``run_bench``, closed loop,
pinned to CPU 0) stamps each chunk when its read returns. Joined by request id (X-Request-ID):

- TTFT error  = client first_token_ns - server t_ns of the first token chunk
- chunk error = client chunk_ns[i] - server t_ns of token chunk i (every token chunk)
- TTFT e2e    = measured TTFT (first_token - sent) - server TTFT (first token write - "received"):
                adds the time a request spends inside the client after sent_ns
- in flight   = time-averaged requests the *server* held (received -> [DONE] written) while every
                worker should have been busy (from the N-th arrival to the last arrival)
- tokens      = client output_tokens (and its source) vs the tokens the server wrote

Server timing: prefill 50 ms (REFERENCE's TTFT), decode step 40 ms, 64 output tokens, 5% jitter. The
step is 4x REFERENCE's 10 ms because at 512 streams a 10 ms step asks 51,200 chunks/s of a
one-core Python server, which then falls behind and bunches its writes (the truth would still be
true, but the load would no longer be the one named). At 40 ms, 512 streams are 12,800 chunks/s:
the server stays below one core (its CPU is printed). The first wave of N requests (connection
set-up) is warmup, reported apart.

    .venv/bin/python benchmarks/client_accuracy.py                     # 1, 64, 256, 512 streams, 3 runs each
    .venv/bin/python benchmarks/client_accuracy.py --loops uvloop,asyncio --concurrency 64,256
    .venv/bin/python benchmarks/client_accuracy.py --client-rt    # diagnostic: no other tenant can preempt us
    .venv/bin/python benchmarks/client_accuracy.py --concurrency 256 --view both --repeat 5
        # the live view on (drawn a few times a second, to /dev/null) and off, runs alternated
        # (--view-refresh-s S: another frame rate)
    .venv/bin/python benchmarks/client_accuracy.py --concurrency 256 --workers 1,2   # one loop vs 2 processes

With --against REF (a git ref, e.g. main) every run is made twice, by this checkout's client and by
REF's (its src/ exported to a temporary folder), each in a fresh child process, in alternating order:
on a busy machine the two are compared under the same load. The server is the one of the tree
measured.

With --workers N > 1 the load runs in N worker processes (`tokenpace bench --workers N`); they are
not pinned (each may run on any CPU, the server's included), while one loop stays pinned as above.
"Client cores" is then the sum of the workers' CPU, and "chunks/s per client core" the chunks
received per second of the run divided by it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from rich.console import Console

from _harness import (RT_PRIORITY, run_child, run_loop, loopback_floor, machine_line, mean_in_flight, median, pcts, pin_client,
                      read_truth, table, truth_server)

from tokenpace.config import BenchConfig
from tokenpace.runner import progress
from tokenpace.runner.bench import run_bench_async

PREFILL_S, STEP_S, OUTPUT_TOKENS = 0.050, 0.040, 64
SINGLE_STREAM_REQUESTS = 5  # at 1 stream a request takes ~2.6 s: 1 warmup + 4 measured


def run_once(concurrency: int, *, waves: int, loop: str, step_s: float, tokens: int, view: bool = False,
             view_mode: str = "live", workers: int = 1) -> dict:
    """One closed-loop run against a fresh truth server; returns this run's figures. ``view``: the
    live view draws as on a terminal (rendered whole, written to /dev/null). ``workers``: client
    worker processes (1: one event loop in this process)."""
    warmup = concurrency
    requests = SINGLE_STREAM_REQUESTS if concurrency == 1 else concurrency * waves
    with tempfile.TemporaryDirectory(prefix="tp-acc-") as tmp:
        log = Path(tmp) / "sends.jsonl"
        with truth_server(log, max_num_seqs=concurrency, prefill_s=PREFILL_S, step_s=step_s) as server:
            config = BenchConfig(url=server.url, concurrency=concurrency, requests=requests - warmup,
                                 warmup_requests=warmup, input_tokens="128", output_tokens=str(tokens),
                                 progress=view, progress_mode=view_mode if view else "off",
                                 out=str(Path(tmp) / "run.json"), grace_s=30.0,
                                 workers=workers if workers > 1 else None)
            server.mark()
            pinned = os.sched_getaffinity(0)
            if workers > 1:  # worker processes inherit the affinity: let them use every CPU
                os.sched_setaffinity(0, range(os.cpu_count() or 1))
            try:
                with open(os.devnull, "w") as sink:
                    console = Console(file=sink, force_terminal=True, width=160) if view else None
                    result = run_loop(run_bench_async(config, progress_console=console), loop)
            finally:
                os.sched_setaffinity(0, pinned)
            server_cores = server.cores_since_mark()
            rt = server.rt
        truth = read_truth(log)
        # The records are read from the run's files, which live in `tmp`: read them before it goes.
        figures = analyze(result.records, truth, concurrency)
        chunks = sum(len(r.chunk_ns) for r in result.records)
    per_worker = (result.load.get("workers") or {}).get("per_worker")
    cores = (sum(w["client_cpu_util"] or 0.0 for w in per_worker) if per_worker
             else result.load["client_cpu_util"])
    figures.update(client_cores=cores, client_cpu_s=cores * result.load["wall_s"], server_cores=server_cores, server_rt=rt,
                   wall_s=result.load["wall_s"], chunks_per_s=chunks / result.load["wall_s"],
                   lag_p50=(result.load["schedule_lag_ms"] or {}).get("p50"),
                   lag_p99=(result.load["schedule_lag_ms"] or {}).get("p99"))
    return figures


def analyze(records, truth, concurrency: int) -> dict:
    ttft, chunk, ttft_e2e, first_wave_ttft = [], [], [], []
    by_wave: dict[int, list[float]] = {}  # TTFT error by the request's wave (index // streams)
    exact = compared = unmatched = not_ok = 0
    sources: dict[str, int] = {}
    for r in records:
        t = truth.get(r.request_id)
        if r.status != "ok":
            not_ok += 1
            continue
        if t is None or len(t.token_ns) != len(r.chunk_ns) or not t.token_ns:
            unmatched += 1
            continue
        err_ms = (np.asarray(r.chunk_ns, dtype=np.int64) - np.asarray(t.token_ns, dtype=np.int64)) / 1e6
        by_wave.setdefault(r.index // concurrency, []).append(err_ms[0])
        if r.warmup:
            first_wave_ttft.append(err_ms[0])
            continue
        ttft.append(err_ms[0])
        chunk.extend(err_ms.tolist())
        # Measured TTFT (first_token - sent) minus the server's (first write - received): the
        # arrival error plus the time the request spent in the client before it reached the server.
        ttft_e2e.append(err_ms[0] + (t.received_ns - r.sent_ns) / 1e6)
        compared += 1
        sources[r.output_tokens_source or "none"] = sources.get(r.output_tokens_source or "none", 0) + 1
        exact += r.output_tokens == sum(t.token_counts) and r.chunk_tokens == t.token_counts
    # Every worker should be busy from the N-th arrival on, until the last request arrived.
    arrivals = sorted(t.received_ns for t in truth.values())
    spans_server = [(t.received_ns, t.done_ns) for t in truth.values() if t.done_ns]
    spans_client = [(r.sent_ns, r.done_ns) for r in records if r.sent_ns and r.done_ns]
    lo, hi = (arrivals[concurrency - 1], arrivals[-1]) if len(arrivals) > concurrency else (arrivals[0], max(
        e for _, e in spans_server))
    return {
        "ttft": pcts(ttft), "chunk": pcts(chunk), "waves": {k: pcts(v) for k, v in sorted(by_wave.items())}, "ttft_e2e": pcts(ttft_e2e), "first_wave_ttft": pcts(first_wave_ttft),
        "in_flight_server": mean_in_flight(spans_server, lo, hi),
        "in_flight_client": mean_in_flight(spans_client, lo, hi),
        "exact": exact, "compared": compared, "unmatched": unmatched, "not_ok": not_ok, "sources": sources,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", default="1,64,256,512", metavar="N[,N]", help="streams (default %(default)s)")
    ap.add_argument("--repeat", type=int, default=3, metavar="N", help="runs per configuration (default 3)")
    ap.add_argument("--waves", type=int, default=3, metavar="N",
                    help="requests per stream, the first wave warmup (default 3)")
    ap.add_argument("--loops", default="uvloop", metavar="LOOP[,LOOP]", help="uvloop and/or asyncio")
    ap.add_argument("--step-ms", type=float, default=STEP_S * 1000, metavar="MS", help="server decode step")
    ap.add_argument("--tokens", type=int, default=OUTPUT_TOKENS, metavar="N", help="output tokens per request")
    ap.add_argument("--view", choices=("off", "on", "both"), default="off",
                    help="the live view during the runs: off (default), on, or both (alternated run by run)")
    ap.add_argument("--view-mode", choices=("live", "plain", "json"), default="live",
                    help="what the view draws with --view on/both (default live: the rich view)")
    ap.add_argument("--view-refresh-s", type=float, metavar="S",
                    help="seconds between the view's frames (default: the view's own, "
                         f"{progress.LIVE_REFRESH_S:g} live, {progress.PLAIN_EVERY_S:g} plain and json)")
    ap.add_argument("--workers", default="1", metavar="N[,N]",
                    help="client worker processes (default 1: one event loop in this process)")
    ap.add_argument("--client-rt", action="store_true",
                    help="run the client at real-time priority too (diagnostic: removes other tenants)")
    ap.add_argument("--against", metavar="REF",
                    help="also run a git ref's client (e.g. main), alternating with this checkout's, run by run")
    ap.add_argument("--child-json", help=argparse.SUPPRESS)  # one run in a child process (--against)
    args = ap.parse_args()
    if args.child_json:
        run_child(args.child_json, run_once)
        return
    if args.view_refresh_s is not None:
        progress.LIVE_REFRESH_S = progress.PLAIN_EVERY_S = args.view_refresh_s
    levels = [int(x) for x in args.concurrency.split(",")]
    loops = args.loops.split(",")
    worker_counts = [int(x) for x in args.workers.split(",")]
    print(machine_line() + "; " + pin_client())
    print("Command: .venv/bin/python benchmarks/client_accuracy.py " + shlex.join(sys.argv[1:]))
    print(f"Server: prefill {PREFILL_S * 1e3:g} ms, decode step {args.step_ms:g} ms, {args.tokens} tokens, "
          f"jitter 5%, 1 token per chunk; closed loop; first wave excluded (warmup)\n")
    if args.client_rt:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(RT_PRIORITY - 1))
        print("client at real-time priority (SCHED_FIFO): other processes on the machine cannot delay it")
    floor = loopback_floor()
    print(f"Loopback floor (blocking socket, no event loop, no HTTP; {floor['n']} writes 10 ms apart): "
          f"p50 {floor['p50']:.2f} ms, p99 {floor['p99']:.2f} ms, max {floor['max']:.2f} ms")
    views = {"off": [False], "on": [True], "both": [False, True]}[args.view]
    results: dict[tuple[str, int], list[dict]] = {}
    trees: list[str | None] = [None]  # None: this checkout, in this process
    with contextlib.ExitStack() as stack:
        if args.against:
            trees = [".", stack.enter_context(_exported(args.against))]
            print(f"Against {args.against} ({_commit(args.against)}; this checkout {_commit('HEAD')}): "
                  "each run made by both, in child processes, alternating which goes first\n")
        for loop in loops:
            for n, w in [(n, w) for n in levels for w in worker_counts]:
                for i in range(args.repeat):
                    order = views if i % 2 == 0 else views[::-1]  # alternate which goes first
                    tree_order = trees if i % 2 == 0 else trees[::-1]
                    for view, tree in [(v, t) for v in order for t in tree_order]:
                        label = _label(loop, w) + (" view" if view else "") if args.view != "off" else _label(loop, w)
                        if tree not in (None, "."):
                            label += f" @{args.against}"
                        kw = dict(concurrency=n, waves=args.waves, loop=loop, step_s=args.step_ms / 1000,
                                  tokens=args.tokens, view=view, view_mode=args.view_mode, workers=w)
                        f = run_once(**kw) if tree is None else _run_child(tree, kw, args.client_rt)
                        results.setdefault((label, n), []).append(f)
                        print(f"  {label} {n:>4} streams run {i + 1}: TTFT err p50 {f['ttft']['p50']:.2f} "
                              f"p99 {f['ttft']['p99']:.2f} ms, chunk err p99 {f['chunk']['p99']:.2f} ms, "
                              f"schedule lag p99 {f['lag_p99'] or 0:.1f} ms, "
                              f"client {f['client_cores']:.2f} cores ({f['client_cpu_s']:.2f} CPU-s), "
                              f"server {f['server_cores']:.2f} cores"
                              f"{'' if f['server_rt'] else ' (server NOT real-time)'}; "
                              f"load average {os.getloadavg()[0]:.2f}", flush=True)
    print("\nClient timing error, ms (measured - true; median of the runs' own percentiles). TTFT and chunk:"
          " arrival of the first / every token chunk; TTFT e2e: measured TTFT - server TTFT\n")
    rows = []
    for (loop, n), runs in results.items():
        m = lambda key, stat: median([r[key][stat] for r in runs])  # noqa: E731
        rows.append([loop, n, len(runs), m("ttft", "p50"), m("ttft", "p99"), m("ttft", "max"),
                     m("chunk", "p50"), m("chunk", "p99"), m("chunk", "max"),
                     m("ttft_e2e", "p50"), m("ttft_e2e", "p99"), m("first_wave_ttft", "p99")])
    print(table(["loop", "streams", "runs", "TTFT p50", "TTFT p99", "TTFT max", "chunk p50", "chunk p99",
                 "chunk max", "TTFT e2e p50", "TTFT e2e p99", "1st-wave TTFT p99"], rows))
    print("\nTTFT error by wave (requests k*N .. (k+1)*N-1 of N streams; wave 0 is the warmup), ms, median of"
          " the runs' own percentiles: a wave that starts while the previous one's records are being finished"
          " shows here\n")
    rows = []
    for (loop, n), runs in results.items():
        for k in sorted({k for r in runs for k in r["waves"]}):
            m = lambda stat: median([r["waves"][k][stat] for r in runs if k in r["waves"]])  # noqa: E731
            rows.append([loop, n, k, m("p50"), m("p99"), m("max")])
    print(table(["loop", "streams", "wave", "TTFT err p50", "p99", "max"], rows))
    if args.view == "both":
        print("\nLive view on / off, same loop and streams (ratio of the medians above)\n")
        rows = []
        for (label, n), runs in results.items():
            if not label.endswith(" view"):
                continue
            off = results[(label[: -len(" view")], n)]
            m = lambda rs, key, stat: median([r[key][stat] for r in rs])  # noqa: E731
            rows.append([label[: -len(" view")], n] + [
                f"{m(off, k, s):.2f} / {m(runs, k, s):.2f} ms ({m(runs, k, s) / m(off, k, s):.2f}x)"
                for k, s in (("ttft", "p50"), ("ttft", "p99"), ("chunk", "p99"))])
        print(table(["loop", "streams", "TTFT err p50 off / on", "TTFT err p99 off / on", "chunk err p99 off / on"],
                    rows))
    print("\nLoad held and cost (median of runs; schedule lag: sent - scheduled of the measured requests, a closed-loop"
          " request's wait for a send slot)\n")
    rows = []
    for (loop, n), runs in results.items():
        samples = sum(r["ttft"]["n"] for r in runs), sum(r["chunk"]["n"] for r in runs)
        exact = sum(r["exact"] for r in runs), sum(r["compared"] for r in runs)
        bad = sum(r["unmatched"] + r["not_ok"] for r in runs)
        srcs = sorted({s for r in runs for s in r["sources"]})
        lag = lambda stat: median([r.get(f"lag_{stat}") or 0.0 for r in runs])  # noqa: E731
        rows.append([loop, n, median([r["in_flight_server"] for r in runs]),
                     median([r["in_flight_client"] for r in runs]), f"{lag('p50'):.1f} / {lag('p99'):.1f}",
                     median([r["client_cores"] for r in runs]), median([r["server_cores"] for r in runs]),
                     f"{exact[0]}/{exact[1]} ({'/'.join(srcs)})", bad, f"{samples[0]}/{samples[1]}"])
    print(table(["loop", "target", "in flight (server)", "in flight (client)", "schedule lag p50 / p99 ms", "client cores",
                 "server cores", "tokens exact (source)", "not ok/unjoined", "samples TTFT/chunk"], rows))
    print("\nChunk rate (median of runs): chunks received per second of the run, and per client core\n")
    rows = [[loop, n, median([r["chunks_per_s"] for r in runs]),
             median([r["chunks_per_s"] / r["client_cores"] for r in runs if r["client_cores"]]),
             median([r["client_cores"] for r in runs])] for (loop, n), runs in results.items()]
    print(table(["loop", "streams", "chunks/s", "chunks/s per client core", "client cores"], rows))


@contextlib.contextmanager
def _exported(ref: str):
    """REF's src/ in a temporary folder (git archive): the tree a child process measures."""
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="tp-against-") as tmp:
        archive = subprocess.run(["git", "-C", str(root), "archive", ref, "src"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        yield tmp


def _commit(ref: str) -> str:
    root = Path(__file__).resolve().parents[1]
    return subprocess.run(["git", "-C", str(root), "rev-parse", "--short", ref], capture_output=True,
                          text=True).stdout.strip()


def _run_child(tree: str, kw: dict, client_rt: bool) -> dict:
    """One run by the client of ``tree`` ("." this checkout, else an exported src/ folder) in a fresh
    process, pinned as this one is."""
    env = dict(os.environ)
    if tree != ".":
        src = str(Path(tree) / "src")
        env["TOKENPACE_BENCH_SRC"] = src
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")  # the server process too
    out = subprocess.run([sys.executable, __file__, "--child-json", json.dumps({**kw, "client_rt": client_rt})],
                         env=env, check=True, capture_output=True, text=True).stdout
    f = json.loads(out.strip().splitlines()[-1])
    f["waves"] = {int(k): v for k, v in f["waves"].items()}
    return f


def _label(loop: str, workers: int) -> str:
    return loop if workers == 1 else f"{loop} x{workers} proc"


if __name__ == "__main__":
    main()

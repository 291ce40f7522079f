"""Summaries at scale: whole-process time and peak memory of summarizing a large run.

A synthetic run (REQUESTS requests, TOKENS output tokens each, one token per chunk; 2% errors
before the first token, 1% cancelled half-way) is written as a columnar records directory
(``tokenpace.results.columnar``) beside a result document. Each figure is one fresh process,
timed from start to exit by the parent, peak RSS and CPU seconds from /usr/bin/time; the median
of --runs.

- columnar summary: read the columnar file and ``summarize(..., slo="chat")``;
- report --slo: ``tokenpace report RUN.json --slo chat`` (reads the columnar file, its chunks
  part by part);
- report --html: the same with ``--html`` (the plots drawn from the columnar file);
- peer, in the same run: at --peer-requests, the per-record path (read the JSONL into
  ``RequestRecord``s, ``summarize``) against the columnar one on the same records;
- sim: ``tokenpace sim`` of --sim-requests requests, peak RSS;
- --against SRC: the summary and both reports again with another source tree (PYTHONPATH), on
  the same files, in the same invocation (e.g. a checkout of the previous release's ``src``);
- one thread: the summary with its block passes in one thread (the default is at most 2);
- --low-tokens: the summary of as many requests of fewer tokens: the difference of the peaks over
  the difference of tokens is what the summary's memory grows by per token (about 0 now that the
  pooled samples are described block by block; 8 bytes before).
- --memory-sizes: the summary's peak at each of these request counts (--memory-tokens tokens each,
  the first --memory-warmup requests warmup, so that the measured rows are a subset as in a run
  with warmup), and what it grows by per request between the least and the greatest size (with
  --against, the other tree's too). With --bench-end, the peak of all that ``bench`` does once its
  load has ended (the steady-state window, the summary over it, the load report): the memory that
  decides whether a run of any length finishes within the budget.

Reproduce:  .venv/bin/python benchmarks/summary_scale.py [--requests 1000000] [--tokens 128]
            [--runs 3] [--peer-requests 100000] [--sim-requests 100000] [--against OLD/src]
            [--memory-sizes 1000000,2000000,4000000 --memory-tokens 4 [--bench-end]]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

from tokenpace.config import BenchConfig
from tokenpace.metrics import summarize
from tokenpace.recordtable import BOOL_FIELDS, FLOAT_FIELDS, INT_FIELDS, NULL, RecordTable, Text
from tokenpace.results import RunResult, write_result
from tokenpace.results.columnar import ColumnarWriter

MS = 1_000_000
BLOCK = 65_536


def synthetic_block(start: int, n: int, tokens: int, rng: np.random.Generator, warmup: int = 0) -> RecordTable:
    index = np.arange(start, start + n, dtype=np.int64)
    sent = index * 2 * MS + rng.integers(0, MS, n)  # 500 req/s offered
    ttft = (rng.lognormal(np.log(150), 0.4, n) * MS).astype(np.int64)
    errors = rng.random(n) < 0.02
    cancelled = ~errors & (rng.random(n) < 0.01)
    count = np.where(errors, 0, np.where(cancelled, tokens // 2, tokens)).astype(np.int64)
    gaps = (rng.lognormal(np.log(20), 0.3, int(count.sum())) * MS).astype(np.int64)
    first = sent + ttft
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(count, out=offsets[1:])
    starts = np.repeat(offsets[:-1], count)
    gaps[offsets[:-1][count > 0]] = 0  # the first chunk is at first_token
    cum = np.cumsum(gaps)  # chunk j of a record: first + the gaps after its first chunk
    chunk_ns = np.repeat(first, count) + cum - cum[starts]
    last = np.full(n, NULL, dtype=np.int64)
    has = count > 0
    last[has] = chunk_ns[offsets[1:][has] - 1]
    done = np.where(has, last, sent + 5 * MS)
    ints = {k: np.full(n, NULL, dtype=np.int64) for k in INT_FIELDS}
    ints.update(index=index, attempt=np.ones(n, np.int64), scheduled_ns=sent, sent_ns=sent,
                first_token_ns=np.where(has, first, NULL), first_content_ns=np.where(has, first, NULL),
                last_token_ns=last, done_ns=done, prompt_tokens=np.full(n, 512, np.int64),
                output_tokens=np.where(has, count, NULL), output_tokens_client=np.where(has, count, NULL),
                requested_input_tokens=np.full(n, 512, np.int64), http_status=np.where(errors, 500, 200))
    bools = {k: np.zeros(n, bool) for k in BOOL_FIELDS}
    bools["stream"][:] = True
    bools["warmup"][:] = index < warmup  # the first ``warmup`` requests: not measured
    status = np.where(errors, 1, np.where(cancelled, 2, 0)).astype(np.int32)
    texts = {"api": Text(np.zeros(n, np.int32), ["chat"]),
             "status": Text(status, ["ok", "error", "cancelled"]),
             "chunk_tokens_source": Text(np.where(has, 0, -1).astype(np.int32), ["chunk_usage"]),
             "prompt_tokens_source": Text(np.zeros(n, np.int32), ["usage"]),
             "output_tokens_source": Text(np.where(has, 0, -1).astype(np.int32), ["usage"]),
             "error_kind": Text(np.where(errors, 0, np.where(cancelled, 1, -1)).astype(np.int32),
                                ["http_500", "cancelled"]),
             "error_message": Text(np.where(errors, 0, -1).astype(np.int32), ["internal error"]),
             "finish_reason": Text(np.where(has & ~cancelled, 0, -1).astype(np.int32), ["length"]),
             "model": Text(np.zeros(n, np.int32), ["synthetic"])}
    return RecordTable(ints=ints, bools=bools, floats={k: np.full(n, np.nan) for k in FLOAT_FIELDS},
                       texts=texts, chunk_count=count, chunk_ns=chunk_ns,
                       chunk_tokens=np.ones(chunk_ns.size, np.int32))


def make_run(directory: Path, requests: int, tokens: int, *, jsonl: bool, seed: int = 0, warmup: int = 0) -> Path:
    """RUN.json, RUN.columns/ and (when ``jsonl``) RUN.records.jsonl of a synthetic run (its first
    ``warmup`` requests marked as warmup)."""
    rng = np.random.default_rng(seed)
    result_path = directory / "run.json"
    records_path = directory / "run.records.jsonl"
    first = None
    with ColumnarWriter(directory / "run.columns") as writer, open(records_path, "wb") as fh:
        for start in range(0, requests, BLOCK):
            block = synthetic_block(start, min(BLOCK, requests - start), tokens, rng, warmup)
            writer.add_table(block)
            if jsonl:
                fh.write(b"".join(orjson.dumps(r) + b"\n" for r in to_dicts(block)))
            first = first or block
    config = BenchConfig(requests=requests, slo="chat", out=str(result_path))
    write_result(RunResult(kind="bench", config=config, target={"url": "synthetic", "model": "synthetic",
                                                                "builtin": False},
                           records=[], summary=summarize(first, slo="chat"), result_path=result_path,
                           records_path=records_path, load={"valid": True},
                           workload_info={"input_tokens": "512", "output_tokens": str(tokens),
                                          "input_length_source": "synthetic"}))
    os.sync()  # the files on disk before any figure: the first one measured does not pay their writeback
    return result_path


def to_dicts(table: RecordTable) -> list[dict]:
    """The records of a table as JSONL dicts (for the per-record peer)."""
    offsets = table.chunk_offsets()
    out = []
    texts = {k: t.values() for k, t in table.texts.items()}
    ints = {k: [None if v == NULL else v for v in a.tolist()] for k, a in table.ints.items()}
    ns = table.chunk_ns.tolist()
    for i in range(len(table)):
        row = {k: ints[k][i] for k in ints}
        row.update({k: texts[k][i] for k in texts})
        row.update(request_id=f"r{row['index']}", stream=True, warmup=False, retried=False,
                   chunk_ns=ns[offsets[i]:offsets[i + 1]], chunk_tokens=[1] * int(table.chunk_count[i]))
        out.append(row)
    return out


def measure(command: list[str], runs: int, src: str | None = None) -> tuple[float, float, float]:
    """Median wall seconds, peak RSS (MB) and CPU seconds (user + system) of ``command`` in fresh
    processes (``src``: run that source tree instead, by PYTHONPATH). On a shared machine CPU time is
    the steadier figure: wall time waits for the cores."""
    env = None if src is None else {**os.environ, "PYTHONPATH": src}
    walls, peaks, cpus = [], [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run(["/usr/bin/time", "-f", "%M %U %S", *command], capture_output=True, text=True,
                              env=env)
        walls.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            sys.exit(f"failed: {' '.join(command)}\n{proc.stderr[-2000:]}")
        rss, user, system = proc.stderr.strip().splitlines()[-1].split()
        peaks.append(int(rss) / 1024)
        cpus.append(float(user) + float(system))
    return statistics.median(walls), statistics.median(peaks), statistics.median(cpus)


BENCH_END = ("from tokenpace.config import BenchConfig; from tokenpace.runner.steady import steady_window; "
             "from tokenpace.runner.loadcheck import load_report; "
             "w = steady_window(t, closed_loop=False, concurrency=None, start_ns=0); "
             "summarize(t, slo='chat', window=w); "
             "load_report(t, config=BenchConfig(rate=500.0), mode='open', cpu_s=1.0, wall_s=2.0, window=w)")


def summary_command(run: Path, columnar: bool, threads: int | None = None, bench_end: bool = False) -> list[str]:
    """``threads``: the summary's worker threads (default: the library's, at most 2). ``bench_end``:
    what ``bench`` does once its load has ended (the steady-state window, the summary over it, the
    load report), rather than the summary alone."""
    if bench_end:
        code = (f"from tokenpace.results.columnar import read_table; from tokenpace.metrics import summarize; "
                f"t = read_table({str(run.with_suffix('.columns'))!r}, chunks=False); {BENCH_END}")
        return [sys.executable, "-c", code]
    if columnar:
        pin = ("import tokenpace.metrics.block_map as m; m.default_workers = lambda: %d; " % threads
               if threads else "")
        code = (f"{pin}from tokenpace.results.columnar import read_table; from tokenpace.metrics import summarize; "
                f"summarize(read_table({str(run.with_suffix('.columns'))!r}, chunks=False), slo='chat')")
    else:
        code = ("from tokenpace.results import read_records; from tokenpace.metrics import summarize; "
                f"summarize(read_records({str(run.with_name('run.records.jsonl'))!r}), slo='chat')")
    return [sys.executable, "-c", code]


def figure(what: str, m: tuple[float, float, float], target: str = "", peer: tuple | None = None) -> str:
    line = f"{what}: {m[0]:.2f} s ({m[2]:.2f} CPU-s), peak {m[1]:,.0f} MB{target}"
    if peer is not None:
        line += (f"\n    --against: {peer[0]:.2f} s ({peer[2]:.2f} CPU-s), peak {peer[1]:,.0f} MB; this tree is "
                 f"{peer[0] / m[0]:.2f}x faster in wall time, {peer[2] / m[2]:.2f}x in CPU time, "
                 f"{peer[1] / m[1]:.2f}x smaller")
    return line


def memory_scaling(sizes: list[int], tokens: int, warmup: int, runs: int, against: str | None,
                   budget_mb: float = 400, bench_end: bool = False) -> None:
    """The summary's peak at each size, and its growth per request from the least size to the greatest
    (``bench_end``: the peak of all that ``bench`` does after its load, the summary among it)."""
    what = "bench's end (window, summary, load report)" if bench_end else "columnar summary"
    peaks: dict[str | None, list[float]] = {None: [], against: []}
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            run = make_run(Path(tmp), n, tokens, jsonl=False, warmup=warmup)
            for src in ([None, against] if against else [None]):
                m = measure(summary_command(run, columnar=True, bench_end=bench_end), runs, src)
                peaks[src].append(m[1])
                print(figure(f"memory: {what} {n:,} x {tokens} ({warmup:,} warmup)"
                             + (" --against" if src else ""), m))
    within = max(peaks[None]) <= budget_mb
    print(f"    this tree: peak {min(peaks[None]):,.0f} to {max(peaks[None]):,.0f} MB over {sizes[0]:,} to {sizes[-1]:,} "
          f"requests: {'within' if within else 'OVER'} the summary's budget of {budget_mb:,.0f} MB (README, "
          f"\"Summaries of large runs\")")
    for src in ([None, against] if against else [None]):
        slope = (peaks[src][-1] - peaks[src][0]) * 2**20 / (sizes[-1] - sizes[0]) if len(sizes) > 1 else float("nan")
        print(f"    {'--against' if src else 'this tree'}: summary memory per request {slope:,.0f} bytes "
              f"({sizes[0]:,} to {sizes[-1]:,} requests); at 7,200,000 requests (an hour at 2,000 req/s) "
              f"that is {(peaks[src][0] + slope * (7_200_000 - sizes[0]) / 2**20) / 1024:.1f} GB")


def main() -> None:
    global BLOCK
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--requests", type=int, default=1_000_000)
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--peer-requests", type=int, default=100_000)
    p.add_argument("--sim-requests", type=int, default=100_000)
    p.add_argument("--low-tokens", type=int, default=32,
                   help="also summarize --requests of this many tokens: the summary's memory per token")
    p.add_argument("--against", default=None, metavar="SRC",
                   help="also time the summary and the reports with this source tree (PYTHONPATH), same files")
    p.add_argument("--memory-sizes", default="", metavar="N,N,...",
                   help="also the summary's peak memory at these request counts (--memory-tokens tokens each)")
    p.add_argument("--memory-tokens", type=int, default=4)
    p.add_argument("--bench-end", action="store_true",
                   help="--memory-sizes measures all that bench does after its load (the steady-state window, "
                        "the summary over it, the load report), not the summary alone")
    p.add_argument("--memory-warmup", type=int, default=1000)
    p.add_argument("--budget-mb", type=float, default=400,
                   help="the summary's stated memory budget: the --memory-sizes peaks are checked against it")
    p.add_argument("--part-rows", type=int, default=65_536,
                   help="requests per columnar part of the synthetic runs (bench writes 4,096)")
    args = p.parse_args()
    BLOCK = args.part_rows
    against = str(Path(args.against).resolve()) if args.against else None
    print(f"# {' '.join(sys.argv)}  (load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs)")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if args.peer_requests:
            (tmp / "peer").mkdir()
            peer = make_run(tmp / "peer", args.peer_requests, args.tokens, jsonl=True)
            rec = measure(summary_command(peer, columnar=False), args.runs)
            col = measure(summary_command(peer, columnar=True), args.runs)
            print(f"peer {args.peer_requests:,} x {args.tokens}: per-record {rec[0]:.2f} s ({rec[2]:.2f} CPU-s) "
                  f"{rec[1]:,.0f} MB; columnar {col[0]:.2f} s ({col[2]:.2f} CPU-s) {col[1]:,.0f} MB; ratio "
                  f"wall {rec[0] / col[0]:.1f}x, CPU {rec[2] / col[2]:.1f}x, memory {rec[1] / col[1]:.1f}x")
        (tmp / "big").mkdir()
        big = make_run(tmp / "big", args.requests, args.tokens, jsonl=False)
        size = f"{args.requests:,} x {args.tokens}"
        s = measure(summary_command(big, columnar=True), args.runs)
        print(figure(f"columnar summary {size}", s, " (target <= 2 s, <= 2048 MB)",
                     measure(summary_command(big, columnar=True), args.runs, against) if against else None))
        one = measure(summary_command(big, columnar=True, threads=1), args.runs)
        print(figure(f"columnar summary {size}, one thread", one))
        report = [sys.executable, "-m", "tokenpace", "report", str(big), "--slo", "chat"]
        r = measure(report, args.runs)
        print(figure(f"report --slo {size}", r, " (target <= 5 s)",
                     measure(report, args.runs, against) if against else None))
        html = [*report, "--html", str(tmp / "big.html")]
        h = measure(html, args.runs)
        print(figure(f"report --slo --html {size}", h,
                     f", page {(tmp / 'big.html').stat().st_size / 1024:,.0f} KiB (target <= 5 s)",
                     measure(html, args.runs, against) if against else None))
        if args.low_tokens:
            shutil.rmtree(tmp / "big")
            (tmp / "low").mkdir()
            low = make_run(tmp / "low", args.requests, args.low_tokens, jsonl=False)
            m = measure(summary_command(low, columnar=True), args.runs)
            per_token = (s[1] - m[1]) * 2**20 / (args.requests * (args.tokens - args.low_tokens))
            print(figure(f"columnar summary {args.requests:,} x {args.low_tokens}", m)
                  + f"\n    summary memory per token: {per_token:.2f} bytes (peak at {args.tokens} tokens less "
                  f"the peak at {args.low_tokens}, over the tokens between)")
    if args.memory_sizes:
        memory_scaling([int(n) for n in args.memory_sizes.split(",")], args.memory_tokens, args.memory_warmup,
                       args.runs, against, args.budget_mb, args.bench_end)
    if args.sim_requests:
        with tempfile.TemporaryDirectory() as tmp:
            sim = measure([sys.executable, "-m", "tokenpace", "sim", "--requests", str(args.sim_requests),
                           "--concurrency", "256", "--input-tokens", "512", "--output-tokens", "128",
                           "--no-progress", "--out", str(Path(tmp) / "sim.json")], 1)
            print(f"sim {args.sim_requests:,} requests: {sim[0]:.1f} s ({sim[2]:.1f} CPU-s), peak {sim[1]:,.0f} MB "
                  "(target < 300 MB)")
    print(f"# load average after: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

"""The memory of a long `tokenpace bench` run: resident memory over time, which must stay flat
however many requests the run has ended (issue 17: records spilled to the columnar parts as they
end), against the same run of another source tree in the same invocation (``--against``: e.g.
the code before the change, which kept every record in memory until the end).

Each run is `tokenpace bench` in a child process against the built-in server (in its own process,
2 ms decode steps, 1 ms prefill: fast enough that the client is the limit), bounded by its request
count and by ``--timeout``. The child's resident memory (RSS) is sampled every ``--every``
seconds, with how many records its JSONL journal holds by then. Printed per run: RSS over time,
the growth of RSS per 100,000 ended requests while the load runs (a least-squares line over those
samples after their first quarter: allocator warm-up before that), the peak RSS while the load runs
and the whole process's (the summary at the end included), the child's CPU seconds (user + system)
and wall time, and the load generator's schedule lag from its result file. Then the
on-loop costs of the record path, in-process: the JSONL line, ``Batch.add`` per record, sealing a
batch, and writing one part (in the writer thread); and the lateness of a 1 ms ticker on an event
loop ending 4,000 records a second, with the record path's work on the loop (the chosen design) or
handed whole to a thread (the alternative).

    .venv/bin/python benchmarks/bench_memory.py                                 # 200,000 requests
    .venv/bin/python benchmarks/bench_memory.py --requests 200000 --against OLD/src
    git archive 4f3cea2 src | tar -x -C OLD    # a source tree to compare with (OLD/src)
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson
import psutil

from _harness import machine_line, table, truth_server


def run_bench(url: str, args: argparse.Namespace, out: Path, pythonpath: str | None) -> dict:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    cmd = [sys.executable, "-m", "tokenpace", "bench", "--url", url, "--concurrency", str(args.concurrency),
           "--requests", str(args.requests), "--input-tokens", "64", "--output-tokens", str(args.tokens),
           "--no-progress", "--quiet", "--out", str(out)]
    if args.rate:
        cmd += ["--rate", str(args.rate)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    handle = psutil.Process(proc.pid)
    journal = out.with_name(out.stem + ".records.jsonl")
    samples = []  # (elapsed s, records ended, RSS MiB)
    line_bytes = None
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)  # reaps it here, with its CPU times
        if pid:
            break
        try:
            rss = handle.memory_info().rss / 2**20
        except psutil.NoSuchProcess:
            time.sleep(0.01)
            continue
        size = journal.stat().st_size if journal.exists() else 0
        if line_bytes is None and size > 1_000_000:
            with open(journal, "rb") as fh:  # the mean line length, from the first thousand lines
                head = [fh.readline() for _ in range(1000)]
            line_bytes = sum(map(len, head)) / len(head)
        samples.append((time.perf_counter() - t0, size, rss))
        if time.perf_counter() - t0 > args.timeout:
            proc.kill()
            raise SystemExit(f"bench ran past --timeout {args.timeout} s")
        time.sleep(args.every)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 5):
        raise SystemExit(f"bench failed ({code}): {proc.stderr.read().decode()[-800:]}")
    doc = orjson.loads(out.read_bytes())
    line_bytes = line_bytes or (journal.stat().st_size / max(1, doc["summary"]["counts"]["sent"]))
    rows = [(t, size / line_bytes, rss) for t, size, rss in samples]
    final = journal.stat().st_size
    during = [rss for _, size, rss in samples if size < final]  # the load still running
    return {"rows": rows, "wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_mib": usage.ru_maxrss / 1024, "load_peak_mib": max(during, default=float("nan")),
            "during": [(t, n, rss) for (t, n, rss), (_, size, _) in zip(rows, samples) if size < final],
            "load": doc["load_generator"],
            "counts": doc["summary"]["counts"], "code": code}


def growth_per_100k(rows: list[tuple[float, float, float]]) -> float:
    """MiB of RSS per 100,000 ended requests while the load runs: a least-squares line over the
    last three quarters of its samples (the first quarter is the allocator's warm-up)."""
    pts = [(n, rss) for _, n, rss in rows[len(rows) // 4:] if n > 0]
    if len(pts) < 3:
        return float("nan")
    n, rss = np.array(pts).T
    return float(np.polyfit(n, rss, 1)[0] * 100_000)


def over_time(rows: list[tuple[float, float, float]], points: int = 9) -> list[list]:
    picks = np.linspace(0, len(rows) - 1, min(points, len(rows))).round().astype(int)
    return [[f"{rows[i][0]:.0f}", f"{rows[i][1]:,.0f}", f"{rows[i][2]:.0f}"] for i in picks]


def loop_costs(tokens: int, n: int = 20_000) -> list[list]:
    """Per record on the event loop: the JSONL line and Batch.add; per batch: seal; in the thread:
    writing one part. Medians of 5 repeats, CPU time of this thread."""
    from tokenpace.record import RequestRecord
    from tokenpace.results.columnar import BATCH_RECORDS, Batch, ColumnarWriter

    records = [RequestRecord(request_id=f"r{i}", index=i, sent_ns=i, scheduled_ns=i, first_token_ns=i + 5,
                             last_token_ns=i + 9, done_ns=i + 9, chunk_ns=list(range(i, i + tokens)),
                             chunk_tokens=[1] * tokens, output_tokens=tokens, prompt_tokens=64,
                             output_tokens_source="usage", status="ok", finish_reason="length")
               for i in range(n)]

    def timed(fn) -> float:
        runs = []
        for _ in range(5):
            t = time.thread_time()
            fn()
            runs.append(time.thread_time() - t)
        return float(np.median(runs))

    line = timed(lambda: [orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE) for r in records]) / n
    batches: list[Batch] = []

    def add_all() -> None:
        batch = Batch()
        for r in records[:BATCH_RECORDS]:
            batch.add(r)
        batches.append(batch)

    add = timed(add_all) / BATCH_RECORDS
    seal = timed(lambda: batches[-1].seal())
    with tempfile.TemporaryDirectory(prefix="tp-part-") as tmp:
        writer = ColumnarWriter(Path(tmp) / "c.columns")
        table_ = batches[-1].seal()
        write = timed(lambda: writer.add_table(table_))
    return [["JSONL line (orjson), per record, on the loop", f"{line * 1e6:.1f} µs"],
            ["Batch.add, per record, on the loop", f"{add * 1e6:.1f} µs"],
            [f"seal a batch of {BATCH_RECORDS} records, on the loop", f"{seal * 1e6:.1f} µs"],
            [f"write one part of {BATCH_RECORDS} records, in the writer thread", f"{write * 1e3:.2f} ms"]]


def loop_lag(tokens: int, rate: int = 4000, seconds: float = 4.0, repeats: int = 3) -> list[list]:
    """Where the record path's work should run, measured: an event loop ends ``rate`` records a
    second (a burst every millisecond) while a ticker asks to wake every millisecond; the ticker's
    lateness is what the stamps of arriving chunks would suffer. Three ways: the records dropped
    (the floor), ``RecordSpool.add`` on the loop (the chosen design: array appends on the loop, parts
    written by the thread), and every record handed whole to a thread that does the appends too."""
    import asyncio
    import queue
    import threading

    from tokenpace.record import RequestRecord
    from tokenpace.results.spool import RecordSpool

    def record(i: int) -> RequestRecord:
        return RequestRecord(request_id=f"r{i}", index=i, sent_ns=i, scheduled_ns=i, first_token_ns=i + 5,
                             last_token_ns=i + 9, done_ns=i + 9, chunk_ns=list(range(i, i + tokens)),
                             chunk_tokens=[1] * tokens, output_tokens=tokens, prompt_tokens=64,
                             output_tokens_source="usage", status="ok", finish_reason="length")

    async def drive(sink) -> np.ndarray:
        """A producer ends ``rate`` records a second (a burst each millisecond) while a ticker, on
        the same loop, sleeps 0.7 ms at a time: how late it wakes is what a chunk's stamp would be."""
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        per_ms = max(1, rate // 1000)
        late: list[float] = []

        async def produce() -> None:
            i = 0
            while loop.time() < end:
                for _ in range(per_ms):
                    sink(record(i))
                    i += 1
                await asyncio.sleep(0.001)

        async def tick() -> None:
            while loop.time() < end:
                t = loop.time()
                await asyncio.sleep(0.0007)
                late.append((loop.time() - t - 0.0007) * 1e3)

        await asyncio.gather(produce(), tick())
        return np.array(late)

    names = ("records dropped (floor)", "RecordSpool.add on the loop (chosen)",
             "records handed to a thread that appends")
    got: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(prefix="tp-lag-") as tmp:
        for rep in range(repeats):  # the three ways interleaved, so that the machine's load falls alike
            for name in names:
                spool = RecordSpool(Path(tmp) / f"{rep}-{len(got[name])}-{names.index(name)}.columns")
                worker = None
                if name == names[0]:
                    sink = lambda r: None  # noqa: E731
                elif name == names[1]:
                    sink = spool.add
                else:
                    handoff: queue.SimpleQueue = queue.SimpleQueue()

                    def work(handoff=handoff, spool=spool) -> None:
                        while (r := handoff.get()) is not None:
                            spool.add(r)

                    worker = threading.Thread(target=work)
                    worker.start()
                    sink = handoff.put
                cpu = time.process_time()
                late = asyncio.run(drive(sink))
                if worker is not None:
                    handoff.put(None)
                    worker.join()
                spool.close()
                cpu = time.process_time() - cpu
                got[name].append((float(np.percentile(late, 50)), float(np.percentile(late, 99)),
                                  float(late.max()), cpu))
    rows = []
    for name in names:
        p50, p99, top, cpu = (float(np.median(col)) for col in zip(*got[name]))
        rows.append([name, f"{p50:.3f}", f"{p99:.3f}", f"{top:.2f}", f"{cpu:.2f}"])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--concurrency", type=int, default=128)
    ap.add_argument("--rate", type=float, default=None, help="open loop at this rate (default: closed loop)")
    ap.add_argument("--tokens", type=int, default=32, help="output tokens per request (default 32)")
    ap.add_argument("--every", type=float, default=1.0, help="RSS sample interval, s")
    ap.add_argument("--timeout", type=float, default=900.0, help="give up on a run after this many s")
    ap.add_argument("--against", default=None, metavar="SRC", help="also run this source tree (PYTHONPATH)")
    ap.add_argument("--costs-only", action="store_true", help="only the in-process costs (no bench runs)")
    args = ap.parse_args()
    print(machine_line())
    print("Command: .venv/bin/python benchmarks/bench_memory.py " + shlex.join(sys.argv[1:]))
    if not args.costs_only:
        runs_(args)
    print("\nOn-loop costs of the record path (this process, CPU time, median of 5):")
    print(table(["what", "cost"], loop_costs(args.tokens)))
    print("\nTicker lateness while an event loop ends 4,000 records/s (ms; CPU s of the whole process;"
          " medians of 3 interleaved repeats of 4 s):")
    print(table(["where the record path's work runs", "p50", "p99", "max", "CPU s"], loop_lag(args.tokens)))
    print(f"load average after: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")


def runs_(args: argparse.Namespace) -> None:
    runs = [("this tree", None)] + ([(f"--against {args.against}", str(Path(args.against).resolve()))]
                                    if args.against else [])
    results = {}
    with tempfile.TemporaryDirectory(prefix="tp-benchmem-") as tmp, \
            truth_server(None, max_num_seqs=4096, prefill_s=0.001, step_s=0.002, realtime=False) as server:
        for name, path in runs:
            results[name] = r = run_bench(server.url, args, Path(tmp) / f"{len(results)}.json", path)
            print(f"\n{name}: RSS over time")
            print(table(["s", "requests ended", "RSS MiB"], over_time(r["rows"])))
    print("\n" + table(
        ["run", "requests", "wall s", "CPU s", "peak RSS MiB during the load", "peak RSS MiB (with the summary)",
         "RSS growth MiB / 100k req", "lag p99 ms", "load"],
        [[name, r["counts"]["sent"], r["wall_s"], r["cpu_s"], r["load_peak_mib"], r["peak_mib"],
          growth_per_100k(r["during"]),
          (r["load"]["schedule_lag_ms"] or {}).get("p99", float("nan")),
          "valid" if r["load"]["valid"] else "invalid"] for name, r in results.items()]))
    if len(results) == 2:
        new, old = results.values()
        print(f"\nratio against --against: peak RSS during the load {old['load_peak_mib'] / new['load_peak_mib']:.2f}x "
              f"lower, whole-process peak {old['peak_mib'] / new['peak_mib']:.2f}x lower, "
              f"CPU {old['cpu_s'] / new['cpu_s']:.2f}x")


if __name__ == "__main__":
    main()

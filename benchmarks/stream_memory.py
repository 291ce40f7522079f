"""Memory per stream of the load generator: the peak resident memory of a `tokenpace bench` process
at two concurrencies, and the difference per added stream.

Each level is one closed-loop run (`tokenpace bench` in a child process, one event loop) against
the built-in server (decode step 40 ms, so the server keeps up), each stream sending
``--waves`` requests of ``--tokens`` output tokens. The child's resident memory (RSS) is sampled
every 50 ms; the figure is its peak. Per stream = (peak at the high level - peak at the low level)
/ (high - low): the connection, its buffers, the request in flight and the stream's share of the
end-of-run summary (finished records are no longer kept: they go to the columnar parts as they end).

    .venv/bin/python benchmarks/stream_memory.py                       # 64 and 512 streams
    .venv/bin/python benchmarks/stream_memory.py --levels 64,256 --tokens 256
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from _harness import machine_line, table, truth_server


def peak_rss_mib(url: str, concurrency: int, waves: int, tokens: int, out: Path) -> tuple[float, int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenpace", "bench", "--url", url, "--concurrency", str(concurrency),
         "--requests", str(concurrency * waves), "--input-tokens", "64", "--output-tokens", str(tokens),
         "--no-progress", "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    handle = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            peak = max(peak, handle.memory_info().rss)
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    if proc.returncode not in (0, 5):
        raise SystemExit(f"bench failed ({proc.returncode}): {proc.stderr.read().decode()[-500:]}")
    return peak / 2**20, proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="64,512", metavar="LOW,HIGH")
    ap.add_argument("--waves", type=int, default=2, metavar="N", help="requests per stream (default 2)")
    ap.add_argument("--tokens", type=int, default=128, metavar="N", help="output tokens per request")
    args = ap.parse_args()
    low, high = (int(x) for x in args.levels.split(","))
    print(machine_line())
    print("Command: .venv/bin/python benchmarks/stream_memory.py " + shlex.join(sys.argv[1:]))
    rows, peaks = [], {}
    with tempfile.TemporaryDirectory(prefix="tp-mem-") as tmp:
        for n in (low, high):
            with truth_server(None, max_num_seqs=n, prefill_s=0.05, step_s=0.04, realtime=False) as server:
                peaks[n], code = peak_rss_mib(server.url, n, args.waves, args.tokens, Path(tmp) / f"{n}.json")
            rows.append([n, n * args.waves, args.tokens, peaks[n], "valid" if code == 0 else "invalid (lag)"])
    print(table(["streams", "requests", "tokens each", "peak RSS MiB", "run"], rows))
    per_stream = (peaks[high] - peaks[low]) * 1024 / (high - low)
    per_request = per_stream / args.waves
    print(f"\nPer added stream: {per_stream:.0f} KiB (its connection, buffers and request in flight, and its "
          f"{args.waves} requests' share of the summary at the end: {per_request:.0f} KiB per request of "
          f"{args.tokens} tokens)")


if __name__ == "__main__":
    main()

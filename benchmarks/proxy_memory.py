"""The measuring proxy's memory under a load that never stops: with ``--gc quiet`` (no automatic
garbage collection while serving) its resident memory must stay flat when requests are
always in flight, so that no quiet moment ever comes and only the young-generation valve (and,
once it has opened, the ``--gc-full-every`` deadline) collects; ``--gc auto`` (Python's collector, the default) runs beside it for
comparison, one after the other against the same server.

Each mode: the built-in server (its own process), ``tokenpace proxy --gc MODE --gc-full-every F``,
and ``tokenpace bench`` through it, closed loop at ``--concurrency`` streams for ``--seconds``
(bounded by a request count too). The proxy's RSS is sampled every ``--every`` seconds. Printed:
RSS over time, its growth per minute and per 10,000 requests (a least-squares line over the samples
after the first quarter: the allocator's warm-up comes before), the peak, the requests relayed, the
proxy's CPU seconds and the load average.

    python benchmarks/proxy_memory.py                                   # 60 s each, 200 streams
    python benchmarks/proxy_memory.py --seconds 120 --full-every 30 --modes quiet
    python benchmarks/proxy_memory.py --seconds 60 --full-every 10 --probe     # + every collection's pause

``--probe`` runs the proxy under ``_relay_probe.py`` and prints its garbage collections during the
load, by generation (count, median and longest pause): with ``--gc quiet`` under a load that never
pauses, whatever the valve and the deadline did.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import numpy as np  # noqa: E402
import orjson  # noqa: E402
import psutil  # noqa: E402

from tokenpace.servers import BuiltinServerConfig, start_server_process  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_mode(mode: str, upstream: str, args: argparse.Namespace, workdir: Path) -> dict:
    port = free_port()
    probe_file = workdir / f"probe_{mode}.json"
    probe = [str(Path(__file__).resolve().parent / "_relay_probe.py"), str(probe_file)] if args.probe else []
    proxy = subprocess.Popen([sys.executable, *probe, "-m", "tokenpace", "proxy", "--upstream", upstream, "--listen",
                              f"127.0.0.1:{port}", "--gc", mode, "--gc-full-every", str(args.full_every)],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        proxy.stdout.readline()  # the "listening" line
        handle = psutil.Process(proxy.pid)
        out = workdir / f"bench_{mode}.json"
        # More requests than the time allows: --seconds ends the run (the kill below), the count bounds it.
        requests = int(args.concurrency / (args.tokens * args.decode_ms / 1000) * args.seconds * 2) + args.concurrency
        bench = subprocess.Popen([sys.executable, "-m", "tokenpace", "bench", "--url", f"http://127.0.0.1:{port}/v1",
                                  "--concurrency", str(args.concurrency), "--requests", str(requests),
                                  "--input-tokens", "16", "--output-tokens", str(args.tokens), "--no-progress",
                                  "--quiet", "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t0, t0_ns = time.monotonic(), time.monotonic_ns()
        samples = []  # (s, RSS MiB)
        while time.monotonic() - t0 < args.seconds and bench.poll() is None:
            samples.append((time.monotonic() - t0, handle.memory_info().rss / 2**20))
            time.sleep(args.every)
        wall = time.monotonic() - t0
        bench.terminate()
        bench.wait(30)
        cpu = handle.cpu_times()
        relayed = _requests_relayed(port)
    finally:
        proxy.terminate()
        proxy.wait(15)
    collections = orjson.loads(probe_file.read_bytes())["gc"] if args.probe and probe_file.exists() else []
    return {"samples": samples, "wall": wall, "cpu": cpu.user + cpu.system, "requests": relayed,
            "gc": [g for g in collections if g[0] >= t0_ns]}


def _requests_relayed(port: int) -> float:
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    total = 0.0
    for family in text_string_to_metric_families(text):
        if family.name == "tokenpace_requests":
            total += sum(s.value for s in family.samples if s.name == "tokenpace_requests_total")
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="quiet,auto", help="the --gc modes to run, in order")
    parser.add_argument("--seconds", type=float, default=60.0, help="load time per mode")
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=32, help="output tokens a request")
    parser.add_argument("--decode-ms", type=float, default=10.0, help="the server's time per token")
    parser.add_argument("--full-every", type=float, default=20.0,
                        help="tokenpace proxy --gc-full-every (the deadline, since the load never pauses)")
    parser.add_argument("--every", type=float, default=1.0, help="RSS sampling interval, s")
    parser.add_argument("--probe", action="store_true", help="time the proxy's garbage collections (_relay_probe.py)")
    args = parser.parse_args()
    print(f"reproduce: python benchmarks/proxy_memory.py --modes {args.modes} --seconds {args.seconds:g} "
          f"--concurrency {args.concurrency} --tokens {args.tokens} --decode-ms {args.decode_ms:g} "
          f"--full-every {args.full_every:g}" + (" --probe" if args.probe else ""))
    print("load average at start: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    server = start_server_process(BuiltinServerConfig(decode_base_s=args.decode_ms / 1000, decode_per_running_s=0.0,
                                                      max_num_seqs=args.concurrency * 2))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            results = {mode: one_mode(mode, server.url, args, Path(tmp)) for mode in args.modes.split(",")}
    finally:
        server.stop()
    for mode, r in results.items():
        t = np.array([s for s, _ in r["samples"]])
        rss = np.array([m for _, m in r["samples"]])
        later = t >= t[-1] / 4
        slope = np.polyfit(t[later], rss[later], 1)[0] if later.sum() > 2 else float("nan")  # MiB/s
        rate = r["requests"] / r["wall"]
        shown = ", ".join(f"{m:.1f}" for m in rss[:: max(len(rss) // 12, 1)])
        print(f"\n--gc {mode}: {r['requests']:.0f} requests in {r['wall']:.0f} s ({rate:.0f}/s), proxy CPU "
              f"{r['cpu']:.1f} s")
        print(f"  RSS MiB over time (every ~{t[-1] / 12:.0f} s): {shown}")
        print(f"  after the first quarter: growth {slope * 60:+.2f} MiB a minute, "
              f"{slope / rate * 10_000 if rate else float('nan'):+.3f} MiB per 10,000 requests; "
              f"peak {rss.max():.1f} MiB, last {rss[-1]:.1f} MiB")
        if args.probe:
            parts = []
            for gen in (0, 1, 2):
                ms = np.array([g[1] for g in r["gc"] if g[2] == gen]) / 1e6
                parts.append(f"gen{gen} {len(ms)}" + (f" (p50 {np.median(ms):.1f} / max {ms.max():.1f} ms)" if len(ms) else ""))
            print("  collections during the load: " + ", ".join(parts))
    print("\nload average at end: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()

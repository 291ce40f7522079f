"""What ``tokenpace proxy`` adds at 200 concurrent streams on loopback, against going direct and
against a plain aiohttp pass-through (``_passthrough.py``), with the built-in server's send log
as the truth of when each chunk left the server.

For each path the same load (``--streams`` concurrent streams of ``--tokens`` tokens, ``--rounds``
times) is sent by tokenpace's own client. Per chunk, the delivery delay is the client's arrival
stamp minus the server's send stamp (one monotonic clock across processes on Linux). A proxy's
added latency is its delivery delay minus the direct one, at the same percentile; ITL is the
client's. The proxy's own ``tokenpace_proxy_added_seconds`` histogram is read from its /metrics.
Each proxy runs as a process of its own, like the server.

    .venv/bin/python benchmarks/proxy_overhead.py
    .venv/bin/python benchmarks/proxy_overhead.py --streams 200 --tokens 64 --rounds 2
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import numpy as np  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from tokenpace.client import OpenAIClient  # noqa: E402
from tokenpace.metrics.latency import itl_samples  # noqa: E402
from tokenpace.record import RequestRecord  # noqa: E402
from tokenpace.servers import BuiltinServerConfig, read_send_log, start_server_process  # noqa: E402

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(argv: list[str], port: int) -> subprocess.Popen:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    proc.stdout.readline()  # the "listening" line
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"{argv} did not start")


async def load(url: str, tag: str, streams: int, tokens: int, rounds: int) -> list[RequestRecord]:
    out: list[RequestRecord] = []
    async with OpenAIClient(url, "tokenpace-sim", max_connections=streams) as client:
        for r in range(rounds):
            batch = [RequestRecord(request_id=f"{tag}-{r}-{i}", index=i, requested_output_tokens=tokens)
                     for i in range(streams)]
            await asyncio.gather(*(client.send(rec, "hello " * 8) for rec in batch))
            out += batch
    return out


def delays_ms(records: list[RequestRecord], truth: dict) -> np.ndarray:
    values = []
    for r in records:
        sent = truth.get(r.request_id, [])
        if r.status == "ok" and len(sent) == len(r.chunk_ns):
            values += [(got - t) / 1e6 for got, t in zip(r.chunk_ns, sent)]
    return np.array(values)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def proxy_added_histogram(port: int) -> str:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    buckets, count = [], 0.0
    for family in text_string_to_metric_families(text):
        if family.name == "tokenpace_proxy_added_seconds":
            for s in family.samples:
                if s.name.endswith("_bucket"):
                    buckets.append((float(s.labels["le"]), s.value))
                elif s.name.endswith("_count"):
                    count = s.value
    if not count:
        return "no samples"
    def q(p: float) -> str:
        return next(f"<= {le * 1e3:g} ms" for le, c in buckets if c >= p * count)
    return f"{count:.0f} requests; p50 {q(0.5)}, p99 {q(0.99)} (bucket bounds)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--decode-ms", type=float, default=20.0, help="the server's time per token")
    args = parser.parse_args()
    print(f"reproduce: python benchmarks/proxy_overhead.py --streams {args.streams} --tokens {args.tokens} "
          f"--rounds {args.rounds} --decode-ms {args.decode_ms:g}")
    print(f"load average at start: {os.getloadavg()[0]:.2f}; CPUs {os.cpu_count()}")
    log = Path(f"/tmp/proxy_overhead_sends_{os.getpid()}.jsonl")
    server = start_server_process(BuiltinServerConfig(send_log_path=str(log), decode_base_s=args.decode_ms / 1000,
                                                      decode_per_running_s=0.0, max_num_seqs=args.streams * 2))
    ours_port, plain_port = free_port(), free_port()
    ours = start([sys.executable, "-m", "tokenpace", "proxy", "--upstream", server.url,
                  "--listen", f"127.0.0.1:{ours_port}"], ours_port)
    plain = start([sys.executable, str(HERE / "_passthrough.py"), server.url, str(plain_port)], plain_port)
    paths = {"direct": server.url, "tokenpace proxy": f"http://127.0.0.1:{ours_port}/v1",
             "aiohttp pass-through": f"http://127.0.0.1:{plain_port}/v1"}
    try:
        results: dict[str, list[RequestRecord]] = {name: [] for name in paths}
        rss = []
        pids = {"tokenpace proxy": ours.pid, "aiohttp pass-through": plain.pid}
        cpu = {name: 0.0 for name in pids}
        for rep in range(args.rounds):  # interleaved, so drift in the machine's load hits all three
            for name, url in paths.items():
                before = cpu_s(pids[name]) if name in pids else 0.0
                results[name] += asyncio.run(load(url, f"{name[:6]}{rep}", args.streams, args.tokens, 1))
                if name in pids:
                    cpu[name] += cpu_s(pids[name]) - before
            rss.append(rss_mib(ours.pid))
        histogram = proxy_added_histogram(ours_port)
    finally:
        ours.terminate(), plain.terminate()
        ours.wait(10), plain.wait(10)
        server.stop()
    truth: dict = defaultdict(list)
    for line in read_send_log(log):
        if line["kind"] == "token":
            truth[line["request_id"]].append(line["t_ns"])
    log.unlink(missing_ok=True)
    base = delays_ms(results["direct"], truth)
    base_itl = np.median([s for r in results["direct"] for s in itl_samples(r)])
    print(f"\n{args.streams} concurrent streams x {args.tokens} tokens x {args.rounds} rounds per path; "
          "delivery delay = client arrival - server send, per chunk")
    print(f"{'path':<22}{'ok':>6}{'delay p50 ms':>14}{'delay p99 ms':>14}{'added p50 ms':>14}"
          f"{'added p99 ms':>14}{'ITL p50 ms':>12}{'vs direct':>11}")
    for name, records in results.items():
        d = delays_ms(records, truth)
        itl = np.median([s for r in records for s in itl_samples(r)])
        ok = sum(r.status == "ok" for r in records)
        p50, p99 = np.percentile(d, [50, 99])
        b50, b99 = np.percentile(base, [50, 99])
        print(f"{name:<22}{ok:>6}{p50:>14.3f}{p99:>14.3f}{p50 - b50:>14.3f}{p99 - b99:>14.3f}{itl:>12.3f}"
              f"{(itl / base_itl - 1) * 100:>+10.2f}%")
    print(f"\ntokenpace proxy's own tokenpace_proxy_added_seconds: {histogram}")
    chunks = args.streams * args.rounds * (args.tokens + 3)  # role, tokens, usage, [DONE]
    print("proxy process CPU per relayed chunk (load-independent): " + "; ".join(
        f"{name} {seconds / chunks * 1e6:.0f} µs" for name, seconds in cpu.items()))
    print(f"tokenpace proxy RSS after each round, MiB: {', '.join(f'{m:.1f}' for m in rss)}")


if __name__ == "__main__":
    main()

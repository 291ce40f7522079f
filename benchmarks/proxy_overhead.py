"""What ``tokenpace proxy`` adds at 200 concurrent streams on loopback, against going direct and
against a plain aiohttp pass-through (``_passthrough.py``), with the built-in server's send log
as the truth of when each chunk left the server. Everything the issue asks for, in one run.

Four processes, so that each is measured and none starves another: the built-in server, the relay
under test (``tokenpace proxy`` or the pass-through, both on uvloop), and a client that only stamps
arrivals (``_stamp_client.py``: socket reads and their times during the load, all parsing after).
With 3 CPUs or more each gets a CPU of its own (``os.sched_setaffinity``): server, client, relay;
with 2, the relay gets one and the server and client share the other (``--no-pin``: none).

A second ``tokenpace proxy`` runs with ``--starts-per-turn 0`` ("all at once"): a burst of new
requests sent upstream in one turn of its event loop, as before the proxy paced them, so that
what the pacing changes is visible in the same run.

For each path the same load (``--streams`` concurrent streams of ``--tokens`` tokens) is sent,
paths interleaved, ``--rounds`` times. Per token, the delivery delay is the client's arrival
stamp minus the server's send stamp (one monotonic clock across processes on Linux); a relay's
added latency is its delay minus direct's at the same percentile; ITL is the client's. The relay's
CPU time per relayed chunk (from /proc) does not depend on the machine's load; the proxy's own
``tokenpace_proxy_added_seconds`` histogram is read from its /metrics. Each path's slowest 1% of
tokens are placed: first, middle or last token of their stream, and whether other streams had just
ended (their end work is what a relay does then). For each request it also gives the way in (client send to the server's "received" line) and
the TTFT the client sees, against direct: the delivery delay starts at the server's send, so a
relay that holds requests before sending them upstream shows there. ``--hold`` runs the relays under
``_relay_hold.py``, which times how long each read waited inside the relay process; ``--probe`` runs
them under ``_relay_probe.py``: every garbage collection, the event loop's lag (a 1 ms ticker) and
the bursts of reads in each relay, and which of them each path's slowest tokens were delivered across.

    python benchmarks/proxy_overhead.py
    python benchmarks/proxy_overhead.py --streams 200 --tokens 64 --rounds 3
    python benchmarks/proxy_overhead.py --streams 200 --tokens 64 --rounds 1 --hold --relay loop
    python benchmarks/proxy_overhead.py --streams 200 --tokens 64 --rounds 3 --probe
    python benchmarks/proxy_overhead.py --streams 200 --tokens 64 --rounds 3 --accepts-per-turn 0

``--gc auto`` (the default, the proxy's) or ``quiet`` is the garbage-collection policy of the proxy paths
(``tokenpace proxy --gc``), and the pass-through is given the same one (``_passthrough.py --gc``);
``--gc-compare`` adds the proxy and the pass-through with the other policy, in the same rounds:

    python benchmarks/proxy_overhead.py --streams 200 --tokens 64 --rounds 3 --gc-compare

``--relay tap`` (the default, the proxy's) or ``loop`` is how the proxy paths relay a stream
(``tokenpace proxy --relay``: from the upstream connection's data callback, or a task awaiting each
read), and the pass-through relays the same way (``_passthrough.py --relay``); ``--relay-compare``
adds the proxy and the pass-through with the other one, in the same rounds:

    python benchmarks/proxy_overhead.py --streams 200 --tokens 64 --rounds 3 --relay-compare

``--accepts-per-turn N`` adds a path, ``tokenpace proxy --accepts-per-turn N`` (the proxy's
default is 8; 0: the event loop's own accept, every waiting connection at once): each client here
opens a new connection per request, so every round starts with a burst of 200 accepts.
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import numpy as np  # noqa: E402
import orjson  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from tokenpace.servers import BuiltinServerConfig, read_send_log, start_server_process  # noqa: E402

from _proxy_analysis import delays_ms, hold_summary, itl_ms, request_side, tail_where  # noqa: E402
from _probe_analysis import probe_summary  # noqa: E402
from _proxy_costs import hashing_cost, measuring_cost, start_cost  # noqa: E402

HERE = Path(__file__).resolve().parent
UNPACED = "tokenpace proxy, all at once"  # --starts-per-turn 0: a burst's requests all sent in one turn
PLAIN = "aiohttp pass-through"
OTHER_GC = {"quiet": "tokenpace proxy, --gc auto", "auto": "tokenpace proxy, --gc quiet"}  # --gc-compare
OTHER_RELAY = {"tap": "tokenpace proxy, --relay loop", "loop": "tokenpace proxy, --relay tap"}  # --relay-compare
PLAIN_OTHER_RELAY = {"tap": "aiohttp pass-through, relay loop", "loop": "aiohttp pass-through, relay tap"}
PLAIN_OTHER_GC = {"quiet": "aiohttp pass-through, Python's gc", "auto": "aiohttp pass-through, quiet gc"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(argv: list[str], port: int) -> subprocess.Popen:
    errors = tempfile.TemporaryFile()  # a relay's stderr, shown if it does not start
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=errors, text=True)
    proc.stdout.readline()  # the "listening" line
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    errors.seek(0)
    tail = errors.read().decode(errors="replace").strip().splitlines()[-5:]
    raise SystemExit(f"{argv} did not start" + "".join(f"\n  {line}" for line in tail))


CLIENT_CPU_S = [0.0]


def stamp_load(url: str, tag: str, streams: int, tokens: int, cpu: int | None) -> list[dict]:
    """One pass of the stamp-only client in its own process: per request, its token arrivals."""
    out = Path(f"/tmp/proxy_overhead_client_{os.getpid()}_{tag}.json")
    argv = [sys.executable, str(HERE / "_stamp_client.py"), url, str(streams), str(tokens), tag, str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv + (["--cpu", str(cpu)] if cpu is not None else []), check=True, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CLIENT_CPU_S[0] += after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    try:
        return orjson.loads(out.read_bytes())
    finally:
        out.unlink(missing_ok=True)


def layout(pin: bool) -> dict[str, int | None]:
    """Which CPU each process gets: server, client, relay."""
    cpus = sorted(os.sched_getaffinity(0))
    if not pin or len(cpus) < 2:
        return {"server": None, "client": None, "relay": None}
    if len(cpus) == 2:
        return {"server": cpus[0], "client": cpus[0], "relay": cpus[1]}
    return {"server": cpus[0], "client": cpus[1], "relay": cpus[2]}


def cpu_split(pid: int) -> np.ndarray:
    """(user, system) CPU seconds of a process so far (/proc/PID/stat): user is the relay's own
    code, system mostly the kernel's socket reads and writes (on loopback, a send also delivers)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return np.array([int(fields[11]), int(fields[12])]) / os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    return float(cpu_split(pid).sum())


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
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--decode-ms", type=float, default=20.0, help="the server's time per token")
    parser.add_argument("--no-pin", action="store_true", help="leave the processes where the OS puts them")
    diagnostics = parser.add_mutually_exclusive_group()
    diagnostics.add_argument("--probe", action="store_true",
                             help="run the relays under _relay_probe.py: every garbage collection, the event loop's "
                                  "lag (a 1 ms ticker) and the bursts of reads, against each path's slowest tokens")
    diagnostics.add_argument("--hold", action="store_true",
                             help="run the relays under _relay_hold.py: how long each read waited in the relay "
                                  "process before the relay took it, in CPU and wall time (a few µs a read)")
    parser.add_argument("--accepts-per-turn", type=int, default=None, metavar="N",
                        help="also run a fifth path: tokenpace proxy --accepts-per-turn N (a burst's new connections "
                             "accepted N per loop turn, the proxy's default 8; 0: all at once; the clients here open "
                             "a new connection per request)")
    parser.add_argument("--gc", choices=("quiet", "auto"), default="auto",
                        help="tokenpace proxy --gc MODE for the proxy paths (default auto, the proxy's default); the "
                             "pass-through gets the same policy")
    parser.add_argument("--gc-compare", action="store_true",
                        help="also run the proxy and the pass-through with the other --gc, in the same rounds")
    parser.add_argument("--relay", choices=("tap", "loop"), default="tap",
                        help="tokenpace proxy --relay MODE for the proxy paths (default tap, the proxy's default); the "
                             "pass-through relays the same way")
    parser.add_argument("--relay-compare", action="store_true",
                        help="also run the proxy and the pass-through with the other --relay, in the same rounds")
    args = parser.parse_args()
    if args.hold and (args.relay == "tap" or args.relay_compare):
        parser.error("--hold times each read's wait for readany(); a tapped relay writes each read as it arrives: "
                     "use --hold with --relay loop")
    accepts = f"tokenpace proxy, --accepts-per-turn {args.accepts_per_turn}"  # the fifth path, if asked
    print(f"reproduce: python benchmarks/proxy_overhead.py --streams {args.streams} --tokens {args.tokens} "
          f"--rounds {args.rounds} --decode-ms {args.decode_ms:g}" + (" --no-pin" if args.no_pin else "")
          + (" --hold" if args.hold else "") + (" --probe" if args.probe else "")
          + (f" --accepts-per-turn {args.accepts_per_turn}" if args.accepts_per_turn is not None else "")
          + (f" --gc {args.gc}" if args.gc != "auto" else "") + (" --gc-compare" if args.gc_compare else "")
          + (f" --relay {args.relay}" if args.relay != "tap" else "") + (" --relay-compare" if args.relay_compare else ""))
    load_start = os.getloadavg()
    cpus = layout(not args.no_pin)
    print(f"load average at start: {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f}; CPUs usable "
          f"{len(os.sched_getaffinity(0))}; pinning: " + ", ".join(f"{k} -> {'any' if v is None else f'CPU {v}'}"
                                                                   for k, v in cpus.items()))
    log = Path(f"/tmp/proxy_overhead_sends_{os.getpid()}.jsonl")
    server = start_server_process(BuiltinServerConfig(send_log_path=str(log), decode_base_s=args.decode_ms / 1000,
                                                      decode_per_running_s=0.0, max_num_seqs=args.streams * 2),
                                  cpus=None if cpus["server"] is None else [cpus["server"]])
    proxy = ["-m", "tokenpace", "proxy", "--upstream", server.url]
    plain = [str(HERE / "_passthrough.py"), server.url]
    relay_specs = [("tokenpace proxy", "ours", proxy + ["--gc", args.gc], None),  # (name, tag, argv, port flag)
                   (UNPACED, "unpaced", proxy + ["--gc", args.gc, "--starts-per-turn", "0"], None),
                   (PLAIN, "plain", plain + ["--gc", args.gc], "plain")]  # the same policy
    if args.accepts_per_turn is not None:
        relay_specs.append((accepts, "accepts", proxy + ["--gc", args.gc, "--accepts-per-turn",
                                                          str(args.accepts_per_turn)], None))
    if args.gc_compare:
        other = "auto" if args.gc == "quiet" else "quiet"
        relay_specs += [(OTHER_GC[args.gc], "othergc", proxy + ["--gc", other], None),
                        (PLAIN_OTHER_GC[args.gc], "plainothergc", plain + ["--gc", other], "plain")]
    if args.relay_compare:
        other = "loop" if args.relay == "tap" else "tap"
        relay_specs += [(OTHER_RELAY[args.relay], "otherrelay", proxy + ["--gc", args.gc, "--relay", other], None),
                        (PLAIN_OTHER_RELAY[args.relay], "plainotherrelay", plain + ["--gc", args.gc, "--relay", other],
                         "plain")]
    relay_specs = [(name, tag, argv if "--relay" in argv else argv + ["--relay", args.relay], kind)  # the same relay
                   for name, tag, argv, kind in relay_specs]
    holds = {name: Path(f"/tmp/proxy_overhead_hold_{os.getpid()}_{tag}.json") for name, tag, _, _ in relay_specs}
    paths = {"direct": server.url}
    pids: dict[str, int] = {}
    relays: list[subprocess.Popen] = []
    ours, ours_port = None, 0
    for name, _tag, argv, kind in relay_specs:
        port = free_port()
        probe = ([str(HERE / ("_relay_probe.py" if args.probe else "_relay_hold.py")), str(holds[name])]
                 if args.hold or args.probe else [])
        where = [str(port)] if kind == "plain" else ["--listen", f"127.0.0.1:{port}"]
        tail = argv[:2] + where + argv[2:] if kind == "plain" else argv + where
        relay = start([sys.executable, *probe, *tail], port)
        relays.append(relay)
        pids[name] = relay.pid
        paths[name] = f"http://127.0.0.1:{port}/v1"
        if ours is None:
            ours, ours_port = relay, port
    if cpus["relay"] is not None:
        for pid in pids.values():
            os.sched_setaffinity(pid, {cpus["relay"]})
    wall_start = time.monotonic()
    try:
        results: dict[str, list[dict]] = {name: [] for name in paths}
        rss: list[float] = []
        cpu = {name: 0.0 for name in pids}
        split = {name: np.zeros(2) for name in pids}
        for rep in range(args.rounds):  # interleaved, so drift in the machine's load hits every path
            for number, (name, url) in enumerate(paths.items()):
                before = cpu_split(pids[name]) if name in pids else None
                results[name] += stamp_load(url, f"path{number}r{rep}", args.streams, args.tokens,
                                            cpus["client"])
                if before is not None:
                    split[name] += cpu_split(pids[name]) - before
                    cpu[name] = float(split[name].sum())
            rss.append(rss_mib(ours.pid))
        histogram = proxy_added_histogram(ours_port)
        server_cpu = cpu_s(server.pid) if hasattr(server, "pid") else float("nan")
    finally:
        for relay in relays:
            relay.terminate()
        for relay in relays:
            relay.wait(10)
        server.stop()
    truth: dict = defaultdict(list)
    received: dict = {}
    for line in read_send_log(log):
        if line["kind"] == "token":
            truth[line["request_id"]].append(line["t_ns"])
        elif line["kind"] == "received":
            received[line["request_id"]] = line["t_ns"]
    log.unlink(missing_ok=True)
    base, _ = delays_ms(results["direct"], truth)
    base_itl = float(np.median(itl_ms(results["direct"])))
    b50, b99 = np.percentile(base, [50, 99])
    print(f"\n{args.streams} concurrent streams x {args.tokens} tokens x {args.rounds} rounds per path, "
          f"server {args.decode_ms:g} ms a token; delivery delay = client arrival - server send, per token")
    print(f"{'path':<34}{'matched':>9}{'delay p50 ms':>14}{'delay p99 ms':>14}{'added p50 ms':>14}"
          f"{'added p99 ms':>14}{'ITL p50 ms':>12}{'vs direct':>11}{'CPU/chunk':>11}")
    chunks = args.streams * args.rounds * (args.tokens + 3)  # role, tokens, usage, [DONE]
    verdicts = []
    for name, res in results.items():
        d, matched = delays_ms(res, truth)
        itl = float(np.median(itl_ms(res)))
        p50, p99 = np.percentile(d, [50, 99])
        per_chunk = f"{cpu[name] / chunks * 1e6:.1f} µs" if name in cpu else "-"
        print(f"{name:<34}{matched:>5}/{len(res):<3}{p50:>14.3f}{p99:>14.3f}{p50 - b50:>14.3f}{p99 - b99:>14.3f}"
              f"{itl:>12.3f}{(itl / base_itl - 1) * 100:>+10.2f}%{per_chunk:>11}")
        if name != "direct":
            verdicts.append(f"{name}: added p50 {p50 - b50:.3f} ms {'<=' if p50 - b50 <= 0.5 else '>'} 0.5, "
                            f"p99 {p99 - b99:.3f} ms {'<=' if p99 - b99 <= 2 else '>'} 2, ITL p50 "
                            f"{(itl / base_itl - 1) * 100:+.2f}% {'within' if abs(itl / base_itl - 1) <= 0.02 else 'outside'} 2%")
    print(f"\nthe issue's targets, set for 200 streams (this run: {args.streams}): added p50 <= 0.5 ms, "
          "p99 <= 2 ms, ITL p50 within 2% of direct")
    for line in verdicts:
        print("  " + line)
    if args.hold:
        print("\neach relay's own hold per read: from the bytes' arrival in the process to the relay's read of "
              "them (the event loop's other work in between), ms; CPU time excludes the OS's preemption")
        for name, path in ((n, p) for n, p in holds.items() if n in pids):
            print(f"  {name}: {hold_summary(path)}")
    if args.probe:
        print("\ninside each relay during the load (all times on the clock of the server's send log):")
        for name, path in ((n, p) for n, p in holds.items() if n in pids):
            print(f"  {name}:")
            for line in probe_summary(path, results[name], truth):
                print(f"    {line}")
    print("\nthe request's way in, and what a client sees (per request, ms; the delivery delay above starts at "
          "the server's send, so a relay that holds a request before sending it upstream shows here):")
    way_in = {name: request_side(res, truth, received) for name, res in results.items()}
    d_fwd, d_ttft = way_in["direct"]
    for name, (fwd, ttft) in way_in.items():
        print(f"  {name:<32} forward (client send -> server received) p50 {np.percentile(fwd, 50):.3f} / p99 "
              f"{np.percentile(fwd, 99):.3f}; TTFT p50 {np.percentile(ttft, 50):.3f} / p99 {np.percentile(ttft, 99):.3f}"
              f"; TTFT added p50 {np.percentile(ttft, 50) - np.percentile(d_ttft, 50):+.3f} / p99 "
              f"{np.percentile(ttft, 99) - np.percentile(d_ttft, 99):+.3f}")
    print("\nwhere each path's tail is:")
    for name, res in results.items():
        print(f"  {name}: {tail_where(res, truth, args.decode_ms)}")
    print(f"\ntokenpace proxy's own tokenpace_proxy_added_seconds: {histogram}")
    print("relay CPU per relayed chunk (process CPU time / chunks; far less load-dependent than latency): " + "; ".join(
        f"{name} {seconds / chunks * 1e6:.1f} µs" for name, seconds in cpu.items())
        + (f"; ratio {cpu['tokenpace proxy'] / cpu['aiohttp pass-through']:.2f}" if cpu["aiohttp pass-through"] else ""))
    print("  of which user (the relay's own code) / system (the kernel's socket work): " + "; ".join(
        f"{name} {u / chunks * 1e6:.1f} / {k / chunks * 1e6:.1f} µs" for name, (u, k) in split.items()))
    print(f"  tokenpace proxy's measurement alone (parse, stamp, finish the record; in-process CPU): {measuring_cost()}")
    print(f"  a request's start beyond aiohttp's (headers copied; the proxy's record, body fields, Progress, parser; "
          f"in-process CPU): {start_cost()}")
    print("--prompt-hashes, per request, after the answer is relayed: "
          + "; ".join(hashing_cost(words) for words in (500, 2000, 8000)))
    print(f"tokenpace proxy RSS after each round, MiB: {', '.join(f'{m:.1f}' for m in rss)}")
    wall = time.monotonic() - wall_start
    print(f"CPU time: server {server_cpu:.1f} s, stamp-only client {CLIENT_CPU_S[0]:.1f} s, relays "
          + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in cpu.items()) + f"; wall {wall:.1f} s")
    end = os.getloadavg()
    print(f"load average at end: {end[0]:.2f} {end[1]:.2f} {end[2]:.2f}")


if __name__ == "__main__":
    main()

"""What the client's loop was doing when a first token was stamped late.

Each run is one ``client_accuracy.py`` run (closed loop against the built-in truth server, first
wave warmup, prefill 50 ms, decode step 40 ms, 64 tokens; client pinned to CPU 0, server to CPU 1)
with three probes on the client's loop:

- socket reads: aiohttp's protocol ``data_received`` (the bytes leave the socket for the response's
  stream), stamped and counted;
- sends: each request's POST (``OpenAIClient._post``), counted;
- record hand-overs: each ended record's trip to the sink (``LoadGenerator._hand_over``), counted.

For every measured first token (waves 1 on) it splits the error (client stamp - server write) in
two: server write -> the read that brought its bytes, and that read -> the stamp. Then it counts
the sends, hand-overs and reads from 5 ms before the server's write to the client's stamp, per ms
of that window, for the first tokens stamped late (over ``--late-ms``) and for the others: the
work that is there more often around a late stamp is what held it.

    .venv/bin/python benchmarks/client_ttft_neighbours.py --concurrency 512 --repeat 3
    .venv/bin/python benchmarks/client_ttft_neighbours.py --concurrency 512 --repeat 3 --client-rt

The probes cost a few µs per event, so the errors here are a little above ``client_accuracy.py``'s.
"""

from __future__ import annotations

import argparse
import functools
import os
import shlex
import sys
from time import monotonic_ns

import aiohttp
import numpy as np
from aiohttp.client_proto import ResponseHandler

import client_accuracy
from _harness import RT_PRIORITY, machine_line, median, pin_client, table

import tokenpace.client.openai as client_openai
import tokenpace.client.responses as client_responses
import tokenpace.runner.loadgen as loadgen

BEFORE_NS = 5_000_000  # the window opens this long before the server's write
EVENTS: dict[str, list[int]] = {"read": [], "send": [], "record": []}
FIRST_READ: dict[str, tuple[int, int]] = {}  # request id -> (its first token's read, its stamp)


class _ProbedHandler(ResponseHandler):
    last_read_ns = 0

    def data_received(self, data: bytes) -> None:
        self.last_read_ns = monotonic_ns()
        EVENTS["read"].append(self.last_read_ns)
        super().data_received(data)


def _install_probes() -> None:
    connector_init = aiohttp.TCPConnector.__init__

    def init(self, *args, **kwargs):
        connector_init(self, *args, **kwargs)
        self._factory = functools.partial(_ProbedHandler, loop=self._loop)  # not public: a probe

    aiohttp.TCPConnector.__init__ = init
    post = client_openai.OpenAIClient._post

    async def probed_post(self, session, data, headers):
        EVENTS["send"].append(monotonic_ns())
        return await post(self, session, data, headers)

    client_openai.OpenAIClient._post = probed_post
    hand_over = loadgen.LoadGenerator._hand_over

    def probed_hand_over(self, ended):
        EVENTS["record"].append(monotonic_ns())
        hand_over(self, ended)

    loadgen.LoadGenerator._hand_over = probed_hand_over
    apply_events = client_responses.apply_events

    def probed_apply(events, now, record, progress, fmt=client_responses._CHAT):
        had = bool(record.chunk_ns)
        stop = apply_events(events, now, record, progress, fmt)
        if not had and record.chunk_ns:
            # The read that brought these bytes: the connection's last data_received, which ran
            # before this task resumed (nothing else runs between the read's return and here).
            protocol = PROTOCOLS.get(id(progress))
            FIRST_READ[record.request_id] = (getattr(protocol, "last_read_ns", 0) or now, now)
        return stop

    client_responses.apply_events = probed_apply
    read_stream = client_responses.read_stream

    async def probed_read_stream(resp, record, progress, fmt=client_responses._CHAT):
        PROTOCOLS[id(progress)] = resp.connection.protocol if resp.connection is not None else None
        try:
            return await read_stream(resp, record, progress, fmt)
        finally:
            PROTOCOLS.pop(id(progress), None)

    client_openai.read_stream = probed_read_stream


PROTOCOLS: dict[int, object] = {}  # id(progress) -> its connection's protocol, while its stream is read


def analyze(records, truth, concurrency: int) -> dict:
    figures = ANALYZE(records, truth, concurrency)
    kinds = ("send", "record", "read")
    sorted_events = {k: np.sort(np.asarray(EVENTS[k], dtype=np.int64)) for k in kinds}
    split: list[tuple[float, float]] = []
    rates: dict[bool, list[list[float]]] = {True: [], False: []}
    for r in records:
        t = truth.get(r.request_id)
        if r.status != "ok" or r.warmup or t is None or not t.token_ns or r.first_token_ns is None:
            continue
        write, stamp = t.token_ns[0], r.first_token_ns
        read = FIRST_READ.get(r.request_id, (stamp, stamp))[0]
        split.append(((read - write) / 1e6, (stamp - read) / 1e6))
        lo, hi = write - BEFORE_NS, stamp
        span_ms = max(hi - lo, 1) / 1e6
        counts = [(np.searchsorted(sorted_events[k], hi) - np.searchsorted(sorted_events[k], lo)) / span_ms
                  for k in kinds]
        rates[(stamp - write) / 1e6 > LATE_MS].append(counts)
    parts = np.asarray(split) if split else np.zeros((0, 2))
    figures["split"] = {name: {"p50": float(np.percentile(parts[:, i], 50)), "p99": float(np.percentile(parts[:, i], 99))}
                        for i, name in enumerate(("write_to_read", "read_to_stamp"))} if len(parts) else {}
    figures["rates"] = {("late" if late else "on_time"): {"n": len(rows), **{
        k: float(np.mean([row[i] for row in rows])) if rows else 0.0 for i, k in enumerate(kinds)}}
        for late, rows in rates.items()}
    for events in EVENTS.values():
        events.clear()
    FIRST_READ.clear()
    return figures


ANALYZE = client_accuracy.analyze
LATE_MS = 1.5


def main() -> None:
    global LATE_MS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", default="512", metavar="N[,N]", help="streams (default %(default)s)")
    ap.add_argument("--repeat", type=int, default=3, metavar="N", help="runs per level (default 3)")
    ap.add_argument("--late-ms", type=float, default=LATE_MS, help="a first token this late is late (default 1.5)")
    ap.add_argument("--client-rt", action="store_true",
                    help="run the client at real-time priority (diagnostic: removes other tenants)")
    args = ap.parse_args()
    LATE_MS = args.late_ms
    print(machine_line() + "; " + pin_client())
    print("Command: .venv/bin/python benchmarks/client_ttft_neighbours.py " + shlex.join(sys.argv[1:]))
    if args.client_rt:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(RT_PRIORITY - 1))
    _install_probes()
    client_accuracy.analyze = analyze
    rows, rate_rows = [], []
    for n in [int(x) for x in args.concurrency.split(",")]:
        runs = []
        for i in range(args.repeat):
            f = client_accuracy.run_once(n, waves=3, loop="uvloop", step_s=client_accuracy.STEP_S,
                                         tokens=client_accuracy.OUTPUT_TOKENS)
            runs.append(f)
            print(f"  {n} streams run {i + 1}: TTFT err p99 {f['ttft']['p99']:.2f} ms; server write -> read p99 "
                  f"{f['split']['write_to_read']['p99']:.2f} ms, read -> stamp p99 {f['split']['read_to_stamp']['p99']:.2f}"
                  f" ms; load average {os.getloadavg()[0]:.2f}", flush=True)
        m = lambda key, part, stat: median([r[key][part][stat] for r in runs])  # noqa: E731
        rows.append([n, len(runs), m("split", "write_to_read", "p50"), m("split", "write_to_read", "p99"),
                     m("split", "read_to_stamp", "p50"), m("split", "read_to_stamp", "p99")])
        for kind in ("late", "on_time"):
            rate_rows.append([n, kind, sum(r["rates"][kind]["n"] for r in runs)] + [
                median([r["rates"][kind][k] for r in runs]) for k in ("send", "record", "read")])
    print("\nFirst-token error split (ms, median of the runs' own percentiles): server write -> the socket read"
          " that brought the bytes, and that read -> the client's stamp\n")
    print(table(["streams", "runs", "write->read p50", "write->read p99", "read->stamp p50", "read->stamp p99"], rows))
    print(f"\nThe loop's work from 5 ms before the server's write to the stamp, per ms (median of runs); late: over"
          f" {LATE_MS:g} ms\n")
    print(table(["streams", "first tokens", "n", "sends/ms", "record hand-overs/ms", "socket reads/ms"], rate_rows))


if __name__ == "__main__":
    main()

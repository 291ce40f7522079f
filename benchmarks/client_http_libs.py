"""aiohttp or httpx for the client? A minimal streaming reader in each, timed against the truth log.

Both readers do exactly the same work per read, so only the HTTP library differs: stamp
``monotonic_ns()`` when the read returns, feed tokenpace's SSE parser, decode each event with orjson
and classify it (``classify_chunk``), keep the stamp of every token chunk. Closed loop: N workers,
each sends its next request as soon as the previous one is done; the first wave (N requests, which
opens the connections) is warmup. Variants:

- aiohttp: one ``ClientSession``, ``TCPConnector(limit=0)``, ``resp.content.readany()``
- httpx-raw: one ``httpx.AsyncClient`` with ``Limits(max_connections=N + 16,
  max_keepalive_connections=N + 16)``, ``resp.aiter_raw()``
- httpx-bytes: the same with ``resp.aiter_bytes()`` (adds the content-decoding layer)

Server, as in client_accuracy.py: the built-in server on CPU 1 at real-time priority, prefill 50 ms,
decode step 40 ms, 64 tokens, with a send log; the client on CPU 0, under uvloop (what tokenpace uses;
``--loop asyncio`` to change). Variants alternate inside each repeat, so drifting machine load hits
them alike.

    .venv/bin/python benchmarks/client_http_libs.py        # aiohttp vs httpx-raw at 64 and 256, 3 runs
    .venv/bin/python benchmarks/client_http_libs.py --concurrency 512 --variants aiohttp,httpx-raw,httpx-bytes --repeat 1

(httpx at 512 streams takes ~40 s a run, because its pool saturates the client core: hence not in the
default set, which finishes in about 2 minutes.)
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson

from _harness import (run_loop, loopback_floor, machine_line, mean_in_flight, median, pcts, pin_client, read_truth,
                      table, truth_server)

from tokenpace.client.chunks import classify_chunk
from tokenpace.client.sse import SSEParser

PREFILL_S, STEP_S, OUTPUT_TOKENS = 0.050, 0.040, 64
VARIANTS = ("aiohttp", "httpx-raw", "httpx-bytes")
RUN_LIMIT_S = 60.0  # a run that takes longer is stopped and reported as such


@dataclass(slots=True)
class Stream:
    request_id: str
    warmup: bool
    sent_ns: int = 0
    chunk_ns: list[int] = field(default_factory=list)
    done_ns: int = 0
    error: str | None = None


def _on_read(parser: SSEParser, data: bytes, now: int, stream: Stream) -> None:
    for event in parser.feed(data):
        if event.data == "[DONE]":
            stream.done_ns = now
            continue
        if classify_chunk(orjson.loads(event.data)).is_token:
            stream.chunk_ns.append(now)


def _body(tokens: int) -> bytes:
    return orjson.dumps({"model": "tokenpace-sim", "messages": [{"role": "user", "content": "word " * 128}],
                         "max_tokens": tokens, "stream": True,
                         "stream_options": {"include_usage": True, "continuous_usage_stats": True}})


async def _aiohttp_worker(url: str, body: bytes, jobs: list[Stream], session) -> None:
    headers = {"Content-Type": "application/json"}
    while jobs:
        stream = jobs.pop()
        parser = SSEParser()
        stream.sent_ns = time.monotonic_ns()
        try:
            async with session.post(url, data=body, headers={**headers, "X-Request-ID": stream.request_id}) as r:
                read = r.content.readany
                while data := await read():
                    _on_read(parser, data, time.monotonic_ns(), stream)
        except Exception as exc:  # noqa: BLE001 - counted, not fatal
            stream.error = type(exc).__name__


async def _httpx_worker(url: str, body: bytes, jobs: list[Stream], client, raw: bool) -> None:
    headers = {"Content-Type": "application/json"}
    while jobs:
        stream = jobs.pop()
        parser = SSEParser()
        stream.sent_ns = time.monotonic_ns()
        try:
            async with client.stream("POST", url, content=body,
                                     headers={**headers, "X-Request-ID": stream.request_id}) as r:
                chunks = r.aiter_raw() if raw else r.aiter_bytes()
                async for data in chunks:
                    _on_read(parser, data, time.monotonic_ns(), stream)
        except Exception as exc:  # noqa: BLE001
            stream.error = type(exc).__name__


async def drive(variant: str, url: str, concurrency: int, streams: list[Stream], tokens: int) -> None:
    jobs = list(reversed(streams))  # pop() takes them in order
    body = _body(tokens)
    url = url + "/chat/completions"
    if variant == "aiohttp":
        import aiohttp

        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            await asyncio.wait_for(asyncio.gather(
                *(_aiohttp_worker(url, body, jobs, session) for _ in range(concurrency))), RUN_LIMIT_S)
    else:
        import httpx

        limits = httpx.Limits(max_connections=concurrency + 16, max_keepalive_connections=concurrency + 16)
        async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(RUN_LIMIT_S)) as client:
            await asyncio.wait_for(asyncio.gather(
                *(_httpx_worker(url, body, jobs, client, variant == "httpx-raw") for _ in range(concurrency))),
                RUN_LIMIT_S)


def run_once(variant: str, concurrency: int, *, waves: int, loop: str, tokens: int) -> dict:
    streams = [Stream(f"{variant}-{i:06d}", warmup=i < concurrency) for i in range(concurrency * waves)]
    with tempfile.TemporaryDirectory(prefix="tp-libs-") as tmp:
        log = Path(tmp) / "sends.jsonl"
        with truth_server(log, max_num_seqs=concurrency, prefill_s=PREFILL_S, step_s=STEP_S) as server:
            server.mark()
            cpu0, t0 = time.process_time(), time.monotonic()
            timed_out = False
            try:
                run_loop(drive(variant, server.url, concurrency, streams, tokens), loop)
            except asyncio.TimeoutError:
                timed_out = True
            wall_s = time.monotonic() - t0
            client_cores = (time.process_time() - cpu0) / wall_s
            server_cores = server.cores_since_mark()
        truth = read_truth(log)
    ttft, chunk, bad = [], [], 0
    for s in streams:
        t = truth.get(s.request_id)
        if s.error or t is None or len(t.token_ns) != len(s.chunk_ns) or not s.chunk_ns:
            bad += 1
            continue
        if s.warmup:
            continue
        err = (np.asarray(s.chunk_ns, dtype=np.int64) - np.asarray(t.token_ns, dtype=np.int64)) / 1e6
        ttft.append(err[0])
        chunk.extend(err.tolist())
    arrivals = sorted(t.received_ns for t in truth.values())
    spans = [(t.received_ns, t.done_ns) for t in truth.values() if t.done_ns]
    in_flight = (mean_in_flight(spans, arrivals[concurrency - 1], arrivals[-1])
                 if len(arrivals) > concurrency else None)
    return {"ttft": pcts(ttft), "chunk": pcts(chunk), "in_flight": in_flight, "client_cores": client_cores,
            "server_cores": server_cores, "wall_s": wall_s, "bad": bad, "timed_out": timed_out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", default="64,256", metavar="N[,N]", help="streams (default %(default)s)")
    ap.add_argument("--variants", default="aiohttp,httpx-raw", metavar="V[,V]", help="default %(default)s")
    ap.add_argument("--repeat", type=int, default=3, metavar="N", help="runs per configuration (default 3)")
    ap.add_argument("--waves", type=int, default=2, metavar="N",
                    help="requests per stream, the first wave warmup (default 2)")
    ap.add_argument("--loop", default="uvloop", choices=("uvloop", "asyncio"))
    ap.add_argument("--tokens", type=int, default=OUTPUT_TOKENS, metavar="N", help="output tokens per request")
    args = ap.parse_args()
    levels = [int(x) for x in args.concurrency.split(",")]
    variants = args.variants.split(",")
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        ap.error(f"unknown variants {sorted(unknown)}; known: {', '.join(VARIANTS)}")
    print(machine_line() + "; " + pin_client())
    print("Command: .venv/bin/python benchmarks/client_http_libs.py " + shlex.join(sys.argv[1:]))
    import aiohttp
    import httpx

    print(f"aiohttp {aiohttp.__version__}, httpx {httpx.__version__}; loop {args.loop}; server: prefill "
          f"{PREFILL_S * 1e3:g} ms, step {STEP_S * 1e3:g} ms, {args.tokens} tokens; {args.waves} waves, first "
          f"excluded")
    floor = loopback_floor()
    print(f"Loopback floor (blocking socket, no event loop): p50 {floor['p50']:.2f} ms, "
          f"p99 {floor['p99']:.2f} ms\n")
    results: dict[tuple[int, str], list[dict]] = {(n, v): [] for n in levels for v in variants}
    for i in range(args.repeat):
        for n in levels:
            for v in variants:
                f = run_once(v, n, waves=args.waves, loop=args.loop, tokens=args.tokens)
                results[(n, v)].append(f)
                print(f"  run {i + 1} {v:>11} {n:>4} streams: TTFT err p50 {f['ttft']['p50']:.2f} p99 "
                      f"{f['ttft']['p99']:.2f} ms, chunk err p99 {f['chunk']['p99']:.2f} ms, client "
                      f"{f['client_cores']:.2f} cores, wall {f['wall_s']:.1f} s"
                      f"{', TIMED OUT' if f['timed_out'] else ''}{', %d failed' % f['bad'] if f['bad'] else ''}",
                      flush=True)
    ideal_s = args.waves * (PREFILL_S + (args.tokens - 1) * STEP_S)
    print(f"\nMedian of {args.repeat} runs; errors in ms (client stamp - server write); wall vs ideal "
          f"{ideal_s:.1f} s\n")
    rows = []
    for (n, v), runs in results.items():
        m = lambda key, stat: median([r[key][stat] for r in runs])  # noqa: E731
        rows.append([n, v, m("ttft", "p50"), m("ttft", "p99"), m("chunk", "p50"), m("chunk", "p99"),
                     m("chunk", "max"), median([r["in_flight"] for r in runs]),
                     median([r["client_cores"] for r in runs]), median([r["server_cores"] for r in runs]),
                     median([r["wall_s"] for r in runs]), sum(r["bad"] for r in runs)])
    print(table(["streams", "library", "TTFT p50", "TTFT p99", "chunk p50", "chunk p99", "chunk max",
                 "in flight", "client cores", "server cores", "wall s", "failed"], rows))


if __name__ == "__main__":
    main()

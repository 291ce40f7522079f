"""``proxy_overhead.py``'s in-process costs: the proxy's measurement per chunk, its start work per
request beyond a plain pass-through's, and ``--prompt-hashes`` per request (CPU time, no servers)."""

from __future__ import annotations

import time

import numpy as np
import orjson

from tokenpace.record import RequestRecord


def measuring_cost(tokens: int = 64, streams: int = 2000) -> str:
    """The proxy's measurement alone, in-process: a stream's reads (one SSE event each, as the
    built-in server sends them) through the relay's batched parse, stamping and record finishing,
    CPU time per chunk; the rest of the relay's CPU is aiohttp's and the kernel's."""
    from tokenpace.client.progress import Progress, finish_record
    from tokenpace.client.responses import stream_ended
    from tokenpace.client.sse import SSEParser
    from tokenpace.proxy.relay import PARSE_BATCH, _measure

    base = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 1, "model": "tokenpace-sim"}
    events = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
    events += [{**base, "choices": [{"index": 0, "delta": {"content": f" tok{i}"}, "finish_reason": None}]}
               for i in range(tokens)]
    events.append({**base, "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": tokens,
                                                    "total_tokens": tokens + 9}})
    reads = [b"data: " + orjson.dumps(e) + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]
    start = time.process_time_ns()
    for _ in range(streams):
        record, progress, parser = RequestRecord(request_id="x", index=0), Progress(streaming=True), SSEParser(strict=True)
        pending, measuring = [], True
        for data in reads:
            now = time.monotonic_ns()
            if measuring:
                pending.append((now, data))
                if len(pending) >= PARSE_BATCH:
                    measuring = _measure(pending, parser, record, progress)
        if measuring and pending:
            measuring = _measure(pending, parser, record, progress)
        if measuring:
            stream_ended(parser, record, progress, time.monotonic_ns())
        finish_record(record, progress)
    per_chunk = (time.process_time_ns() - start) / (streams * len(reads)) / 1e3
    assert record.output_tokens == tokens and progress.saw_done
    return f"{per_chunk:.1f} µs a chunk"


def start_cost(requests: int = 20_000) -> str:
    """What the proxy does at a request's start beyond what the pass-through does (both copy the
    request's and the response's headers), in-process CPU per request: the request id, the record,
    the body parsed for its fields, the key to mask, the Progress, the timing and the stream's
    parser; the rest of a start is aiohttp's (server and client), the same in both relays."""
    from multidict import CIMultiDict

    from tokenpace.client.progress import Progress
    from tokenpace.proxy.relay import Timing, Unparsed, _bearer, _read_request, forward_headers, response_headers

    body = orjson.dumps({"model": "tokenpace-sim", "messages": [{"role": "user", "content": "hello " * 8}],
                         "max_tokens": 64, "stream": True, "stream_options": {"include_usage": True}})
    incoming = CIMultiDict({"Host": "127.0.0.1:9000", "Content-Type": "application/json",
                            "Content-Length": str(len(body)), "X-Request-ID": "r-1", "Authorization": "Bearer k"})
    upstream = CIMultiDict({"Content-Type": "text/event-stream", "Transfer-Encoding": "chunked",
                            "X-Request-ID": "r-1", "Date": "Tue, 24 Nov 2026 22:00:00 GMT", "Server": "x"})
    drop = {"host", "content-length", "transfer-encoding", "connection", "accept-encoding"}

    def plain() -> None:  # the pass-through's own start work
        {k: v for k, v in incoming.items() if k.lower() not in drop}
        {k: v for k, v in upstream.items() if k.lower() not in drop | {"content-encoding"}}

    def ours() -> None:
        timing = Timing(time.monotonic_ns())
        headers = forward_headers(incoming)
        request_id = incoming.get("X-Request-ID")
        headers.setdefault("X-Request-ID", request_id)
        record = RequestRecord(request_id=request_id, index=0, api="chat", sent_ns=timing.received_ns)
        _read_request(record, body)
        secret = _bearer(incoming.get("Authorization"))
        Progress(streaming=record.stream, secrets=(secret,) if secret else ())
        response_headers(upstream)
        Unparsed()

    out = []
    for label, fn in (("pass-through", plain), ("tokenpace proxy", ours)):
        start = time.process_time_ns()
        for _ in range(requests):
            fn()
        out.append(f"{label} {(time.process_time_ns() - start) / requests / 1e3:.1f} µs")
    return ", ".join(out)


def hashing_cost(words: int, runs: int = 200) -> str:
    """What ``--prompt-hashes`` costs the proxy per request (done after the answer is relayed): a
    chat body of ``words`` words, a fresh user turn each time, hashed by the proxy's PromptHasher."""
    from tokenpace.advise.hashchain import PromptHasher

    hasher = PromptHasher(b"salt")
    system = " ".join(f"w{i % 997}" for i in range(words))
    times = []
    for i in range(runs):
        body = {"model": "m", "messages": [{"role": "system", "content": system},
                                            {"role": "user", "content": f"question {i} " * 10}]}
        start = time.thread_time_ns()
        hasher(body)
        times.append(time.thread_time_ns() - start)
    p50, p99 = np.percentile(times, [50, 99]) / 1e3
    return f"{words:,} words: CPU p50 {p50:.0f} µs, p99 {p99:.0f} µs ({p50 / (words / 16):.2f} µs a block)"

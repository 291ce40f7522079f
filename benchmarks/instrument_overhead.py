"""What ``tokenpace.instrument`` adds to the official ``openai`` SDK: per chunk and per request.

Two measurements, both against the bare SDK client in the same run:

1. Whole calls, bare vs instrumented, alternating, through the SDK with an in-memory transport
   (``httpx.MockTransport`` serving a canned SSE body): no network, so the difference is the
   wrapper's. Per chunk: (median instrumented - median bare) / chunks, for long streams. Per request:
   percentiles of one-token streams and non-streamed calls, instrumented minus bare.
2. The wrapper's own code timed alone, call by call (``perf_counter_ns`` around it): the per-chunk
   path (classify the SDK object, stamp) and the per-request path (start a record, finish it, hand
   it to the observers), with no observer, with a records list, and with the Prometheus exporter.

    .venv/bin/python benchmarks/instrument_overhead.py
    .venv/bin/python benchmarks/instrument_overhead.py --chunks 500 --calls 3000
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

try:  # the HTTP library the installed SDK is built on
    import httpx2 as httpx  # noqa: E402
except ImportError:
    import httpx  # noqa: E402
import numpy as np  # noqa: E402
import openai  # noqa: E402
import orjson  # noqa: E402
from openai.types.chat import ChatCompletionChunk  # noqa: E402

import tokenpace  # noqa: E402
from tokenpace.client.chunk_objects import classify_chunk_object  # noqa: E402
from tokenpace.instrumentation import PrometheusExporter  # noqa: E402
from tokenpace.instrumentation.call import RecordFactory  # noqa: E402
from tokenpace.metrics import parse_slo  # noqa: E402

MODEL = "bench-model"


def sse_body(chunks: int, usage: bool) -> bytes:
    base = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": MODEL}
    lines = [orjson.dumps({**base, "choices": [{"index": 0, "delta": {"role": "assistant"}}]})]
    lines += [orjson.dumps({**base, "choices": [{"index": 0, "delta": {"content": " tok"}}]}) for _ in range(chunks)]
    lines.append(orjson.dumps({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}))
    if usage:
        lines.append(orjson.dumps({**base, "choices": [], "usage": {
            "prompt_tokens": 10, "completion_tokens": chunks, "total_tokens": 10 + chunks}}))
    return b"".join(b"data: " + line + b"\n\n" for line in lines) + b"data: [DONE]\n\n"


def whole_body() -> bytes:
    return orjson.dumps({"id": "c1", "object": "chat.completion", "created": 1, "model": MODEL,
                         "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}],
                         "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}})


def mock_client(chunks: int) -> openai.OpenAI:
    def handler(request: httpx.Request) -> httpx.Response:
        body = orjson.loads(request.content)
        if not body.get("stream"):
            return httpx.Response(200, content=whole_body(), headers={"content-type": "application/json"})
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return httpx.Response(200, content=sse_body(chunks, usage), headers={"content-type": "text/event-stream"})

    return openai.OpenAI(base_url="http://mock/v1", api_key="k", max_retries=0,
                         http_client=httpx.Client(transport=httpx.MockTransport(handler)))


def call_ns(client, stream: bool) -> int:
    messages = [{"role": "user", "content": "hi"}]
    start = time.perf_counter_ns()
    if stream:
        # Both ask for usage, so the bare and instrumented calls get the same bytes.
        for _ in client.chat.completions.create(model=MODEL, messages=messages, stream=True,
                                                stream_options={"include_usage": True}):
            pass
    else:
        client.chat.completions.create(model=MODEL, messages=messages)
    return time.perf_counter_ns() - start


def paired(chunks: int, calls: int, stream: bool) -> tuple[np.ndarray, np.ndarray]:
    bare = mock_client(chunks)
    records: list = []
    inst = tokenpace.instrument(mock_client(chunks), records=records, prometheus=False)
    for _ in range(20):  # warm up both
        call_ns(bare, stream), call_ns(inst, stream)
    bare_ns, inst_ns = [], []
    gc.collect()
    for _ in range(calls):
        bare_ns.append(call_ns(bare, stream))
        inst_ns.append(call_ns(inst, stream))
        records.clear()
    return np.array(bare_ns), np.array(inst_ns)


def wrapper_chunk_ns(n: int, clock=time.perf_counter_ns) -> np.ndarray:
    chunk = ChatCompletionChunk.model_validate({"id": "c", "object": "chat.completion.chunk", "created": 1,
                                                "model": MODEL, "choices": [{"index": 0, "delta": {"content": " tok"}}]})
    factory = RecordFactory(())
    out = np.empty(n, dtype=np.int64)
    recorder = factory.start("chat", True)
    perf = clock
    for i in range(n):
        if i % 1000 == 0:
            recorder = factory.start("chat", True)  # a fresh record every 1000 chunks
        start = perf()
        recorder.chunk(classify_chunk_object(chunk), time.monotonic_ns())
        out[i] = perf() - start
    return out


def wrapper_request_ns(n: int, observers: tuple, clock=time.perf_counter_ns) -> np.ndarray:
    chunk = ChatCompletionChunk.model_validate({"id": "c", "object": "chat.completion.chunk", "created": 1,
                                                "model": MODEL, "choices": [{"index": 0, "delta": {"content": " tok"}}]})
    info = classify_chunk_object(chunk)
    factory = RecordFactory(observers)
    out = np.empty(n, dtype=np.int64)
    perf = clock
    for i in range(n):
        start = perf()
        recorder = factory.start("chat", True, 16, MODEL)
        t0 = perf()
        for _ in range(16):  # the chunks are not timed here: the per-chunk figure covers them
            recorder.chunk(info, time.monotonic_ns())
        t1 = perf()
        recorder.done(time.monotonic_ns())
        recorder.finish()
        out[i] = perf() - start - (t1 - t0)
    return out


def pct(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=200, help="chunks in a long stream")
    parser.add_argument("--calls", type=int, default=1500, help="calls per paired comparison")
    args = parser.parse_args()
    print(f"reproduce: python benchmarks/instrument_overhead.py --chunks {args.chunks} --calls {args.calls}")
    print(f"load average at start: {os.getloadavg()[0]:.2f}; openai {openai.__version__}; "
          f"python {sys.version.split()[0]}")

    print("\n1. whole calls through the SDK (in-memory transport), bare vs instrumented, alternating")
    bare, inst = paired(args.chunks, max(200, args.calls // 5), stream=True)
    per_chunk = (statistics.median(inst) - statistics.median(bare)) / (args.chunks + 2)
    print(f"  {args.chunks}-token stream: median bare {statistics.median(bare) / 1e3:,.0f} µs, instrumented "
          f"{statistics.median(inst) / 1e3:,.0f} µs (x{statistics.median(inst) / statistics.median(bare):.3f}); "
          f"added per chunk {per_chunk / 1e3:.2f} µs")
    for label, stream, chunks in (("1-token stream", True, 1), ("not streamed", False, 1)):
        bare, inst = paired(chunks, args.calls, stream=stream)
        print(f"  {label}: bare p50 {pct(bare, 50) / 1e3:.1f} / p99 {pct(bare, 99) / 1e3:.1f} µs; instrumented "
              f"p50 {pct(inst, 50) / 1e3:.1f} / p99 {pct(inst, 99) / 1e3:.1f} µs; added p50 "
              f"{(pct(inst, 50) - pct(bare, 50)) / 1e3:.1f} µs, p99 {(pct(inst, 99) - pct(bare, 99)) / 1e3:.1f} µs")

    print("\n2. the wrapper's own code, timed call by call: wall clock (includes the OS taking the CPU away "
          "on a busy machine), and the thread's CPU time (excludes it)")
    for clock_name, clock in (("wall", time.perf_counter_ns), ("CPU", time.thread_time_ns)):
        chunk_ns = wrapper_chunk_ns(200_000, clock)
        print(f"  [{clock_name}] per chunk (classify + stamp): p50 {pct(chunk_ns, 50) / 1e3:.2f} µs, "
              f"p99 {pct(chunk_ns, 99) / 1e3:.2f} µs")
        records: list = []
        exporter = PrometheusExporter(parse_slo("chat"))
        for label, observers in (("no observer", ()), ("records list", (records.append,)),
                                 ("records list + Prometheus (16-token stream)", (records.append, exporter))):
            request_ns = wrapper_request_ns(20_000, observers, clock)
            records.clear()
            print(f"  [{clock_name}] per request, {label}: p50 {pct(request_ns, 50) / 1e3:.1f} µs, "
                  f"p99 {pct(request_ns, 99) / 1e3:.1f} µs")

if __name__ == "__main__":
    main()

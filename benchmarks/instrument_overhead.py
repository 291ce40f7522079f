"""What ``tokenpace.instrument`` adds to the official ``openai`` SDK: per chunk and per request.

Two measurements, both against the bare SDK client in the same run:

1. Whole calls, bare vs instrumented, alternating, through the SDK with an in-memory transport
   (``httpx.MockTransport`` serving a canned SSE body): no network, so the difference is the
   wrapper's. Per chunk: (median instrumented - median bare) / chunks, for long streams. Per request:
   percentiles of one-token streams and non-streamed calls, instrumented minus bare.
2. The wrapper's own code, call by call (``perf_counter_ns`` around it), against the bare path in
   the same run: one ``next()`` on a stream of SDK objects (classify, stamp), and a streamed call's
   ``create()`` plus its last ``next()`` (start a record, ask for usage, wrap the stream; finish the
   record, hand it to the observers: none, a records list, the Prometheus exporter). Each figure is
   given over all calls and over the calls the OS did not preempt (the thread's involuntary context
   switches, read around each call): on a shared, loaded machine the p99 of all calls measures the
   scheduler, the other the code. The clients' kept records are emptied after each call (untimed),
   so that no client's records lengthen the garbage collector's passes over the others' calls; the
   passes counted during the timing, and what one pass costs in this process, are printed after.
   Per chunk, the added p99 is also given per sub-run (10 consecutive sub-runs of the 200,000
   calls, each with both paths' alternating blocks) and their median: the same p99 definition,
   taken ten times, so that a burst of the machine's noise moves one sub-run and not the figure.

    .venv/bin/python benchmarks/instrument_overhead.py
    .venv/bin/python benchmarks/instrument_overhead.py --chunks 500 --calls 3000
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
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
from tokenpace.instrumentation import PrometheusExporter  # noqa: E402
from tokenpace.instrumentation.replay import ListStream  # noqa: E402
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


def sdk_chunks(n: int, usage: bool = True) -> list:
    """A stream's SDK objects, as the SDK hands them over: role, n text chunks, finish, usage."""
    return [ChatCompletionChunk.model_validate(orjson.loads(line[6:])) for line in
            sse_body(n, usage).split(b"\n\n") if line.startswith(b"data: {")]


class FakeResource:
    def __init__(self, items: list) -> None:
        self.items = items

    def create(self, **kwargs):
        return ListStream(self.items)


class FakeClient:
    """Just enough of ``openai.OpenAI`` for ``instrument``: ``chat.completions`` and ``completions``."""

    def __init__(self, items: list) -> None:
        self.completions = FakeResource(items)
        self.chat = type("Chat", (), {"completions": FakeResource(items)})()


def timer_ns(n: int, clock=time.perf_counter_ns) -> np.ndarray:
    """The clock's own cost: two reads around nothing."""
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        start = clock()
        out[i] = clock() - start
    return out


def next_ns(n: int, clock=time.perf_counter_ns) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One ``next()`` on a stream, call by call: a bare iterator's over SDK objects, and the
    instrumented stream's (classify, stamp, check for the injected usage chunk) over the same
    objects, in alternating blocks of 1000 (so that both see the same machine). Third: the calls at
    the positions in a stream where a list appended once a chunk is reallocated (Python grows a list
    in steps: ~28 of 1,000 appends), where the record's two per-token lists grew before the stream
    wrapper wrote its stamps into slabs made once (``instrumentation/slabs.py``): the same calls,
    timed, say what the growth cost and whether it is gone."""
    from tokenpace.instrumentation.call import RecordFactory
    from tokenpace.instrumentation.streams import InstrumentedStream

    chunks = sdk_chunks(1000, usage=False)[1:-1]  # text chunks only: the per-chunk path
    factory = RecordFactory(())
    out = (np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64))
    appended: list[int] = []
    sizes = [sys.getsizeof(appended)]
    for _ in chunks:
        appended.append(0)
        sizes.append(sys.getsizeof(appended))
    grows_at = np.diff(sizes) != 0  # by position in a stream
    grows_at[0] = False  # a stream's first chunk takes the general path (its first stamps): apart
    for block in range(0, n, 1000):
        for instrumented, times in enumerate(out):
            stream = InstrumentedStream(ListStream(chunks), factory.start("chat", True)) if instrumented else iter(chunks)
            step = stream.__next__
            for i in range(block, min(block + 1000, n)):
                switches = involuntary_switches()
                start = clock()
                step()
                elapsed = clock() - start
                times[i] = -elapsed if involuntary_switches() != switches else elapsed
    return out[0], out[1], grows_at[np.arange(n) % len(chunks)], np.arange(n) % len(chunks) == 0


def next_cpu_ns(n: int, instrumented: bool) -> float:
    """The same, as the process's CPU time over n calls / n (no per-call clock to pay for)."""
    from tokenpace.instrumentation.call import RecordFactory
    from tokenpace.instrumentation.streams import InstrumentedStream

    chunks = sdk_chunks(1000, usage=False)[1:-1]
    factory = RecordFactory(())
    streams = [InstrumentedStream(ListStream(chunks), factory.start("chat", True)) if instrumented
               else iter(chunks) for _ in range(n // 1000)]
    start = time.process_time_ns()
    for stream in streams:
        for _ in stream:
            pass
    return (time.process_time_ns() - start) / (len(streams) * 1000)


def request_ns(n: int, clients: list, kept: list[list], clock=time.perf_counter_ns, tokens: int = 16) -> list[np.ndarray]:
    """A streamed call's own cost, call by call, each client in turn: ``create()`` (the
    instrumented one starts a record, asks for usage, adds X-Request-ID, wraps the stream) plus the
    last ``next()`` (it finishes the record and hands it to the observers); the chunks between are
    not timed here. ``kept``: the record lists the clients append to, emptied after each call
    (untimed), so that no client's records pile up and lengthen the garbage collector's passes over
    the calls of the others: each row measures only its own client."""
    messages = [{"role": "user", "content": "hi"}]
    creates = [client.chat.completions.create for client in clients]
    out = [np.empty(n, dtype=np.int64) for _ in clients]
    switches = involuntary_switches()
    for i in range(n):
        for create, times in zip(creates, out):
            t0 = clock()
            stream = create(model=MODEL, messages=messages, stream=True, max_tokens=tokens)
            t1 = clock()
            step = iter(stream).__next__
            for _ in range(tokens + 2):  # role, text, finish (a usage chunk, hidden when injected, is the last)
                step()
            t2 = clock()
            try:
                step()
                step()
            except StopIteration:
                pass
            t3 = clock()
            preempted = involuntary_switches() != switches
            times[i] = -((t1 - t0) + (t3 - t2)) if preempted else (t1 - t0) + (t3 - t2)
            for records in kept:
                records.clear()
            switches = involuntary_switches()
    return out


def pass_ns(generation: int, runs: int = 5) -> float:
    """The median time of one garbage-collector pass over ``generation`` (0: young, 2: everything)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        gc.collect(generation)
        times.append(time.perf_counter_ns() - start)
    return statistics.median(times)


def involuntary_switches() -> int:
    """Times this thread was taken off the CPU against its will (a loaded machine's preemption)."""
    return resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw


def pct(values: np.ndarray, q: float) -> float:
    """Percentile of all calls (a call the OS preempted is stored negated, see ``calm``)."""
    return float(np.percentile(np.abs(values), q))


def calm(values: np.ndarray) -> np.ndarray:
    """The calls during which the OS did not take the CPU away (stored >= 0): the code's own cost,
    whatever the machine's load."""
    return values[values >= 0]


def subrun_added_p99(bare: np.ndarray, inst: np.ndarray, parts: int = 10) -> np.ndarray:
    """The added p99 (instrumented p99 - bare p99, calls not preempted) of each of ``parts``
    consecutive sub-runs, each holding alternating blocks of both paths: the same definition as the
    whole run's, taken ``parts`` times, so that one burst of the machine's noise moves one sub-run
    and not the median."""
    return np.array([pct(calm(i), 99) - pct(calm(b), 99)
                     for b, i in zip(np.array_split(bare, parts), np.array_split(inst, parts))])


def line(label: str, bare: np.ndarray, inst: np.ndarray, unit: float = 1e3, digits: int = 2) -> str:
    """bare and instrumented p50/p99, and instrumented - bare, over all calls and over calm calls."""
    parts = []
    for name, b, i in (("all calls", bare, inst), ("calls not preempted", calm(bare), calm(inst))):
        parts.append(f"{name}: bare p50 {pct(b, 50) / unit:.{digits}f} / p99 {pct(b, 99) / unit:.{digits}f}, "
                     f"instrumented p50 {pct(i, 50) / unit:.{digits}f} / p99 {pct(i, 99) / unit:.{digits}f}, "
                     f"ADDED p50 {(pct(i, 50) - pct(b, 50)) / unit:.{digits}f} / p99 {(pct(i, 99) - pct(b, 99)) / unit:.{digits}f} µs")
    share = 1 - len(calm(inst)) / len(inst)
    return f"  {label}\n    {parts[0]}\n    {parts[1]} ({share:.2%} of instrumented calls preempted)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=200, help="chunks in a long stream")
    parser.add_argument("--calls", type=int, default=1500, help="calls per paired comparison")
    parser.add_argument("--requests", type=int, default=20_000, help="calls per client in the per-request timing")
    parser.add_argument("--wrapper-only", action="store_true", help="skip the whole calls through the SDK (1.)")
    args = parser.parse_args()
    print(f"reproduce: python benchmarks/instrument_overhead.py --chunks {args.chunks} --calls {args.calls} "
          f"--requests {args.requests}" + (" --wrapper-only" if args.wrapper_only else ""))
    print(f"load average at start: {os.getloadavg()[0]:.2f}; openai {openai.__version__}; "
          f"python {sys.version.split()[0]}")

    if not args.wrapper_only:
        whole_calls(args)
    wrapper(args)


def whole_calls(args: argparse.Namespace) -> None:
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


def wrapper(args: argparse.Namespace) -> None:
    print("\n2. the wrapper's own code, timed call by call against the bare path in the same run; "
          "'added' = instrumented - bare at the same percentile")
    timer = timer_ns(200_000)
    print(f"  the clock itself (perf_counter_ns around nothing): p50 {pct(timer, 50):.0f} ns, "
          f"p99 {pct(timer, 99):.0f} ns (included in every per-call figure below, bare and instrumented)")
    bare, inst, grew, first = next_ns(200_000)
    print(line("per chunk, one next() on the stream:", bare, inst))
    subs = subrun_added_p99(bare, inst)
    print(f"    ADDED p99 per sub-run ({len(subs)} of {len(bare) // len(subs):,} calls each, calls not preempted): "
          f"MEDIAN {np.median(subs) / 1e3:.2f} µs, min {subs.min() / 1e3:.2f}, max {subs.max() / 1e3:.2f} "
          f"({', '.join(f'{v / 1e3:.2f}' for v in subs)})")
    rest = ~grew & ~first
    print(f"    of which the {grew.mean():.1%} of calls where a list appended once a chunk grows (the record's "
          f"per-token lists grew there before slabs): instrumented p50 {pct(inst[grew], 50) / 1e3:.2f} / p99 "
          f"{pct(inst[grew], 99) / 1e3:.2f} µs; each stream's first chunk ({first.mean():.1%}): p50 "
          f"{pct(inst[first], 50) / 1e3:.2f} / p99 {pct(inst[first], 99) / 1e3:.2f} µs; the other calls: p50 "
          f"{pct(inst[rest], 50) / 1e3:.2f} / p99 {pct(inst[rest], 99) / 1e3:.2f} µs")
    cpu_bare, cpu_inst = next_cpu_ns(200_000, False), next_cpu_ns(200_000, True)
    print(f"  per chunk, CPU time over 200,000 next() calls: bare {cpu_bare / 1e3:.3f} µs, instrumented "
          f"{cpu_inst / 1e3:.3f} µs; added {(cpu_inst - cpu_bare) / 1e3:.2f} µs a chunk (mean)")
    chunks16 = sdk_chunks(16)
    labels = ("no observer", "records list", "records list + Prometheus (16-token stream: ITL bucketed too)")
    kept: list[list] = [[], []]
    clients = [FakeClient(chunks16),
               tokenpace.instrument(FakeClient(chunks16), prometheus=False),
               tokenpace.instrument(FakeClient(chunks16), prometheus=False, records=kept[0]),
               tokenpace.instrument(FakeClient(chunks16), records=kept[1],
                                    prometheus=PrometheusExporter(parse_slo("chat")))]
    gc.collect()
    collections = sum(g["collections"] for g in gc.get_stats())
    times = request_ns(args.requests, clients, kept)
    collections = sum(g["collections"] for g in gc.get_stats()) - collections
    for label, inst in zip(labels, times[1:]):
        print(line(f"per request (create() + the last next()), {label}:", times[0], inst, digits=1))
    # What the collector contributes: CPython starts a young-generation pass after ~700 more
    # container objects were allocated than freed. A call whose record is dropped frees all it made,
    # so these calls start none; in a real process the passes come from what the process keeps, and
    # each lands on whichever call is running (instrumented or not) at the cost printed here.
    gc.disable()
    try:
        before = gc.get_count()[0]
        request_ns(1000, clients[1:2], kept)
        net = (gc.get_count()[0] - before) / 1000
    finally:
        gc.enable()
    young, full = pass_ns(0), pass_ns(2)
    print(f"  garbage collector: {collections} passes during the {args.requests * 4:,} calls above; objects it tracks "
          f"left behind per instrumented call, record dropped: {net:.2f}; one pass in this process now: young "
          f"generation {young / 1e3:.1f} µs, full {full / 1e3:,.0f} µs ({len(gc.get_objects()):,} objects tracked)")
    print(f"\ntargets: added per chunk <= 2 µs at p99 (read: the sub-runs' MEDIAN added p99 above; the whole run's "
          f"added p99 is printed too), per request <= 50 µs at p99; "
          f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

"""`run_bench`: one benchmark run, from a BenchConfig to a BenchResult saved on disk.

Order of work: resolve the target (the built-in server in its own process when no URL is given),
check it with one preflight call, drive the load, append each record to the JSONL as it completes,
then summarize the records and write the result file. Ctrl-C or SIGTERM stops sending; requests in
flight get the grace period; a second signal cancels them at once. Partial results are always saved.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tokenpace.client import OpenAIClient
from tokenpace.config import BenchConfig
from tokenpace.metrics import parse_slo, summarize
from tokenpace.record import RequestRecord
from tokenpace.runner.loadcheck import load_report
from tokenpace.runner.loadgen import NS, LoadGenerator, LoadSettings
from tokenpace.runner.paths import result_paths
from tokenpace.runner.preflight import preflight
from tokenpace.runner.progress import LiveProgress
from tokenpace.runner.sink import RecordSink
from tokenpace.workload import WorkloadSpec, parse_length, plan_requests


@dataclass
class BenchResult:
    config: BenchConfig
    target: dict[str, Any]
    records: list[RequestRecord]
    summary: dict[str, Any]
    load: dict[str, Any]
    result_path: Path
    records_path: Path
    interrupted: bool = False
    window_ns: tuple[int, int] | None = None
    started_utc: str | None = None
    preflight: dict[str, Any] | None = None  # the preflight request, reported apart


def run_bench(config: BenchConfig) -> BenchResult:
    """Run a benchmark to completion (blocking). Uses uvloop when it is installed."""
    return _run(run_bench_async(config))


async def run_bench_async(config: BenchConfig) -> BenchResult:
    config.validate()
    slo = parse_slo(config.slo) if config.slo else None
    workload = WorkloadSpec(parse_length(config.input_tokens, flag="--input-tokens"),
                            parse_length(config.output_tokens, flag="--output-tokens"),
                            seed=config.seed, rate=config.rate, arrival=config.arrival,
                            burstiness=config.burstiness)
    result_path, records_path = result_paths(config.out)
    started_utc = datetime.now(timezone.utc).isoformat(timespec="seconds")
    async with _target(config) as (url, builtin):
        client = OpenAIClient(url, config.model or "", api=config.api, stream=config.stream,
                              api_key=os.environ.get(config.api_key_env) or None,
                              ignore_eos=config.ignore_eos, extra_body=config.extra_body,
                              timeout_s=config.timeout_s,
                              connect_timeout_s=config.connect_timeout_s,
                              ttft_timeout_s=config.ttft_timeout_s,
                              idle_timeout_s=config.idle_timeout_s,
                              max_connections=(config.effective_concurrency() or 0) + 16)
        try:
            model, preflight_report = await preflight(
                client, config.model, url, api_key_env=config.api_key_env,
                api_key_set=bool(os.environ.get(config.api_key_env)))
            records, loadgen = await _drive(client, config, workload, records_path)
        finally:
            await client.close()
    window = _window(config, loadgen)
    summary = summarize(records, slo=slo, gpu_hour_usd=config.gpu_hour_usd, gpus=config.gpus,
                        window=window)
    load = load_report(records, config=config, cpu_s=loadgen.cpu_s, wall_s=loadgen.wall_s,
                       window=window)
    result = BenchResult(config=config, target={"url": url, "model": model, "builtin": builtin},
                         records=records, summary=summary, load=load, result_path=result_path,
                         records_path=records_path, interrupted=loadgen.interrupted,
                         window_ns=window, started_utc=started_utc,
                         preflight=preflight_report)
    from tokenpace.reports.result_file import write_result  # reports sit above the runner

    write_result(result)
    return result


@contextlib.asynccontextmanager
async def _target(config: BenchConfig) -> AsyncIterator[tuple[str, bool]]:
    if config.url is not None:
        yield config.url.rstrip("/"), False
        return
    from tokenpace.servers import BuiltinServerConfig, start_server_process

    # A separate process: the server's CPU work must not delay the client's timestamps.
    server = await asyncio.to_thread(start_server_process, BuiltinServerConfig(
        tokens_per_chunk=config.server_tokens_per_chunk, seed=config.seed))
    try:
        yield server.url, True
    finally:
        await asyncio.to_thread(server.stop)


async def _drive(client: OpenAIClient, config: BenchConfig, workload: WorkloadSpec,
                 records_path: Path) -> tuple[list[RequestRecord], LoadGenerator]:
    requests = config.effective_requests()
    warmup_n = config.warmup_requests
    settings = LoadSettings(
        concurrency=config.effective_concurrency(), rate=config.rate,
        total_requests=None if requests is None else requests + warmup_n,
        end_after_s=None if config.duration_s is None else config.warmup_s + config.duration_s,
        warmup_requests=warmup_n, warmup_s=config.warmup_s, grace_s=config.grace_s,
        retries=config.retries, retry_backoff_s=config.retry_backoff_s)
    records: list[RequestRecord] = []
    with RecordSink(records_path) as sink, LiveProgress(
            None if requests is None else requests + warmup_n, enabled=config.progress) as progress:

        def on_record(record: RequestRecord) -> None:
            sink.write(record)
            records.append(record)
            progress.add(record)

        loadgen = LoadGenerator(client.send, plan_requests(workload), settings, api=config.api,
                                stream=config.stream, on_record=on_record)
        with _signals(loadgen):
            await loadgen.run()
    records.sort(key=lambda r: r.index)
    return records, loadgen


def _window(config: BenchConfig, loadgen: LoadGenerator) -> tuple[int, int] | None:
    """Duration runs measure over [end of warmup, end of sending]; count runs use the default."""
    if config.duration_s is None or loadgen.start_ns is None:
        return None
    start = loadgen.start_ns + int(config.warmup_s * NS)
    end = min(start + int(config.duration_s * NS), loadgen.send_end_ns or start)
    return (start, end) if end > start else None


@contextlib.contextmanager
def _signals(loadgen: LoadGenerator):
    """First SIGINT/SIGTERM: stop sending (grace applies). Second: cancel in-flight requests."""
    loop = asyncio.get_running_loop()
    seen = {"n": 0}

    def handle() -> None:
        seen["n"] += 1
        loadgen.stop() if seen["n"] == 1 else loadgen.cancel_now()

    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, handle)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or Windows
            pass
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


def _run(coro):
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)

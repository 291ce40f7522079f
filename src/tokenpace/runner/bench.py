"""`run_bench`: one benchmark run, from a BenchConfig to a RunResult saved on disk.

Order of work: resolve the target (the built-in server in its own process when no URL is given),
check it with one preflight call, drive the load, append each record to the JSONL as it completes
and to the columnar parts (in batches, spilled to disk: ``results.spool``), so that memory does not
grow with the run; then summarize from the parts and write the result file. Ctrl-C or SIGTERM
stops sending; requests in flight get the grace period; a second signal cancels them at once.
Partial results are always saved (interrupts.py: what a signal does before and after the load).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import sys
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console

from tokenpace.client import OpenAIClient
from tokenpace.config import BenchConfig
from tokenpace.errors import NotSaved, RunInterrupted, UsageError
from tokenpace.metrics import SLO, Window, parse_slo, summarize
from tokenpace.record import RequestRecord
from tokenpace.results import RecordSink, RunResult, result_paths, write_result
from tokenpace.recordtable import RecordTable
from tokenpace.results.columnar import columns_path
from tokenpace.results.records import JournalRecords
from tokenpace.results.spool import RecordSpool
from tokenpace.runner.counting import request_count
from tokenpace.runner.warmup import issuing_s
from tokenpace.runner.interrupts import Interrupts
from tokenpace.runner.loadcheck import load_report
from tokenpace.runner.loadgen import LoadGenerator, LoadSettings
from tokenpace.runner.preflight import preflight
from tokenpace.runner.live_stats import LiveStats
from tokenpace.runner.progress import LiveProgress
from tokenpace.runner.steady import steady_window
from tokenpace.workload import (PlannedRequest, WorkloadSpec, conversations_for, plan_requests,
                                workload_from_config, workload_summary)


DEFAULT_SIM_MODEL, DEFAULT_SIM_GPU = "llama-3.1-8b", "h100-sxm"  # the built-in target's engine
PREBUILD_MAX = 20_000  # count-bounded runs up to this size get their prompts made ahead


BenchResult = RunResult  # the name before runs of every kind shared one type (kept for callers)


def run_bench(config: BenchConfig) -> RunResult:
    """Run a benchmark to completion (blocking). Uses uvloop when it is installed. Inside a running
    event loop (Jupyter, an async program) use ``await run_bench_async(config)``."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run(run_bench_async(config))
    raise UsageError("run_bench cannot block inside a running event loop (Jupyter, async code): "
                     "use `await run_bench_async(config)` there")


async def run_bench_async(config: BenchConfig, *, target: tuple[str, bool] | None = None,
                          progress_console: Console | None = None) -> RunResult:
    """``target``: an already started (url, builtin) to use instead of ``config.url`` (a sweep
    starts the built-in server once for all its steps). ``progress_console``: where the live view
    draws (default: stderr). A signal before any request was sent, or after the load but before
    the result was on disk, raises RunInterrupted (see interrupts.py)."""
    with Interrupts() as interrupts:
        try:
            result = await _bench(config, target, interrupts, progress_console)
        except asyncio.CancelledError:
            if not interrupts.cancelled:
                raise
            task = asyncio.current_task()
            if task is not None and hasattr(task, "uncancel"):  # Python 3.11+: the cancel is handled
                task.uncancel()
            raise RunInterrupted("interrupted before the first request was sent; "
                                 "no result was written") from None
        if interrupts.after_load:
            raise RunInterrupted(f"interrupted after the run ended; the result was saved whole: "
                                 f"{result.result_path}", result=result)
        return result


async def _bench(config: BenchConfig, target: tuple[str, bool] | None,
                 interrupts: Interrupts, progress_console: Console | None = None) -> RunResult:
    config.validate()
    slo = parse_slo(config.slo) if config.slo else None
    workload = workload_from_config(config)  # bad files and specs fail here, before any traffic
    request_count(config, workload)  # and a load the count cannot hold
    result_path, records_path = result_paths(config.out)
    started_utc = datetime.now(timezone.utc).isoformat(timespec="seconds")
    async with target_for(config, target) as (url, builtin):
        client = make_client(config, url, config.model or "", _connections(config, workload))
        try:
            model, preflight_report = await preflight(
                client, config.model, url, api_key_env=config.api_key_env,
                api_key_set=bool(os.environ.get(config.api_key_env)))
            watch = _engine_watch(config, url)
            async with watch or contextlib.nullcontext():
                recorder, loadgen = await _drive(client, config, workload, records_path,
                                                 interrupts, url=url, model=model, slo=slo,
                                                 watch=watch, progress_console=progress_console)
        finally:
            await client.close()
    sink = recorder.sink
    table = recorder.finish()  # the run's records from their columnar parts (chunks left on disk)
    records = recorder.journal()  # RunResult.records: read from the JSONL when asked, never held
    window = _window(config, loadgen, workload, table)
    summary = summarize(table, slo=slo, gpu_hour_usd=config.gpu_hour_usd, gpus=config.gpus,
                        window=window, token_prices=config.token_prices())
    load = load_report(table, config=config, mode=load_mode(workload), cpu_s=loadgen.cpu_s,
                       wall_s=loadgen.wall_s, window=window)
    extend = getattr(loadgen, "extend_load_report", None)  # worker processes or Ray actors
    if extend is not None:
        extend(load, records)
    result = RunResult(kind="bench", config=config,
                       target={"url": url, "model": model, "builtin": builtin},
                       records=records, summary=summary, load=load, result_path=result_path,
                       records_path=records_path, interrupted=loadgen.interrupted,
                       window_ns=window, started_utc=started_utc,
                       preflight=preflight_report, workload_info=workload_summary(workload),
                       engine_metrics=_engine_metrics(watch, records, loadgen, workload))
    try:
        write_result(result)
    except NotSaved as exc:
        raise NotSaved(f"{exc}; {_records_fate(sink, len(records))}", result=result) from None
    if sink.error is not None:
        raise NotSaved(f"{_records_fate(sink, len(records))}; the result file {result_path} has "
                       "the summary of all of them", result=result)
    return result


def make_client(config: BenchConfig, url: str, model: str, max_connections: int | None) -> OpenAIClient:
    """The client for ``config``'s target; each worker process makes its own."""
    return OpenAIClient(url, model, api=config.api, stream=config.stream,
                        api_key=os.environ.get(config.api_key_env) or None,
                        ignore_eos=config.ignore_eos, extra_body=config.extra_body,
                        timeout_s=config.timeout_s, connect_timeout_s=config.connect_timeout_s,
                        ttft_timeout_s=config.ttft_timeout_s, idle_timeout_s=config.idle_timeout_s,
                        cache_breakpoint=config.cache_breakpoint, max_connections=max_connections)


def _records_fate(sink: RecordSink, total: int) -> str:
    if sink.error is None:
        return f"the records are whole in {sink.path} (tokenpace report summarizes them)"
    return (f"cannot write {sink.path} ({sink.error.strerror or sink.error}): it holds the first "
            f"{sink.count} of {total} records, each line whole; sending stopped there")


@contextlib.asynccontextmanager
async def target_for(config: BenchConfig, given: tuple[str, bool] | None = None
                  ) -> AsyncIterator[tuple[str, bool]]:
    if given is not None:
        yield given
        return
    if config.url is not None:
        yield config.url.rstrip("/"), False
        return
    from tokenpace.servers import BuiltinServerConfig, start_server_process
    from tokenpace.simulator.config import SimConfig

    # A separate process: the server's CPU work must not delay the client's timestamps.
    # The engine simulator drives it: by default Llama-3.1-8B in bf16 on one H100 SXM with chunked
    # prefill, so the quick start shows a realistic engine (batching, queueing, KV cache).
    # --builtin-timing parametric keeps the earlier simple model (one fixed step time per request).
    # --cache-breakpoint measures a prompt cache: the simulated engine then has its prefix cache on.
    sim = None if config.builtin_timing == "parametric" else SimConfig(
        model=DEFAULT_SIM_MODEL, gpu=DEFAULT_SIM_GPU, prefix_caching=config.cache_breakpoint != "none")
    starting = asyncio.ensure_future(asyncio.to_thread(start_server_process, BuiltinServerConfig(
        model=DEFAULT_SIM_MODEL if sim else "tokenpace-sim", sim=sim,
        tokens_per_chunk=config.server_tokens_per_chunk, seed=config.seed,
        timings=config.scrape_metrics)))  # llama.cpp-style per-request timings, to compare with
    try:
        server = await asyncio.shield(starting)
    except asyncio.CancelledError:  # a signal during the start: let it finish, then stop it
        with contextlib.suppress(Exception):
            server = await starting
            await asyncio.to_thread(server.stop)
        raise
    try:
        yield server.url, True
    finally:
        await asyncio.to_thread(server.stop)


def load_mode(workload: WorkloadSpec) -> str:
    if workload.conversations is not None:
        return "conversations"
    if workload.trace is not None:
        return "trace"
    return "open" if workload.open_loop else "closed"


def _connections(config: BenchConfig, workload: WorkloadSpec) -> int | None:
    """Connection pool size: never below the requests that can be in flight (a request waiting for
    a pooled connection after `sent` would be charged that wait); None: no limit."""
    if workload.conversations is not None:
        return workload.conversations.sessions + 16
    cap = config.concurrency if workload.open_loop else config.effective_concurrency()
    return None if cap is None else cap + 16


def load_settings(config: BenchConfig, workload: WorkloadSpec) -> LoadSettings:
    requests = request_count(config, workload)
    warmup_n = config.warmup_requests
    total = None if requests is None else requests + warmup_n
    return LoadSettings(
        concurrency=config.concurrency if workload.open_loop else config.effective_concurrency(),
        open_loop=workload.open_loop, total_requests=total,
        end_after_s=issuing_s(config),
        warmup_requests=warmup_n, warmup_s=config.warmup_s, ramp_s=config.ramp_s,
        grace_s=config.end_grace_s(by_count=False), end_grace_s=config.end_grace_s(by_count=True),
        retries=config.retries, retry_backoff_s=config.retry_backoff_s)


async def _drive(client: OpenAIClient, config: BenchConfig, workload: WorkloadSpec,
                 records_path: Path, interrupts: Interrupts, *, url: str, model: str,
                 slo: SLO | None = None, watch: Any = None, progress_console: Console | None = None
                 ) -> tuple[Recorder, Any]:
    if (config.workers or 1) > 1 or config.ray is not None:  # the load in worker processes or Ray actors
        from tokenpace.runner.workers import drive_workers

        return await drive_workers(config, workload, records_path, interrupts, url=url, model=model, slo=slo,
                                   watch=watch, progress_console=progress_console)
    settings = load_settings(config, workload)
    total = settings.total_requests
    conversations = conversations_for(workload) if workload.conversations is not None else None
    plan = None if conversations is not None else await _plan(workload, total)
    progress = live_progress(config, workload, total, slo=slo, watch=watch, console=progress_console)
    with Recorder(records_path, progress) as recorder:
        loadgen = LoadGenerator(client.send_deferred, plan, settings, api=config.api, stream=config.stream,
                                on_record=recorder, conversations=conversations)
        recorder.load = loadgen
        progress.attach(loadgen, settings.grace_s)
        with progress, interrupts.load(loadgen, on_stop=progress.stopping, on_cancel=progress.cancelling):
            await loadgen.run()
    return recorder, loadgen


class Recorder:
    """Where each ended request goes: the JSONL sink (crash-safe journal), the columnar spool the
    summary is made from (``results.spool``: batches spilled to disk, so nothing here grows with
    the run), and the live view. A records file that cannot be written (disk full) stops ``load``
    as a signal would: requests in flight still end as records, kept here (``unsaved``) so that
    ``RunResult.records`` has them too.

    Used as a context manager around the load: on leaving, the JSONL is closed; when the load
    raised, the unfinished columnar file is removed. After a load that ended, ``finish``."""

    def __init__(self, records_path: Path, progress: LiveProgress) -> None:
        self.progress = progress
        self.load: Any = None  # the load generator or worker pool, once it exists
        self.sink = RecordSink(records_path, on_error=lambda _exc: self.load.stop())
        self.spool = RecordSpool(columns_path(records_path))
        self.unsaved: list[RequestRecord] = []  # ended after the journal could no longer be written

    def __call__(self, record: RequestRecord) -> None:
        if not self.sink.write(record):
            self.unsaved.append(record)
        self.spool.add(record)
        self.progress.add(record)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        self.sink.close()
        if kind is not None:
            self.spool.abandon()

    def finish(self) -> RecordTable:
        """The columnar file finished (its manifest written); every record as one table, in the
        order they ended, its chunks read from the parts when asked."""
        return self.spool.close()

    def journal(self) -> JournalRecords:
        return JournalRecords(self.sink.path, self.sink.count, self.unsaved)


def live_progress(config: BenchConfig, workload: WorkloadSpec, total: int | None, *, slo: SLO | None,
                  watch: Any = None, console: Console | None = None) -> LiveProgress:
    """The live view of this run (tokenpace.runner.progress), in the mode the config asks."""
    mode = load_mode(workload)
    if mode == "closed":
        target = f"concurrency {config.effective_concurrency()}"
    elif mode == "open":
        cap = f", at most {config.concurrency} in flight" if config.concurrency else ""
        target = f"{config.rate:g} req/s {config.arrival}{cap}"
    else:
        target = mode
    duration = issuing_s(config)
    stats = LiveStats(total=total, duration_s=duration, target=target, judge_lag=mode != "closed", slo=slo)
    return LiveProgress(stats, mode=config.progress_mode if config.progress else "off", console=console,
                        step=config.progress_step, watch=watch)


async def _plan(workload: WorkloadSpec, total: int | None) -> Iterator[PlannedRequest]:
    """The request plan. Making a prompt costs up to milliseconds (long trace prompts, exact
    lengths from a tokenizer): for a count-bounded run they are all made before the clock starts
    (in a thread), so that making them never shows up as schedule lag. Duration-bounded and very
    large runs make them as they go."""
    plan = plan_requests(workload)
    if total is not None and total <= PREBUILD_MAX:
        return iter(await asyncio.to_thread(lambda: list(itertools.islice(plan, total))))
    return plan


def _window(config: BenchConfig, loadgen: LoadGenerator, workload: WorkloadSpec,
            records: RecordTable) -> Window | None:
    """The steady-state window (``runner.steady``); None: the default window."""
    if loadgen.start_ns is None:
        return None
    closed = load_mode(workload) == "closed"
    return steady_window(records, closed_loop=closed,
                         concurrency=config.effective_concurrency() if closed else None,
                         start_ns=loadgen.start_ns, warmup_s=config.warmup_s, ramp_s=config.ramp_s,
                         duration_s=config.duration_s, send_end_ns=loadgen.send_end_ns)


def _engine_watch(config: BenchConfig, url: str) -> Any:
    """--scrape-metrics: the poller around the load (tokenpace.observe), or None."""
    if not config.scrape_metrics:
        return None
    from tokenpace.observe import EngineWatch, metrics_url_for

    def warn(message: str) -> None:
        print(f"tokenpace: warning: {message}", file=sys.stderr, flush=True)

    return EngineWatch(config.metrics_url or metrics_url_for(url), config.scrape_interval_s, warn=warn)


def _engine_metrics(watch: Any, records: list[RequestRecord], loadgen: LoadGenerator,
                    workload: WorkloadSpec) -> dict[str, Any] | None:
    if watch is None:
        return None
    from tokenpace.observe import engine_metrics_section

    shared = workload.shared_prefix is not None or workload.conversations is not None
    return engine_metrics_section(watch, records, start_ns=loadgen.start_ns,
                                  prefix_shared=True if shared else None)


def _run(coro):
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)

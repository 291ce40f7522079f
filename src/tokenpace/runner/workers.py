"""The load in several workers: processes on this machine (`--workers N`) or Ray actors
(`--ray`, ray_backend.py), each with its own event loop and connection pool.

One seeded global plan, partitioned: every worker builds the same plan from the same config and
sends only its own requests, so 1, 2 or 8 workers send the identical request set (same indices,
prompts, lengths and, open loop, send times):

- closed loop at concurrency C: C is split as evenly as possible (C=5 over 2 workers: 3 and 2);
  request i goes to the owner of slot i mod C, so each worker gets requests in proportion to its
  streams;
- open loop (a rate or a trace): request i goes to worker i mod N, at its schedule's send time;
  a --concurrency cap is split like C;
- conversations: session s goes to worker s mod N, so a conversation keeps its order; worker k
  numbers its requests k, k+N, k+2N...

Records reach the parent as soon as each request ends (a queue whose feeder thread pickles them,
off the worker's event loop) and are merged exactly: the parent writes the one JSONL and sums
nothing but records. All workers start at one monotonic instant that the parent picks once all
have planned. Each request is announced as it begins; when a worker dies, every request it began
without a final record is recorded as an error of kind ``worker_died``, so sent = ok + error +
timeout + cancelled still holds across workers, and the run is marked invalid. Ctrl-C reaches the
parent alone (workers ignore SIGINT): it stops all workers (a second one cancels their requests).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from tokenpace.config import BenchConfig
from tokenpace.errors import TokenpaceError
from tokenpace.record import RequestRecord
from tokenpace.runner.interrupts import Interrupts
from tokenpace.runner.sink import RecordSink
from tokenpace.workload import PlannedRequest, WorkloadSpec

STREAMS_PER_WORKER = 128  # --workers auto: one process per this many streams (RESULTS section 1:
# one event loop is exact to ~1 ms p99 at 64 streams and 41 ms at 256)
POLL_S = 0.2  # how often the parent checks that every worker is alive
Emit = Callable[..., None]


class WorkerFailed(TokenpaceError):
    """A worker could not plan or start its load (the message says which and why)."""


# -- the partition -------------------------------------------------------------------------------


def shares(total: int, n: int) -> list[int]:
    """``total`` split over ``n`` as evenly as possible, the larger shares first."""
    return [total // n + (1 if k < total % n else 0) for k in range(n)]


@dataclass(frozen=True)
class Partition:
    """Which requests and sessions worker ``k`` of ``n`` owns."""

    k: int
    n: int
    slots: int | None = None  # closed loop: the concurrency whose slots are split

    def owns(self, index: int) -> bool:
        if self.slots is None:
            return index % self.n == self.k
        slot, start = index % self.slots, 0
        for k, share in enumerate(shares(self.slots, self.n)):
            if start <= slot < start + share:
                return k == self.k
            start += share
        return False

    def owns_session(self, position: int) -> bool:
        return position % self.n == self.k

    def share(self, value: int | None) -> int | None:
        return None if value is None else shares(value, self.n)[self.k]


def auto_workers(config: BenchConfig, cpus: int | None = None) -> int:
    """``--workers auto``: one process per STREAMS_PER_WORKER streams of the load (closed-loop
    concurrency, or the open-loop cap), at most one fewer than the CPUs (the parent and the
    operating system keep one), at least 1. An open loop without a cap is 1: its streams are
    not known ahead."""
    streams = config.effective_concurrency() if config.rate is None else config.concurrency
    if not streams:
        return 1
    cpus = cpus or os.cpu_count() or 1
    return max(1, min(cpus - 1, math.ceil(streams / STREAMS_PER_WORKER), streams))


def worker_count(config: BenchConfig) -> int:
    return auto_workers(config) if config.workers == 0 else (config.workers or 1)


# -- one worker, wherever it runs ----------------------------------------------------------------


@dataclass(frozen=True)
class WorkerJob:
    config: BenchConfig
    url: str
    model: str
    run_id: str
    worker: int
    workers: int


def launch_notice(record: RequestRecord) -> tuple:
    """What the parent keeps of a request as it begins, to record it if its worker dies."""
    return (record.index, record.request_id, record.warmup, record.requested_input_tokens,
            record.requested_output_tokens, record.prefix_group, record.session, record.turn,
            record.scheduled_ns, time.monotonic_ns())


class WorkerBody:
    """One worker's load: plans its share, then runs it from the common start. ``emit(kind,
    payload)`` hands messages to the parent: "launch", "record", "done"."""

    def __init__(self, job: WorkerJob, emit: Emit):
        self.job, self._emit = job, emit
        self.loadgen: Any = None
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def prepare(self) -> None:
        from tokenpace.runner.bench import PREBUILD_MAX, load_settings, make_client, _connections
        from tokenpace.runner.loadgen import LoadGenerator
        from tokenpace.workload import conversations_for, plan_requests, workload_from_config

        job, config = self.job, self.job.config
        self._loop = asyncio.get_running_loop()
        workload = workload_from_config(config)
        settings = load_settings(config, workload)
        closed = not workload.open_loop and workload.conversations is None
        part = Partition(job.worker, job.workers, settings.concurrency if closed else None)
        settings = replace(settings, concurrency=part.share(settings.concurrency))
        conversations = plan = None
        if workload.conversations is not None:
            conversations = [c for i, c in enumerate(conversations_for(workload)) if part.owns_session(i)]
        else:
            plan = _own_plan(plan_requests(workload), part, settings.total_requests)
            if settings.total_requests is not None and settings.total_requests <= PREBUILD_MAX:
                plan = iter(await asyncio.to_thread(list, plan))  # prompts made before the clock starts
        self._client = make_client(config, job.url, job.model, part.share(_connections(config, workload)))
        self.loadgen = LoadGenerator(
            self._client.send, plan, settings, api=config.api, stream=config.stream,
            on_record=lambda r: self._emit("record", r), conversations=conversations,
            on_launch=lambda r: self._emit("launch", launch_notice(r)), run_id=job.run_id,
            index_stride=(job.worker, job.workers) if conversations is not None else (0, 1))

    async def run(self, start_at_ns: int) -> None:
        try:
            await self.loadgen.run(start_at_ns)
        finally:
            await self._client.close()
        lg = self.loadgen
        self._emit("done", {"cpu_s": lg.cpu_s, "wall_s": lg.wall_s, "start_ns": lg.start_ns,
                            "send_end_ns": lg.send_end_ns, "interrupted": lg.interrupted,
                            "pid": os.getpid()})

    def stop(self) -> None:  # from any thread
        if self._loop is not None and self.loadgen is not None:
            self._loop.call_soon_threadsafe(self.loadgen.stop)

    def cancel_now(self) -> None:
        if self._loop is not None and self.loadgen is not None:
            self._loop.call_soon_threadsafe(self.loadgen.cancel_now)


def _own_plan(plan: Iterator[PlannedRequest], part: Partition, total: int | None
              ) -> Iterator[PlannedRequest]:
    for planned in plan:
        if total is not None and planned.index >= total:
            return
        if part.owns(planned.index):
            yield planned


def run_loop(coro) -> Any:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


# -- worker processes on this machine -------------------------------------------------------------


def _process_main(job: WorkerJob, queue: Any, control: Any) -> None:
    """A worker process (spawned). Ctrl-C goes to the whole process group: the parent handles it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def emit(kind: str, payload: Any = None) -> None:
        queue.put((job.worker, kind, payload))  # the queue's feeder thread pickles it

    async def main() -> None:
        body = WorkerBody(job, emit)
        await body.prepare()
        emit("ready")
        message = await asyncio.to_thread(_recv, control)
        if message[0] != "start":  # stopped before the start: nothing was sent
            emit("done", {"cpu_s": 0.0, "wall_s": 0.0, "interrupted": True, "pid": os.getpid()})
            return
        threading.Thread(target=_listen, args=(control, body), daemon=True).start()
        await body.run(message[1])

    try:
        run_loop(main())
    except BaseException as exc:  # noqa: BLE001 - the parent reports it on one line
        emit("failed", f"{type(exc).__name__}: {exc}"[:300])
    finally:
        queue.close()
        if _PARENT_GONE.is_set():  # nobody reads the queue: do not wait to flush it
            queue.cancel_join_thread()
        queue.join_thread()


_PARENT_GONE = threading.Event()


def _recv(control: Any) -> tuple:
    try:
        return control.recv()
    except (EOFError, OSError):  # the parent is gone: cancel everything and leave
        _PARENT_GONE.set()
        return ("cancel",)


def _listen(control: Any, body: WorkerBody) -> None:
    while True:
        message = _recv(control)
        if message[0] == "stop":
            body.stop()
        elif message[0] == "cancel":
            body.stop()
            body.cancel_now()
            return


class ProcessBackend:
    """Worker processes (multiprocessing, spawn: nothing of the parent's loop is inherited)."""

    name = "processes"
    start_delay_s = 0.2  # from "all planned" to the common start: time to hand out the start instant

    def __init__(self) -> None:
        import multiprocessing as mp

        self._ctx = mp.get_context("spawn")
        self._queue = self._ctx.Queue()
        self._procs: list[Any] = []
        self._controls: list[Any] = []
        self._reader: threading.Thread | None = None
        self.clocks: list[dict[str, Any]] | None = None  # one machine: one clock

    async def start(self, jobs: list[WorkerJob], deliver: Callable[[tuple], None]) -> None:
        for job in jobs:
            parent_end, child_end = self._ctx.Pipe()
            proc = self._ctx.Process(target=_process_main, args=(job, self._queue, child_end),
                                     name=f"tokenpace-worker-{job.worker}", daemon=True)
            proc.start()
            child_end.close()
            self._procs.append(proc)
            self._controls.append(parent_end)

        def read() -> None:
            while True:
                message = self._queue.get()
                deliver(message)
                if message is None:
                    return

        self._reader = threading.Thread(target=read, name="tokenpace-worker-records", daemon=True)
        self._reader.start()

    def local_start_ns(self, k: int, start_ns: int) -> int:
        return start_ns

    def send(self, k: int, *message: Any) -> None:
        if k >= len(self._controls):  # a signal before the workers were started
            return
        with contextlib.suppress(OSError, ValueError):  # a dead worker's pipe
            self._controls[k].send(message)

    def exit_code(self, k: int) -> int | None:
        return self._procs[k].exitcode

    def report_death(self, k: int, code: int | None) -> None:
        # Through the records' queue, so that it arrives after everything the worker had sent.
        self._queue.put((k, "died", code))

    def pid(self, k: int) -> int | None:
        return self._procs[k].pid

    def to_parent_clock(self, k: int, record: RequestRecord) -> RequestRecord:
        return record  # one machine: CLOCK_MONOTONIC is shared by every process

    async def close(self) -> None:
        self._queue.put(None)
        if self._reader is not None:
            await asyncio.to_thread(self._reader.join, 5.0)
        for k, proc in enumerate(self._procs):
            await asyncio.to_thread(proc.join, 5.0)
            if proc.is_alive():
                proc.kill()
                await asyncio.to_thread(proc.join, 5.0)
            self._controls[k].close()


# -- the parent -------------------------------------------------------------------------------------


class WorkerPool:
    """Runs the workers of one run and merges their records; stands where the single loop's
    LoadGenerator stands for the runner (stop, cancel_now, start_ns, cpu_s, wall_s...)."""

    def __init__(self, backend: Any, jobs: list[WorkerJob], on_record: Callable[[RequestRecord], None]):
        self._backend, self._jobs, self._on_record = backend, jobs, on_record
        self._messages: asyncio.Queue = asyncio.Queue()
        self._state = ["starting"] * len(jobs)
        self._open: dict[int, tuple[int, tuple]] = {}  # index -> (worker, launch notice)
        self._retried: dict[int, RequestRecord] = {}  # index -> its last retried attempt
        self._stats: list[dict[str, Any]] = [{} for _ in jobs]
        self._deaths: list[dict[str, Any]] = []
        self._failures: list[str] = []
        self._stopped = False
        self.start_ns: int | None = None
        self.send_end_ns: int | None = None
        self.interrupted = False
        self.cpu_s = 0.0
        self.wall_s = 0.0
        self.sent_count = 0  # for the live view, as LoadGenerator.sent_count

    def in_flight_records(self) -> list[RequestRecord]:
        """For the live view: one placeholder per request in flight (its chunks stay in the worker
        until it ends, so the view counts them as they end)."""
        return [RequestRecord(request_id="", index=index) for index in self._open]

    # stop() and cancel_now() are what Interrupts calls
    def stop(self, *, interrupted: bool = True) -> None:
        self.interrupted = self.interrupted or interrupted
        self._stopped = True  # a stop before the start: the workers are told "stop", not "start"
        for k in range(len(self._jobs)):
            self._backend.send(k, "stop")

    def cancel_now(self) -> None:
        self._stopped = True
        for k in range(len(self._jobs)):
            self._backend.send(k, "cancel")

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            await self._backend.start(self._jobs,
                                      lambda m: loop.call_soon_threadsafe(self._messages.put_nowait, m))
            await self._wait("ready", lambda s: s != "starting")
            self.start_ns = time.monotonic_ns() + int(self._backend.start_delay_s * 1e9)
            for k in range(len(self._jobs)):
                if self._stopped:
                    self._backend.send(k, "stop")
                else:
                    self._backend.send(k, "start", self._backend.local_start_ns(k, self.start_ns))
            await self._wait("done", lambda s: s in ("done", "died"))
        finally:
            if any(s not in ("done", "died") for s in self._state):  # an error in the parent
                self.cancel_now()
            await self._backend.close()
        self.send_end_ns = max((s["send_end_ns"] for s in self._stats if s.get("send_end_ns")),
                               default=self.start_ns)
        busiest = max((s for s in self._stats if s.get("wall_s")), default=None,
                      key=lambda s: s["cpu_s"] / s["wall_s"])
        self.cpu_s, self.wall_s = (busiest["cpu_s"], busiest["wall_s"]) if busiest else (0.0, 0.0)
        self.interrupted = self.interrupted or any(s.get("interrupted") for s in self._stats)

    async def _wait(self, phase: str, reached: Callable[[str], bool]) -> None:
        checked = time.monotonic()
        while not all(reached(s) or s == "died" for s in self._state):
            if time.monotonic() - checked >= POLL_S:  # also while other workers' records flow
                self._check_alive()
                checked = time.monotonic()
            try:
                message = await asyncio.wait_for(self._messages.get(), POLL_S)
            except asyncio.TimeoutError:
                continue
            if message is not None:
                self._handle(*message)
            if phase == "ready" and (self._failures or self._deaths):
                raise WorkerFailed("a worker could not start, nothing was sent: " + "; ".join(
                    self._failures or [f"worker {d['worker']} exited with code {d['exit_code']}"
                                       for d in self._deaths]))

    def _handle(self, k: int, kind: str, payload: Any) -> None:
        if kind == "record":
            record = self._backend.to_parent_clock(k, payload)
            if record.retried:
                self._retried[record.index] = record
            else:
                self._open.pop(record.index, None)
                self._retried.pop(record.index, None)
            self._on_record(record)
        elif kind == "launch":
            notice = self._backend.to_parent_clock(k, payload)
            if notice[0] not in self._open and notice[0] not in self._retried:
                self.sent_count += 1  # a request begun (a retry is the same request)
            self._open[notice[0]] = (k, notice)
        elif kind == "ready":
            self._state[k] = "ready"
        elif kind == "done":
            self._state[k] = "done"
            self._stats[k] = payload
        elif kind == "failed":
            self._failures.append(f"worker {k}: {payload}")
            self._died(k, None, payload)
        elif kind == "died":
            self._died(k, payload, None)

    def _check_alive(self) -> None:
        for k, state in enumerate(self._state):
            if state in ("done", "died", "dying"):
                continue
            code = self._backend.exit_code(k)
            if code is not None:
                self._state[k] = "dying"  # the "died" message follows the worker's last records
                self._backend.report_death(k, code)

    def _died(self, k: int, code: int | None, message: str | None) -> None:
        if self._state[k] in ("done", "died"):
            return
        self._state[k] = "died"
        now = time.monotonic_ns()
        why = message or f"exit code {code}"
        unfinished = [(index, notice) for index, (w, notice) in self._open.items() if w == k]
        for index, notice in unfinished:
            del self._open[index]
            self._on_record(_died_record(notice, self._jobs[k], self._retried.pop(index, None),
                                         now, f"worker {k} ended ({why}) before this request did"))
        self._deaths.append({"worker": k, "exit_code": code, "error": message,
                             "unfinished_requests": len(unfinished)})

    def extend_load_report(self, load: dict[str, Any], records: list[RequestRecord]) -> None:
        """Per-worker schedule lag and CPU, and deaths: the same checks as one loop's, per worker."""
        from tokenpace.runner.loadcheck import CPU_LIMIT, LAG_P99_LIMIT_MS

        n = len(self._jobs)
        lags = _lags_by_worker(records, self._jobs)
        rows = []
        for k in range(n):
            stats = self._stats[k]
            util = stats["cpu_s"] / stats["wall_s"] if stats.get("wall_s") else None
            lag = lags[k]
            row = {"worker": k, "backend": self._backend.name, "pid": stats.get("pid"),
                   "status": self._state[k], "measured_first_attempts": lag["n"],
                   "schedule_lag_ms": lag["ms"], "client_cpu_util": util}
            if self._backend.clocks is not None:
                row["clock"] = self._backend.clocks[k]
            rows.append(row)
            if load["mode"] != "closed" and lag["ms"] and lag["ms"]["p99"] > LAG_P99_LIMIT_MS:
                load["invalid_reasons"].append(
                    f"worker {k} fell behind: schedule lag p99 {lag['ms']['p99']:.1f} ms > {LAG_P99_LIMIT_MS:g} ms")
            if util is not None and util > CPU_LIMIT:
                load["invalid_reasons"].append(f"worker {k} CPU {util:.0%} of one core > {CPU_LIMIT:.0%}")
        for death in self._deaths:
            why = death["error"] or f"exit code {death['exit_code']}"
            load["invalid_reasons"].append(
                f"worker {death['worker']} died ({why}): "
                f"its {death['unfinished_requests']} unfinished requests are recorded as errors "
                "(worker_died) and it sent nothing more")
        load["workers"] = {"backend": self._backend.name, "count": n, "per_worker": rows,
                           "deaths": self._deaths,
                           "client_cpu_note": "client_cpu_util above is the busiest worker's"}
        load["valid"] = not load["invalid_reasons"]
        if load["invalid_reasons"] and not load.get("suggestion"):
            load["suggestion"] = ("a worker was lost or could not keep up: rerun, with more "
                                  "--workers or on less busy machines")


def _lags_by_worker(records: list[RequestRecord], jobs: list[WorkerJob]) -> list[dict[str, Any]]:
    """Schedule lag (sent - scheduled) of each worker's first attempts, by the partition."""
    n = len(jobs)
    config = jobs[0].config
    slots = None
    if config.rate is None and config.trace is None and config.conversations is None:
        slots = config.effective_concurrency()
    parts = [Partition(k, n, slots) for k in range(n)]
    lags: list[list[float]] = [[] for _ in range(n)]
    for r in records:
        if r.sent_ns is None or r.scheduled_ns is None or r.attempt != 1 or r.warmup:
            continue
        k = (r.index % n) if r.session is not None else next(p.k for p in parts if p.owns(r.index))
        lags[k].append((r.sent_ns - r.scheduled_ns) / 1e6)
    out = []
    for values in lags:
        if not values:
            out.append({"n": 0, "ms": None})
            continue
        p50, p99 = np.percentile(values, [50, 99])
        out.append({"n": len(values), "ms": {"p50": float(p50), "p99": float(p99), "max": float(max(values))}})
    return out


def _died_record(notice: tuple, job: WorkerJob, retried: RequestRecord | None, now_ns: int,
                 message: str) -> RequestRecord:
    (index, request_id, warmup, want_in, want_out, prefix_group, session, turn, scheduled_ns,
     launch_ns) = notice
    attempt = 1 if retried is None else retried.attempt + 1
    if attempt > 1:
        request_id = f"{request_id}.a{attempt}"
    config = job.config
    return RequestRecord(
        request_id=request_id, index=index, api=config.api, stream=config.stream, warmup=warmup,
        requested_input_tokens=want_in, requested_output_tokens=want_out, prefix_group=prefix_group,
        session=session, turn=turn, scheduled_ns=scheduled_ns, sent_ns=launch_ns, done_ns=now_ns,
        status="error", error_kind="worker_died", error_message=message[:300], attempt=attempt)


async def drive_workers(config: BenchConfig, workload: WorkloadSpec, records_path: Path,
                        interrupts: Interrupts, *, url: str, model: str, slo: Any = None, watch: Any = None,
                        progress_console: Any = None) -> tuple[list[RequestRecord], WorkerPool, RecordSink]:
    """The runner's load phase with workers: same records file, progress and signals as one loop."""
    from tokenpace.runner.bench import Recorder, live_progress, load_settings

    settings = load_settings(config, workload)
    total = settings.total_requests
    if config.ray is not None:
        from tokenpace.runner.ray_backend import RayBackend

        backend: Any = await RayBackend.connect(config)
        n = backend.actors
    else:
        backend, n = ProcessBackend(), worker_count(config)
    run_id = uuid.uuid4().hex[:12]
    jobs = [WorkerJob(config=config, url=url, model=model, run_id=run_id, worker=k, workers=n)
            for k in range(n)]
    progress = live_progress(config, workload, total, slo=slo, watch=watch, console=progress_console)
    recorder = Recorder(records_path, progress)
    with recorder.sink as sink:
        pool = recorder.load = WorkerPool(backend, jobs, recorder)
        progress.attach(pool, settings.grace_s)
        with progress, interrupts.load(pool, on_stop=progress.stopping, on_cancel=progress.cancelling):
            await pool.run()
    records = sorted(recorder.records, key=lambda r: (r.index, r.attempt))
    return records, pool, sink

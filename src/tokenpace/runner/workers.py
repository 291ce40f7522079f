"""The load in several workers: processes on this machine (`--workers N`) or Ray actors
(`--ray`, ray_backend.py), each with its own event loop and connection pool.

One seeded global plan, partitioned (partition.py): every worker builds the same plan from the same
config and sends only its own requests, so 1, 2 or 8 workers send the identical request set; worker
k of a conversation run numbers its requests k, k+N, k+2N... The parent's side is worker_pool.py.

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
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any


from tokenpace.config import BenchConfig
from tokenpace.record import RequestRecord
from tokenpace.runner.interrupts import Interrupts
from tokenpace.runner.partition import Partition, worker_count
from tokenpace.runner.worker_pool import WorkerPool
from tokenpace.workload import PlannedRequest, WorkloadSpec

if TYPE_CHECKING:  # the annotation only: bench imports this module
    from tokenpace.runner.bench import Recorder

Emit = Callable[..., None]


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
            self._client.send_deferred, plan, settings, api=config.api, stream=config.stream,
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


async def drive_workers(config: BenchConfig, workload: WorkloadSpec, records_path: Path,
                        interrupts: Interrupts, *, url: str, model: str, slo: Any = None, watch: Any = None,
                        progress_console: Any = None) -> tuple[Recorder, WorkerPool]:
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
    with Recorder(records_path, progress) as recorder:
        pool = recorder.load = WorkerPool(backend, jobs, recorder)
        progress.attach(pool, settings.grace_s)
        with progress, interrupts.load(pool, on_stop=progress.stopping, on_cancel=progress.cancelling):
            await pool.run()
    return recorder, pool

"""The parent's side of a run in workers (runner/workers.py): start them together, merge their
records exactly as they arrive, notice a worker that died (its begun requests become ``worker_died``
records) and report each worker's lag and CPU."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from tokenpace.errors import TokenpaceError
from tokenpace.record import RequestRecord
from tokenpace.runner.partition import Partition

if TYPE_CHECKING:
    from tokenpace.runner.workers import WorkerJob

POLL_S = 0.2  # how often the parent checks that every worker is alive


class WorkerFailed(TokenpaceError):
    """A worker could not plan or start its load (the message says which and why)."""


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

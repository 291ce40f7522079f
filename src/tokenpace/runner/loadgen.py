"""The load generator: closed loop (N workers), open loop (a schedule or a trace) or multi-turn
sessions (each turn after the previous reply and a think time), bounded by count or time.

It owns *when* requests go out and nothing else: the client stamps and fills each record, the sink
saves it, metrics come later from the records alone. Every request it starts ends as exactly one
record (ok, error, timeout or cancelled), which `on_record` receives soon after it completes (a
slice of ended records per loop turn, runner/loop_slices.py; a record's token counts are completed
in that slice when `send` returned a finisher, as the client's `send_deferred` does) and always
before `run()` returns. No automatic garbage collection runs meanwhile (runner/run_gc.py).

Ending: when the count is reached, the duration is over or `stop()` is called, no new request is
sent; requests in flight get `grace_s` to finish and are then cancelled (their partial tokens kept).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tokenpace.record import RequestRecord
from tokenpace.runner.loop_slices import LoopSlices
from tokenpace.runner.retry import retry_delay_s, should_retry
from tokenpace.runner.run_gc import quiet_gc
from tokenpace.runner.warmup import is_warmup
from tokenpace.workload import Conversation, PlannedRequest
from tokenpace.workload.plan import Prompt
from tokenpace.workload.ramp import client_start_s, ramped_offset_s

NS = 1_000_000_000
Finish = Callable[[], None]  # completes an ended record (OpenAIClient.send_deferred)
# Open-loop sends wake this early and then yield to the loop until the exact time: the event loop's
# timers round up to whole milliseconds, which alone would add up to 1 ms of schedule lag.
_EARLY_WAKE_S = 0.002


@dataclass
class LoadSettings:
    concurrency: int | None  # closed loop: workers; open loop: optional cap on requests in flight
    open_loop: bool  # False: closed loop (concurrency workers)
    total_requests: int | None  # warmup included; None: bounded by time only
    end_after_s: float | None  # from start, warmup included; None: bounded by count only
    warmup_requests: int = 0
    warmup_s: float = 0.0
    ramp_s: float = 0.0  # the load rises to its target over this long (tokenpace.workload.ramp)
    grace_s: float = 10.0  # after the duration or a stop() (signal)
    end_grace_s: float = 600.0  # after a count-bounded run has sent its last request
    retries: int = 0
    retry_backoff_s: float = 0.5


class LoadGenerator:
    def __init__(self, send: Callable[..., Awaitable[Finish | None]], plan: Iterator[PlannedRequest] | None,
                 settings: LoadSettings, *, api: str, stream: bool,
                 on_record: Callable[[RequestRecord], None],
                 conversations: list[Conversation] | None = None,
                 on_launch: Callable[[RequestRecord], None] | None = None,
                 run_id: str | None = None, index_stride: tuple[int, int] = (0, 1)):
        # on_launch: told of each request as it begins (worker processes report it to the parent,
        # which accounts for a request whose worker dies). run_id: shared by all of a run's
        # workers. index_stride (k, n): sessions number their requests k, k+n, k+2n... so that
        # worker k of n never reuses another worker's index.
        # async (record, prompt, extra_body) -> None or a function that completes the record's
        # token counts (the client's send_deferred), called in the slice that hands it over.
        self._send = send
        self._plan = plan if plan is not None else iter(())
        self._conversations = conversations  # multi-turn sessions instead of a flat plan
        self._sent_count = 0
        self._stopped_early = False
        self._s = settings
        self._api, self._stream = api, stream
        # Ended records go to on_record a slice per loop turn, and closed-loop sends are spread over
        # turns, so that a wave of requests ending together does not hold up chunk stamping.
        self._sink = on_record
        self._slices: LoopSlices[tuple[RequestRecord, Finish | None]] = LoopSlices(self._hand_over)
        self._on_launch = on_launch
        self._stride = index_stride
        self._stopping = asyncio.Event()
        self._tasks: set[asyncio.Task] = set()
        self._flying: dict[asyncio.Task, RequestRecord] = {}  # the attempt each task is on (live view)
        self.sent_count = 0  # requests started (a retry is the same request)
        self._run_id = run_id or uuid.uuid4().hex[:12]
        self.start_ns: int | None = None
        self.send_end_ns: int | None = None  # when sending stopped
        self.interrupted = False
        self.cpu_s = 0.0  # this process's CPU time during the run: the client's own cost
        self.wall_s = 0.0

    def in_flight_records(self) -> list[RequestRecord]:
        """The records of the requests in flight now (read by the live view, a few times a second)."""
        return list(self._flying.values())

    def stop(self, *, interrupted: bool = True) -> None:
        """Stop sending new requests (in flight ones get the grace period)."""
        self.interrupted = self.interrupted or interrupted
        self._stopped_early = True  # by time or signal, not by count: the short grace applies
        self._stopping.set()

    def cancel_now(self) -> None:
        """Cancel every request in flight at once (a second Ctrl-C)."""
        self._stopping.set()
        for task in list(self._tasks):
            task.cancel()

    async def run(self, start_at_ns: int | None = None) -> None:
        """``start_at_ns``: a monotonic time to start at (all workers of a run share one start)."""
        # A collection stops the loop, and every chunk arriving meanwhile is stamped late: none
        # runs on its own during the run (runner/run_gc.py).
        async with quiet_gc():
            await self._run(start_at_ns)

    async def _run(self, start_at_ns: int | None) -> None:
        if start_at_ns is not None:
            await self._sleep_until(asyncio.get_running_loop(), start_at_ns / NS)
        cpu0 = time.process_time()
        self.start_ns = start_at_ns if start_at_ns is not None else time.monotonic_ns()
        deadline = None
        if self._s.end_after_s is not None:
            deadline = asyncio.get_running_loop().call_later(
                self._s.end_after_s, lambda: self.stop(interrupted=False))
        try:
            if self._conversations is not None:
                await self._until_stopped(asyncio.gather(*map(self._session, self._conversations)))
            elif self._s.open_loop:
                await self._open_loop()
            else:
                workers = self._s.concurrency or 1
                await self._until_stopped(asyncio.gather(
                    *(self._worker(client_start_s(k, workers, self._s.ramp_s)) for k in range(workers))))
        finally:
            try:
                if deadline is not None:
                    deadline.cancel()
                self.send_end_ns = self.send_end_ns or time.monotonic_ns()
                await self._drain()
            finally:  # every record handed over, however the run ends (a cancelled drain too)
                self._slices.flush()
            self.cpu_s = time.process_time() - cpu0
            self.wall_s = (time.monotonic_ns() - self.start_ns) / NS

    # -- the two load shapes ------------------------------------------------------------------

    async def _until_stopped(self, workers: asyncio.Future) -> None:
        """Wait for the workers to end by count, or for time or stop() to end the run first; the
        requests in flight are then left to _drain and its grace period."""
        stopped = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({workers, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.send_end_ns = time.monotonic_ns()
            stopped.cancel()
            workers.cancel()
            try:
                await workers
            except asyncio.CancelledError:
                pass

    async def _worker(self, start_after_s: float = 0.0) -> None:
        if start_after_s > 0:  # --ramp: this client joins later
            await self._sleep_until(asyncio.get_running_loop(), self.start_ns / NS + start_after_s)
        first = True
        while not self._stopping.is_set():
            now = time.monotonic_ns()
            if not first:  # a worker's first request goes at once: at the start nothing is in flight to delay
                await self._slices.send_turn()  # waiting for a send slot counts as schedule lag
                if self._stopping.is_set():
                    return
            first = False
            planned = self._next()
            if planned is None:
                return
            # Shielded: cancelling the worker must not cancel its request, which drains instead.
            await asyncio.shield(self._start(planned, scheduled_ns=now))

    async def _open_loop(self) -> None:
        cap = asyncio.Semaphore(self._s.concurrency) if self._s.concurrency else None
        loop = asyncio.get_running_loop()
        start_s = self.start_ns / NS
        while not self._stopping.is_set():
            planned = self._next()
            if planned is None:
                break
            offset_s = ramped_offset_s(planned.offset_s, self._s.ramp_s)
            target_s = start_s + offset_s
            if self._s.end_after_s is not None and offset_s >= self._s.end_after_s:
                break
            await self._sleep_until(loop, target_s)
            if self._stopping.is_set():
                break
            if cap is not None:
                await cap.acquire()  # lag from the cap shows up as sent - scheduled
                if self._stopping.is_set():
                    cap.release()
                    break
            task = self._start(planned, scheduled_ns=int(target_s * NS))
            if cap is not None:
                task.add_done_callback(lambda _t: cap.release())
            await asyncio.sleep(0)  # let the request stamp `sent` before the next one is planned
        self.send_end_ns = time.monotonic_ns()

    async def _sleep_until(self, loop: asyncio.AbstractEventLoop, target_s: float) -> None:
        delay = target_s - time.monotonic()
        if delay > _EARLY_WAKE_S:
            try:
                await asyncio.wait_for(self._stopping.wait(), delay - _EARLY_WAKE_S)
            except asyncio.TimeoutError:
                pass
        while time.monotonic() < target_s and not self._stopping.is_set():
            await asyncio.sleep(0)

    # -- one request --------------------------------------------------------------------------

    def _next(self) -> PlannedRequest | None:
        planned = next(self._plan, None)  # datasets and traces end
        if planned is None or (self._s.total_requests is not None
                               and planned.index >= self._s.total_requests):
            return None
        return planned

    def _is_warmup(self, index: int, scheduled_ns: int) -> bool:
        return is_warmup(index, scheduled_ns - self.start_ns, self._s.warmup_requests, self._s.warmup_s)

    def _new_record(self, index: int, scheduled_ns: int, input_tokens: int, output_tokens: int,
                    **fields: object) -> RequestRecord:
        return RequestRecord(
            request_id=f"tp-{self._run_id}-{index:06d}", index=index, api=self._api,
            stream=self._stream, warmup=self._is_warmup(index, scheduled_ns),
            requested_input_tokens=input_tokens, requested_output_tokens=output_tokens,
            scheduled_ns=scheduled_ns, **fields)

    def _start(self, planned: PlannedRequest, *, scheduled_ns: int) -> asyncio.Task:
        record = self._new_record(planned.index, scheduled_ns, planned.input_tokens,
                                  planned.output_tokens, prefix_group=planned.prefix_group)
        return self._launch(record, planned.prompt, planned.extra_body)

    def _launch(self, record: RequestRecord, prompt: Prompt,
                extra_body: dict[str, Any] | None) -> asyncio.Task:
        if self._on_launch is not None:
            self._on_launch(record)
        task = asyncio.ensure_future(self._one(record, prompt, extra_body))
        self._tasks.add(task)
        self._flying[task] = record
        self.sent_count += 1
        task.add_done_callback(self._forget)
        return task

    def _forget(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        self._flying.pop(task, None)

    async def _session(self, conversation: Conversation) -> None:
        """One multi-turn session: turn k+1 goes out think_time after turn k completed (failed
        turns included), with the history first so a prefix cache can reuse it."""
        loop = asyncio.get_running_loop()
        previous_done_ns: int | None = None
        while not conversation.done and not self._stopping.is_set():
            turn = conversation.next_turn(None)  # history replies: synthetic text of their length
            scheduled_s = (self.start_ns / NS + conversation.start_offset_s if previous_done_ns is None
                           else previous_done_ns / NS + turn.think_time_s)
            await self._sleep_until(loop, scheduled_s)
            if previous_done_ns is not None:  # as the closed loop: a session's first turn goes at once
                await self._slices.send_turn()
            index = self._next_index()
            if index is None or self._stopping.is_set():
                return
            record = self._new_record(index, int(scheduled_s * NS), turn.input_tokens,
                                      turn.output_tokens, session=turn.session, turn=turn.turn)
            await asyncio.shield(self._launch(record, turn.prompt(self._api), turn.extra_body))
            previous_done_ns = record.done_ns or time.monotonic_ns()

    def _next_index(self) -> int | None:
        k, n = self._stride
        index = k + n * self._sent_count
        if self._s.total_requests is not None and index >= self._s.total_requests:
            return None
        self._sent_count += 1
        return index

    async def _one(self, record: RequestRecord, prompt: Prompt,
                   extra_body: dict[str, Any] | None = None) -> None:
        """Send one request, retrying per the policy; every attempt ends as one record on disk.

        A failed attempt is saved once its fate is known: as ``retried`` when the next attempt
        goes out, or as the request's outcome when the run ends during the backoff.
        """
        while True:
            finish = await self._attempt(record, prompt, extra_body)
            if self._stopping.is_set() or not should_retry(record, retries=self._s.retries):
                self._ended(record, finish)
                return
            try:
                await asyncio.wait_for(self._stopping.wait(),
                                       retry_delay_s(record, backoff_s=self._s.retry_backoff_s))
                self._ended(record, finish)  # the run ended during the backoff
                return
            except asyncio.TimeoutError:
                pass
            except asyncio.CancelledError:
                self._ended(record, finish)
                raise
            record.retried = True
            self._ended(record, finish)
            record = _next_attempt(record)
            task = asyncio.current_task()
            if task in self._flying:
                self._flying[task] = record

    async def _attempt(self, record: RequestRecord, prompt: Prompt,
                       extra_body: dict[str, Any] | None) -> Finish | None:
        """One attempt; returns what is left to finish its record (the client's token accounting)."""
        try:
            return await self._send(record, prompt, extra_body)
        except asyncio.CancelledError:
            if record.done_ns is None:  # the client normally finalizes; never leave it open
                record.status, record.done_ns = "cancelled", time.monotonic_ns()
            self._ended(record, None)  # exactly once per attempt
            raise
        except Exception as exc:  # a bug in the client must neither end the run nor lose the record
            _client_bug(record, exc)
            return None

    def _ended(self, record: RequestRecord, finish: Finish | None) -> None:
        """An attempt's record is final but for ``finish``: queued, completed and handed over in a slice."""
        self._slices.record((record, finish))

    def _hand_over(self, ended: tuple[RequestRecord, Finish | None]) -> None:
        record, finish = ended
        if finish is not None:
            try:
                finish()
            except Exception as exc:  # noqa: BLE001 - as in _attempt: the record still goes to the sink
                _client_bug(record, exc)
        self._sink(record)

    async def _drain(self) -> None:
        """Give requests in flight the grace period, then cancel what is left. After a count-bounded
        run the wait is long (end_grace_s); a stop() that comes during it cuts it to grace_s."""
        if not self._tasks:
            return
        tasks = set(self._tasks)
        finished = asyncio.ensure_future(asyncio.wait(tasks))
        if not self._stopped_early:
            stopped = asyncio.ensure_future(self._stopping.wait())
            await asyncio.wait({finished, stopped}, timeout=self._s.end_grace_s,
                               return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
        if self._stopped_early and not finished.done():  # stopped before or during the long wait
            await asyncio.wait({finished}, timeout=self._s.grace_s)
        finished.cancel()
        pending = {task for task in tasks if not task.done()}
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=1.0)


def _client_bug(record: RequestRecord, exc: Exception) -> None:
    record.status, record.error_kind = "error", "client_bug"
    record.error_message = f"{type(exc).__name__}: {exc}"[:300]
    record.done_ns = record.done_ns or time.monotonic_ns()


def _next_attempt(failed: RequestRecord) -> RequestRecord:
    """A fresh record for the retry. It keeps the first attempt's scheduled time, so "TTFT from
    scheduled" of the final attempt includes the time lost to the failed ones, as the user felt."""
    base = failed.request_id.rsplit(".a", 1)[0] if failed.attempt > 1 else failed.request_id
    return RequestRecord(
        request_id=f"{base}.a{failed.attempt + 1}", index=failed.index, api=failed.api,
        stream=failed.stream, warmup=failed.warmup,
        requested_input_tokens=failed.requested_input_tokens,
        requested_output_tokens=failed.requested_output_tokens,
        scheduled_ns=failed.scheduled_ns, attempt=failed.attempt + 1)

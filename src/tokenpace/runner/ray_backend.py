"""`--ray ADDRESS|auto`: the workers of workers.py as Ray actors, spread across a cluster's nodes.

Each actor runs the same WorkerBody as a worker process, in a thread with its own event loop and
connection pool; the driver collects its messages every POLL_S (``drain``), so an actor that is
killed loses the messages of its last POLL_S: a request it began in that moment has no record.
Before the run the driver measures each actor's clocks NTP-style: ``PINGS`` round trips, and the
one with the shortest round trip gives

    offset = actor clock - (driver clock at send + driver clock at reply) / 2,  error <= RTT / 2

for the wall clock (``time.time_ns``: stated in the result, and the run is refused when a node is
further than --max-clock-offset off, or the round trip leaves more uncertainty than that) and for
the monotonic clock (used to align the schedule: each actor starts at the driver's start instant
translated to its own clock, and its records' timestamps are translated back when they arrive).
Latencies are differences of one actor's own monotonic readings, so the offset never enters them.
Why refuse a node that we can correct for: a node that far off is not synchronized, and while
its time daemon pulls it back it slews the rate of its clocks (up to 500 ppm on Linux), which
moves its schedule against the others' during the run.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections import deque
from dataclasses import fields
from typing import Any

from tokenpace.config import BenchConfig
from tokenpace.errors import ClusterError
from tokenpace.record import RequestRecord
from tokenpace.runner.workers import WorkerBody, WorkerJob, run_loop

PINGS = 8
CONNECT_TIMEOUT_S = 120.0  # joining the cluster, placing the actors and measuring their clocks
POLL_S = 0.05
_NS_FIELDS = tuple(f.name for f in fields(RequestRecord) if f.name.endswith("_ns") and f.name != "chunk_ns")


class LoadActor:
    """One load worker inside a Ray actor. ``clock_skew_ns`` adds to its wall clock readings: it
    exists to test the clock checks without a second machine."""

    def __init__(self, clock_skew_ns: int = 0):
        self._skew = clock_skew_ns
        self._messages: deque = deque()
        self._ready = threading.Event()
        self._start: deque = deque()
        self._start_set = threading.Event()
        self._body: WorkerBody | None = None
        self._failed: str | None = None

    def clock(self) -> tuple[int, int]:
        return time.monotonic_ns(), time.time_ns() + self._skew

    def node(self) -> dict[str, str]:
        import ray

        return {"node_id": ray.get_runtime_context().get_node_id(), "host": socket.gethostname()}

    def prepare(self, job: WorkerJob) -> str | None:
        """Plan this actor's share in its own thread; None when ready, else why not."""
        threading.Thread(target=self._main, args=(job,), name="tokenpace-actor-load", daemon=True).start()
        self._ready.wait()
        return self._failed

    def start(self, local_start_ns: int | None) -> None:
        self._start.append(local_start_ns)
        self._start_set.set()

    def stop(self) -> None:
        if self._body is not None:
            self._body.stop()
        if not self._start_set.is_set():
            self.start(None)

    def cancel(self) -> None:
        self.stop()
        if self._body is not None:
            self._body.cancel_now()

    def drain(self) -> list[tuple]:
        out = []
        while self._messages:
            out.append(self._messages.popleft())
        return out

    def _emit(self, kind: str, payload: Any = None) -> None:
        self._messages.append((kind, payload))

    def _main(self, job: WorkerJob) -> None:
        async def main() -> None:
            body = WorkerBody(job, self._emit)
            await body.prepare()
            self._body = body
            self._ready.set()
            await asyncio.to_thread(self._start_set.wait)
            start = self._start.popleft()
            if start is None:  # stopped before the start: nothing was sent
                self._emit("done", {"cpu_s": 0.0, "wall_s": 0.0, "interrupted": True})
                return
            await body.run(start)

        try:
            run_loop(main())
        except BaseException as exc:  # noqa: BLE001 - reported to the driver on one line
            self._failed = f"{type(exc).__name__}: {exc}"[:300]
            self._emit("failed", self._failed)
        finally:
            self._ready.set()


def measure_clock(actor: Any, pings: int = PINGS) -> dict[str, float]:
    """NTP-style offsets of one actor's clocks from this process's, from the fastest of ``pings``
    round trips (ms; ``mono_offset_ns`` exact, for translating timestamps)."""
    import ray

    best = None
    for _ in range(pings):
        m0, w0 = time.monotonic_ns(), time.time_ns()
        mono, wall = ray.get(actor.clock.remote())
        m1, w1 = time.monotonic_ns(), time.time_ns()
        rtt = m1 - m0
        if best is None or rtt < best[0]:
            best = (rtt, mono - (m0 + m1) // 2, wall - (w0 + w1) // 2)
    rtt, mono_offset, wall_offset = best
    return {"wall_offset_ms": wall_offset / 1e6, "uncertainty_ms": rtt / 2e6, "rtt_ms": rtt / 1e6,
            "mono_offset_ns": mono_offset}


def check_clocks(clocks: list[dict[str, Any]], max_offset_ms: float) -> None:
    """Refuse the run when a node's clock is further off than ``max_offset_ms``, or cannot be
    measured to within it (ClusterError, before anything is sent)."""
    for c in clocks:
        if abs(c["wall_offset_ms"]) > max_offset_ms:
            raise ClusterError(
                f"the clock of Ray node {c['host']} (actor {c['worker']}) is {c['wall_offset_ms']:+.1f} "
                f"± {c['uncertainty_ms']:.1f} ms off this machine's, beyond --max-clock-offset {max_offset_ms:g} "
                "ms: synchronize the nodes' clocks (chrony, ntpd) or raise the limit")
        if c["uncertainty_ms"] > max_offset_ms:
            raise ClusterError(
                f"the clock of Ray node {c['host']} (actor {c['worker']}) cannot be measured to within "
                f"--max-clock-offset {max_offset_ms:g} ms (round trip {c['rtt_ms']:.1f} ms)")


def _reachable(address: str | None) -> None:
    """A HOST:PORT that nothing listens on fails here at once, not after Ray's long retries."""
    if not address or address in ("auto", "local") or "://" in address or ":" not in address:
        return
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=5.0):
            pass
    except ValueError:
        raise ClusterError(f"--ray {address}: the port must be a number") from None
    except OSError as exc:
        raise ClusterError(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}") from None


def join(ray: Any, address: str | None) -> None:
    """Join the cluster at ``address`` unless this process already has (ClusterError: one line)."""
    if ray.is_initialized():
        return
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = str(exc).split(". ")[0].splitlines()[0] if str(exc) else type(exc).__name__
        raise ClusterError(f"cannot join the Ray cluster at {address}: {first}") from None


def connect_cluster(address: str | None) -> Any:
    """Ray, joined to the cluster at ``address`` (for tasks rather than load actors: a sweep's
    simulated steps). As ``RayBackend.connect``: no Ray, an address nothing listens on, or no answer
    within CONNECT_TIMEOUT_S is a ClusterError."""
    try:
        import ray
    except ImportError:
        raise ClusterError("--ray needs Ray: pip install 'tokenpace[ray]'") from None
    _reachable(address)
    outcome: list[BaseException | None] = []
    # A daemon thread: ray.init can hang on an address that answers but is no Ray cluster.
    thread = threading.Thread(target=lambda: outcome.append(_try(join, ray, address)),
                              name="tokenpace-ray-connect", daemon=True)
    thread.start()
    thread.join(CONNECT_TIMEOUT_S)
    if not outcome:
        raise ClusterError(f"no answer from the Ray cluster at {address} within {CONNECT_TIMEOUT_S:g} s "
                           "(is it a Ray head node, and this machine allowed to join it?)")
    if outcome[0] is not None:
        raise outcome[0]
    return ray


def _try(fn: Any, *args: Any) -> BaseException | None:
    try:
        fn(*args)
    except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
        return exc
    return None


class RayBackend:
    """The transport of WorkerPool (workers.py) over Ray actors."""

    name = "ray"
    start_delay_s = 0.5  # the start instant travels by Ray RPC to every actor

    def __init__(self, ray: Any, actors: list[Any], clocks: list[dict[str, Any]]):
        self._ray, self._actors = ray, actors
        self.actors = len(actors)
        self.clocks = clocks
        self._stop = threading.Event()
        self._ended: set[int] = set()
        self._poller: threading.Thread | None = None

    @classmethod
    async def connect(cls, config: BenchConfig, *, clock_skew_ns: int = 0) -> RayBackend:
        """Join the cluster (unless this process already has), place the actors, check clocks."""
        try:
            import ray
        except ImportError:
            raise ClusterError("--ray needs Ray: pip install 'tokenpace[ray]'") from None
        _reachable(config.ray)
        # A daemon thread, not asyncio's executor: ray.init can hang on an address that answers
        # but is no Ray cluster, and a signal or the time limit must still end the run.
        loop = asyncio.get_running_loop()
        done: asyncio.Future = loop.create_future()

        def settle(result: Any, error: BaseException | None) -> None:
            if done.done():  # the wait timed out or was cancelled
                return
            if error is not None:
                done.set_exception(error)
            else:
                done.set_result(result)

        def connect() -> None:
            try:
                result: Any = cls._connect(ray, config, clock_skew_ns)
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting coroutine
                loop.call_soon_threadsafe(settle, None, exc)
                return
            loop.call_soon_threadsafe(settle, result, None)

        threading.Thread(target=connect, name="tokenpace-ray-connect", daemon=True).start()
        try:
            return await asyncio.wait_for(done, CONNECT_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise ClusterError(f"no answer from the Ray cluster at {config.ray} within "
                               f"{CONNECT_TIMEOUT_S:g} s (is it a Ray head node, and this machine "
                               "allowed to join it?)") from None

    @classmethod
    def _connect(cls, ray: Any, config: BenchConfig, clock_skew_ns: int) -> RayBackend:
        join(ray, config.ray)
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        count = config.workers if config.workers else len(nodes) or 1
        remote = ray.remote(LoadActor).options(num_cpus=1, scheduling_strategy="SPREAD")
        actors = [remote.remote(clock_skew_ns) for _ in range(count)]
        try:
            places = ray.get([a.node.remote() for a in actors], timeout=120)
        except Exception as exc:  # noqa: BLE001 - Ray raises many kinds; one line for the user
            for a in actors:
                ray.kill(a)
            raise ClusterError(f"the Ray actors could not start ({type(exc).__name__}): the cluster "
                               f"needs {count} free CPUs") from None
        clocks = []
        for k, (actor, place) in enumerate(zip(actors, places)):
            clocks.append({"worker": k, **place, **measure_clock(actor)})
        try:
            check_clocks(clocks, config.max_clock_offset_ms)
        except ClusterError:
            for a in actors:
                ray.kill(a)
            raise
        return cls(ray, actors, clocks)

    async def start(self, jobs: list[WorkerJob], deliver: Any) -> None:
        ray = self._ray
        failures = await asyncio.to_thread(ray.get, [a.prepare.remote(j) for a, j in zip(self._actors, jobs)])
        for k, failed in enumerate(failures):
            deliver((k, "failed", failed) if failed else (k, "ready", None))

        def poll() -> None:
            while True:
                last = self._stop.is_set()
                live = [k for k in range(self.actors) if k not in self._ended]
                refs = [self._actors[k].drain.remote() for k in live]
                for k, ref in zip(live, refs):
                    try:
                        messages = ray.get(ref, timeout=30)
                    except Exception as exc:  # noqa: BLE001 - the actor or its node is gone
                        self._ended.add(k)
                        deliver((k, "failed", f"Ray actor lost ({type(exc).__name__})"))
                        continue
                    for kind, payload in messages:
                        if kind in ("done", "failed"):
                            self._ended.add(k)
                        deliver((k, kind, payload))
                if last or len(self._ended) == self.actors:
                    return
                self._stop.wait(POLL_S)

        self._poller = threading.Thread(target=poll, name="tokenpace-ray-poll", daemon=True)
        self._poller.start()

    def local_start_ns(self, k: int, start_ns: int) -> int:
        return start_ns + self.clocks[k]["mono_offset_ns"]

    def send(self, k: int, *message: Any) -> None:
        actor = self._actors[k]
        if message[0] == "start":
            actor.start.remote(message[1])
        elif message[0] == "stop":
            actor.stop.remote()
        elif message[0] == "cancel":
            actor.cancel.remote()

    def exit_code(self, k: int) -> int | None:
        return None  # a lost actor shows up as a failed drain

    def report_death(self, k: int, code: int | None) -> None:
        pass

    def to_parent_clock(self, k: int, item: Any) -> Any:
        """An actor's timestamps on the driver's monotonic clock (a constant shift per actor)."""
        shift = self.clocks[k]["mono_offset_ns"]
        if isinstance(item, RequestRecord):
            for name in _NS_FIELDS:
                value = getattr(item, name)
                if value is not None:
                    setattr(item, name, value - shift)
            item.chunk_ns = [t - shift for t in item.chunk_ns]
            return item
        notice = list(item)  # a launch notice: scheduled_ns and launch_ns are its last two
        notice[-2] = None if notice[-2] is None else notice[-2] - shift
        notice[-1] -= shift
        return tuple(notice)

    async def close(self) -> None:
        self._stop.set()
        if self._poller is not None:
            await asyncio.to_thread(self._poller.join, 60.0)
        for actor in self._actors:
            self._ray.kill(actor)

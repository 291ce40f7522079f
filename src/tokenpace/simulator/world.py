"""One simulation run's state: the requests, the engine, the load, the loop, and the records."""

from __future__ import annotations

from tokenpace.record import RequestRecord
from tokenpace.simulator.engine import Engine
from tokenpace.simulator.events import Arrival, Event, Timeout
from tokenpace.simulator.load import ClosedLoop, OpenLoop, Requests, SessionLoop
from tokenpace.simulator.loop import EventLoop
from tokenpace.simulator.records import completed_record, failed_record, timed_out_record
from tokenpace.simulator.sequence import Sequence


class World:
    def __init__(self, requests: Requests, engine: Engine, load: OpenLoop | ClosedLoop | SessionLoop, *,
                 timeout_ns: int | None = None, ttft_timeout_ns: int | None = None) -> None:
        self.requests = requests
        self.timeout_ns = timeout_ns
        self.ttft_timeout_ns = ttft_timeout_ns
        self.engine = engine
        self.load = load
        self.loop = EventLoop()
        self.records: dict[int, RequestRecord] = {}  # by request index; a request never sent has none
        self._live: dict[int, Sequence] = {}
        self._sent: list[int] = []  # request indices in the order they reached the engine
        self._ones: dict[int, list[int]] = {}  # one-token-per-chunk lists, shared (records.ones)

    def new_sequence(self, index: int, t_ns: int) -> Sequence:
        seq = Sequence(index, self.requests[index], t_ns)
        self._live[index] = seq
        self._sent.append(index)
        return seq

    @property
    def sent_count(self) -> int:
        """Requests that reached the engine so far (a progress view reads it from another thread)."""
        return len(self._sent)

    @property
    def in_flight_count(self) -> int:
        return len(self._live)

    def live(self, index: int) -> Sequence | None:
        return self._live.get(index)

    def timeouts(self, seq: Sequence) -> list[Event]:
        """The client's limits for a request just sent, as events (none without limits)."""
        out: list[Event] = []
        if self.timeout_ns is not None:
            out.append(Timeout(seq.arrival_ns + self.timeout_ns, seq.index, "total_timeout"))
        if self.ttft_timeout_ns is not None and (self.timeout_ns is None or self.ttft_timeout_ns < self.timeout_ns):
            out.append(Timeout(seq.arrival_ns + self.ttft_timeout_ns, seq.index, "ttft_timeout"))
        return out

    def time_out(self, seq: Sequence, t_ns: int, kind: str) -> None:
        self.records[seq.index] = timed_out_record(seq, t_ns, kind)
        del self._live[seq.index]

    def complete(self, seq: Sequence) -> None:
        self.records[seq.index] = completed_record(seq, self._ones)
        del self._live[seq.index]

    def reject(self, seq: Sequence, t_ns: int) -> None:
        cap = self.engine.max_seq_tokens
        msg = f"prompt + output = {seq.prompt_len + seq.output_len} tokens > KV capacity {cap} tokens"
        self.records[seq.index] = failed_record(seq, t_ns, "exceeds_kv_capacity", msg)
        del self._live[seq.index]

    def run(self) -> list[RequestRecord]:
        for t, i in self.load.initial():
            self.loop.push(Arrival(t, i))
        self.loop.run(self)
        if self.engine.scheduler.cohort is not None:  # write back any member's fields (a stalled run)
            self.engine.scheduler.dissolve_cohort(self.engine.steps)
        for seq in list(self._live.values()):  # only if a policy stalled; never expected
            self.records[seq.index] = failed_record(seq, self.loop.now_ns, "stalled",
                                                    "the engine stopped with this request unfinished")
        if getattr(self.load, "numbers_by_send", False):  # conversations: index = send order
            out = []
            for n, i in enumerate(self._sent):
                rec = self.records[i]
                rec.index, rec.request_id = n, f"sim-{n:06d}"
                out.append(rec)
            return out
        return [self.records[i] for i in sorted(self.records)]

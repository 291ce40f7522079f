"""The engine: asks the scheduler for a batch, prices it, and delivers its tokens when it ends.

When the batch is a pure decode step that the policy would repeat unchanged (``repeat_limit``), the
engine runs k identical steps as one event, where k stops at the first of: a sequence finishing, the
KV cache running out of free blocks for the steps' growth, the policy's limit, or the step during
which the next pending event (an arrival) happens. Every one of the k steps still gets its own
timestamp and its own chunk in each record. Each of the k steps is priced as stepping one by one
would price it: plain decodes through the predictor's vectorised ``decode_run_s`` (step.py; the
same floats as ``step_s``, every context one token longer per step), speculative decoding step by
step from each sequence's token plan. So a jump changes no record and no summary figure; its one
timeline row stands for the k rows stepping gives (the same start, first step, batch, queue and span;
its KV usage counts the blocks allocated for all k steps).

``join_window_s``: after a step during which requests arrived (``join_after="finish"``: or in which
a sequence finished), the next batch forms that long after the step's end, so that requests
arriving meanwhile join it (``schedule_ns``; priced from the end, see ``step_price``'s docstring);
such a batch is stepped singly, never jumped.

``arrival_s``: the host time each arriving request takes from the engine's own core (see
``roofline``'s docstring): a request arriving while a step runs pushes that step's end (and any
later step of its run) back by it; ``StepEnd`` then finds its step's end moved and waits for it. A
request that finds the engine idle costs nothing here: a calibration measures such a step from
the send, so its fixed costs hold that time already (``calibrate/steps.py``).

``step_noise``: every step's time times a lognormal factor of mean 1 keyed by its step index
(``step_noise.py``), so a jump still prices each of its steps as stepping would.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from operator import attrgetter

import numpy as np

from tokenpace.chunk_runs import ChunkRuns
from tokenpace.simulator.cohort import DecodeCohort
from tokenpace.simulator.jump import jump_length
from tokenpace.simulator.policies.base import Batch, Scheduler
from tokenpace.simulator.sequence import CANCELLED, DONE, Sequence
from tokenpace.simulator.spec_decode import SpecDecodeConfig, spec_step_s, token_plan
from tokenpace.simulator.step import ShiftedContexts, StepBatch, StepPredictor, decode_run_s
from tokenpace.simulator.step_noise import StepNoise
from tokenpace.simulator.stream_slots import StreamSlots
from tokenpace.simulator.timeline import TimelineRow


_NUM_COMPUTED = attrgetter("num_computed")
SHORT_RUN = 8  # runs of up to this many decode steps are priced step by step (the same floats)


@dataclass(slots=True)
class Step:
    """One scheduled batch, run ``len(ends_ns)`` times back to back."""

    batch: Batch
    start_ns: int
    ends_ns: list[int]

    @property
    def end_ns(self) -> int:
        return self.ends_ns[-1]


class Engine:
    def __init__(self, scheduler: Scheduler, predictor: StepPredictor, *,
                 spec: SpecDecodeConfig | None = None, seed: int = 0, jump: bool = True,
                 timeline: list[TimelineRow] | None = None, cohort: bool = False, arrival_s: float = 0.0,
                 join_window_s: float = 0.0, join_after: str = "arrival", host_seq_s: float = 0.0,
                 stream_interval_s: float = 0.0, stream_join_s: float = 0.0,
                 step_noise: float = 0.0, noise_seed: int = 0) -> None:
        self.scheduler = scheduler
        self.kv = scheduler.kv
        self.predictor = predictor
        self.spec = spec
        self.seed = seed
        self.jump = jump
        self.timeline = timeline
        self.decode_tokens = 1 + (spec.num_draft_tokens if spec else 0)
        self.max_seq_tokens = self.kv.num_blocks * self.kv.block_size
        self.steps = 0  # engine steps run so far (the index of the next one)
        self.host_seq_s = host_seq_s  # a step takes at least its sequences x this (host work it overlaps)
        self._noise = StepNoise(step_noise, noise_seed) if step_noise else None  # step i's time x a factor
        self._slots = StreamSlots(round(stream_interval_s * 1e9), round(stream_join_s * 1e9)) if stream_interval_s else None
        # Plain decodes advanced as one cohort (cohort.py): not for a driver that reads every sequence's
        # tokens after each step, nor with speculative decoding, a prefix cache or slots (stream_slots.py).
        if cohort and spec is None and not self.kv.prefix_caching and scheduler.supports_cohort and not self._slots:
            scheduler.cohort = DecodeCohort(self.kv.block_size)
        # With a cohort, the end of every step is kept (its ``ends``), and a sequence's chunk times are
        # runs of those steps (``ChunkRuns``), never copied out per token; otherwise lists of times.
        self.step_ends = scheduler.cohort.ends if scheduler.cohort is not None else None
        self.busy = False
        self._schedule_pending = False
        self.arrival_ns = round(arrival_s * 1e9)
        self.join_window_ns = round(join_window_s * 1e9)
        self._arrived_in_flight = False  # a request arrived while the step in flight ran (or, join_after "finish": one finished)
        self._open_after_finish = join_after == "finish"
        self._origin_ns: int | None = None  # the end of the step before a batch formed after a join window
        self._flight: Step | None = None  # the step running now

    # -- arrivals --------------------------------------------------------------------------------

    def arrive(self, seq: Sequence) -> bool:
        """Queue a new request; False when it could never fit in the KV cache, even alone (a
        verification step needs room for its γ draft tokens too)."""
        if seq.prompt_len + seq.output_len + self.decode_tokens - 1 > self.max_seq_tokens:
            return False
        if self.step_ends is not None:
            seq.chunk_ns = ChunkRuns(self.step_ends)
        self.scheduler.add(seq)
        if self.busy:
            self._arrived_in_flight = True
        if self.arrival_ns:
            self._host_work(seq.arrival_ns)
        return True

    def schedule_ns(self, t_ns: int) -> int:
        """When the batch after the step that just ended at ``t_ns`` forms: ``join_window_s`` later
        when requests arrived during that step, or under ``join_after="finish"`` a sequence finished
        in it (the engine takes in requests meanwhile; the batch is priced from ``t_ns``), else at
        once."""
        if self.join_window_ns and self._arrived_in_flight:
            self._origin_ns = t_ns
            return t_ns + self.join_window_ns
        return t_ns

    def _host_work(self, t_ns: int) -> None:
        """An arrival's host time: the step running at ``t_ns`` (and the rest of its run) ends later."""
        step = self._flight if self.busy else None
        if step is None or step.end_ns <= t_ns:
            return
        ends = step.ends_ns
        i = next(j for j, e in enumerate(ends) if e > t_ns)
        ends[i:] = [e + self.arrival_ns for e in ends[i:]]

    def claim_schedule(self) -> bool:
        """True (once) when the engine is idle and a scheduling pass should be queued."""
        if self.busy or self._schedule_pending:
            return False
        self._schedule_pending = True
        return True

    # -- steps -----------------------------------------------------------------------------------

    def start_step(self, t_ns: int, horizon_ns: int | None) -> Step | None:
        self._schedule_pending = False
        self._arrived_in_flight = False
        formed_ns, origin = t_ns, self._origin_ns
        self._origin_ns = None
        preempted_before = self.scheduler.preemptions
        batch = self.scheduler.schedule(self.steps)
        if not (batch.prefill or batch.decode):
            self.busy = False
            return None
        self.busy = True
        if origin is not None:  # formed after a join window: priced from the end of the step before
            t_ns = origin
        if self.spec is not None:
            for seq in batch.decode:
                if seq.plan is None:
                    seq.plan = token_plan(self.spec, seq.output_len, self.seed, seq.index)
                    if seq.chunk_tokens is None:
                        seq.chunk_tokens = [1] * len(seq.chunk_ns)
        first = self._step_batch(batch, 0)
        co = batch.cohort  # set: the decodes advance as one cohort (cohort.py)
        jumps = self.jump and not batch.prefill and batch.repeat_limit > 1 and origin is None
        k = 1
        if jumps:
            k = (co.jump_length(self.steps, batch.repeat_limit, self.kv.num_free) if co is not None
                 else jump_length(batch, self.kv, self.decode_tokens, plain=self.spec is None))
        if k == 1:
            d0 = self._price(first)
            ends = [max(t_ns + max(1, round(d0 * 1e9)), formed_ns + 1)]
        else:
            ends, k, d0 = self._run_ends(batch, first, t_ns, k, horizon_ns)
            g = self.decode_tokens
            for seq in batch.decode if co is None else ():
                ok = self.kv.grow(seq, seq.num_computed + seq.tokens_after(k - 1) + g)
                assert ok, "jump length exceeded the free KV blocks"
        if jumps and co is not None:
            co.allocate(self.kv, self.steps, k)
        if self.timeline is not None:
            sched, kv = self.scheduler, self.kv
            prefill_tokens = sum([n for n, _ in first.prefill]) if first.prefill else 0
            num_decode = len(first.decode_context)
            self.timeline.append(TimelineRow(
                t_ns=t_ns, steps=k, step_ms=d0 * 1e3, span_ms=(ends[-1] - t_ns) / 1e6,
                waiting=len(sched.waiting), running=len(sched.running), kv_usage=kv.usage,
                prefix_cache_hit_rate=kv.hit_rate,
                batch_tokens=prefill_tokens + num_decode * first.decode_tokens_per_seq,
                decode_seqs=num_decode, prefill_tokens=prefill_tokens,
                preempted=sched.preemptions - preempted_before, preemptions=sched.preemptions,
            ))
        self._flight = Step(batch, t_ns, ends)
        return self._flight

    def cancel(self, seq: Sequence, t_ns: int | None = None) -> None:
        """The client gave up on ``seq`` at ``t_ns``: it leaves the engine now and its KV blocks are
        free; a step in flight that includes it delivers it nothing. When that step is a jump over
        k decode steps, the steps of it that ended by ``t_ns`` deliver their tokens first, as they
        would have stepping one by one (a token delivered at that very instant counts)."""
        if seq.state in (DONE, CANCELLED):
            return
        if self._slots is not None:
            self._slots.release(seq)
        flight = self._flight
        done = 0
        if t_ns is not None and flight is not None and len(flight.ends_ns) > 1 and (
                seq.co_from >= 0 if flight.batch.cohort is not None else seq in flight.batch.decode):
            done = bisect_right(flight.ends_ns, t_ns)
        self.scheduler.cancel(seq)  # a cohort member's fields are written back to the jump's start
        if done:
            ends = flight.ends_ns[:done]  # type: ignore[union-attr]
            made = done if seq.plan is None else self._plan_chunks(seq, done)
            seq.num_computed += made
            seq.generated += made
            seq.decode_steps += done
            if type(seq.chunk_ns) is ChunkRuns:  # these steps' ends are not kept yet: a list from here on
                seq.chunk_ns = seq.chunk_ns.tolist()
            seq.chunk_ns.extend(ends)
        seq.state = CANCELLED

    def finish_step(self, step: Step) -> list[Sequence]:
        """Deliver the step's tokens; return the sequences that finished (already released)."""
        ends = step.ends_ns
        k, end = len(ends), ends[-1]
        done: list[Sequence] = []
        co = self.scheduler.cohort
        if co is not None:
            co.ends += ends  # steps self.steps to self.steps + k - 1: every chunk below is a run of them
        first, last = self.steps, self.steps + k - 1
        published = self.kv.publish if self.kv.prefix_caching else None  # (a no-op without a prefix cache)
        for seq, n in step.batch.prefill:
            if seq.state == CANCELLED:
                continue
            seq.num_computed += n
            if published is not None:
                published(seq)
            if seq.num_computed == seq.prompt_len + seq.generated:  # the prompt (or recompute) is complete: sample
                seq.generated += 1
                if seq.first_token_ns is None:
                    seq.first_token_ns = end
                if co is None:
                    seq.chunk_ns.append(end)
                else:
                    seq.chunk_ns.add(last, last + 1)
                if seq.chunk_tokens is not None:
                    seq.chunk_tokens.append(1)
                if seq.generated >= seq.output_len:
                    done.append(seq)
        if step.batch.cohort is not None:  # its members advance by the clock; only finishers matter
            done += step.batch.cohort.finishing(self.steps + k - 1)
            decodes = ()
        elif self.spec is None and k == 1:  # the common case at high concurrency: one plain decode step
            publish = self.kv.prefix_caching  # (publishing is a no-op without a prefix cache)
            for seq in step.batch.decode:
                if seq.state == CANCELLED:
                    continue
                seq.num_computed += 1
                seq.decode_steps += 1
                if co is None:
                    seq.chunk_ns.append(end)
                else:
                    seq.chunk_ns.add(first, first + 1)
                seq.generated += 1
                if publish and seq.request.session is not None:
                    self.kv.publish(seq)
                if seq.generated >= seq.output_len:
                    done.append(seq)
            decodes = ()
        else:
            decodes = step.batch.decode
        for seq in decodes:
            if seq.state == CANCELLED:
                continue
            made = k if seq.plan is None else self._plan_chunks(seq, k)
            seq.num_computed += made
            seq.generated += made
            seq.decode_steps += k
            if co is None:
                seq.chunk_ns.extend(ends)
            else:
                seq.chunk_ns.add(first, last + 1)
            if seq.request.session is not None:  # a conversation's reply is the next turn's prefix
                self.kv.publish(seq)
            if seq.generated >= seq.output_len:
                done.append(seq)
        if self._slots is not None:
            self._slots.finish([seq for seq, _ in step.batch.prefill if seq.state != CANCELLED]
                               + [seq for seq in step.batch.decode if seq.state != CANCELLED], done)
        for seq in done:
            self.scheduler.finish(seq)
            seq.state = DONE
        if done and self._open_after_finish:  # their clients' next requests come a turnaround later
            self._arrived_in_flight = True
        self.steps += k
        self.busy = False
        self._flight = None
        return done

    # -- helpers ---------------------------------------------------------------------------------

    def _price(self, batch: StepBatch, ahead: int = 0) -> float:
        """The seconds of this batch as the step ``ahead`` steps from now."""
        t = spec_step_s(self.predictor, batch, self.spec) if self.spec is not None else self.predictor.step_s(batch)
        if self.host_seq_s:
            t = max(t, self._host_s(len(batch.decode_context) + len(batch.prefill)))
        if self._noise is not None:
            t *= self._noise.factor(self.steps + ahead)
        return t

    def _host_s(self, sequences: int) -> float:
        """The host's work for a step of ``sequences``, which the step overlaps with the GPU's: a step
        takes the longer of the two."""
        return self.host_seq_s * sequences

    def _step_batch(self, batch: Batch, ahead: int) -> StepBatch:
        """The StepBatch of this batch's decode step ``ahead`` steps from now."""
        if batch.cohort is not None:
            ctx = batch.cohort.contexts(self.steps + ahead)
        elif ahead == 0:
            ctx = tuple(map(_NUM_COMPUTED, batch.decode))
        elif self.spec is None:
            ctx = tuple([c + ahead for c in map(_NUM_COMPUTED, batch.decode)])
        else:
            ctx = tuple(s.num_computed + s.tokens_after(ahead) for s in batch.decode)
        prefill = tuple([(n, s.num_computed) for s, n in batch.prefill]) if batch.prefill else ()
        return StepBatch(prefill=prefill, decode_context=ctx, decode_tokens_per_seq=self.decode_tokens)

    def _run_ends(self, batch: Batch, first: StepBatch, t_ns: int, k: int,
                  horizon_ns: int | None) -> tuple[list[int], int, float]:
        """The end times of the ``k`` decode steps from ``t_ns`` (each priced as stepping would
        price it), cut after the step during which ``horizon_ns`` (the next pending event) falls;
        how many that is; the first step's seconds."""
        if k <= SHORT_RUN or self.spec is not None:
            # A few steps (numpy's fixed cost would exceed the run's), or speculative decoding (tokens
            # per step vary by sequence): each step's batch priced on its own.
            ends, t = [], t_ns
            ctx = first.decode_context
            shifted = type(ctx) is ShiftedContexts  # the cohort's: step i is the same members, i tokens on
            for i in range(k):
                if i == 0:
                    b = first
                elif shifted:
                    b = StepBatch(decode_context=ShiftedContexts(ctx.base, ctx.shift + i, ctx.total + i * len(ctx)))
                else:
                    b = self._step_batch(batch, i)
                d = self._price(b, i)
                if i == 0:
                    d0 = d
                t += max(1, round(d * 1e9))
                ends.append(t)
                if horizon_ns is not None and t >= horizon_ns:
                    break
            return ends, len(ends), d0
        # Plain decodes: every context grows by one token a step, priced for all steps at once.
        seconds = np.asarray(decode_run_s(self.predictor, first, k), dtype=float)
        if self.host_seq_s:
            seconds = np.maximum(seconds, self._host_s(len(first.decode_context)))
        if self._noise is not None:
            seconds = seconds * self._noise.factors(self.steps, k)
        # rint rounds half to even, as round() does for one step: the same nanoseconds.
        durations = np.maximum(np.rint(seconds * 1e9).astype(np.int64), 1)
        ends = t_ns + np.cumsum(durations)
        if horizon_ns is not None and ends[-1] > horizon_ns:
            k = int(np.searchsorted(ends, horizon_ns, side="left")) + 1
            ends = ends[:k]
        return ends.tolist(), k, float(seconds[0])

    def _plan_chunks(self, seq: Sequence, k: int) -> int:
        plan, c = seq.plan, seq.decode_steps
        base = plan[c - 1] if c else 0
        left = seq.output_len - seq.generated
        made = 0
        for i in range(c, c + k):
            now = min(plan[i] - base, left)
            seq.chunk_tokens.append(now - made)
            made = now
        return made

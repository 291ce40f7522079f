"""Chunked prefill (Sarathi-Serve, vLLM V1's default): decodes first, then prompt chunks fill the
token budget they leave.

Each step: every running decode gets its token(s); partially computed prompts continue with chunks;
then waiting prompts are admitted FCFS (not after a preemption in the same step, as in vLLM V1), the
last one cut to the budget that is left. Prompts and decodes share one forward pass, so a long prompt
delays running streams by one chunk's worth per step instead of its whole prefill. Without chunking
(``chunked_prompts`` False, TensorRT-LLM's default in-flight batching) a prompt joins a step only
whole, within the budget left; only a prompt longer than the whole budget is chunked (it could not
run otherwise).
"""

from __future__ import annotations

from operator import attrgetter

from tokenpace.simulator.cohort import DecodeCohort
from tokenpace.simulator.policies.base import UNBOUNDED, Batch, Scheduler
from tokenpace.simulator.sequence import RUNNING, Sequence

_ADMIT_NO = attrgetter("admit_no")


class ChunkedPrefill(Scheduler):
    name = "chunked-prefill"
    summary = "decodes first, prompt chunks fill the token budget left (Sarathi-Serve, vLLM V1)"
    supports_cohort = True

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.outside: list[Sequence] = []  # with a cohort: the running sequences not in it, in order

    def schedule(self, step: int) -> Batch:
        co = self.cohort
        if co is not None:
            batch = self._schedule_cohort(co, step)
            if batch is not None:
                return batch
            self.dissolve_cohort(step)  # this step needs every sequence's own state
        return self._schedule_each(step)

    def _schedule_cohort(self, co: DecodeCohort, step: int) -> Batch | None:
        """The step with the cohort: its members by their events (a new KV block, preemption), the
        other running sequences one by one, in the order and with the preemptions of
        ``_schedule_each``. None (nothing changed) when the token budget cannot hold every decode:
        then the one-by-one pass decides which run."""
        outside, kv = self.outside, self.kv
        room = kv.block_size
        fresh, prompts, needy = [], [], []
        for seq in outside:  # sequences that just became decodes join the cohort
            if seq.generated and seq.prompt_len + seq.generated - seq.num_computed == 1:
                fresh.append(seq)
                if seq.num_computed + 1 > seq.num_blocks * room:
                    needy.append(seq)  # its decode needs a new block
            else:
                prompts.append(seq)
        if len(co.members) + len(fresh) > self.limits.max_batched_tokens:
            return None
        # Members first, while the blocks last with enough kept for the new decodes: they get the
        # blocks the running-order pass would give them before its first preemption. The rest go
        # through that pass.
        due = co.take_blocks(step, kv, keep=len(needy))
        needy = sorted(due + needy, key=_ADMIT_NO) if needy and due else due or needy
        before = self.preemptions
        # The decodes that need a block, in running order. Every decode before one of them has been
        # scheduled (it is no victim); every sequence after it has not.
        for seq in needy:
            if seq.state != RUNNING:
                continue  # preempted for an earlier one
            slots = seq.num_computed + 1 if seq.co_from < 0 else step - seq.co_from + seq.num_computed + 1
            while not kv.grow(seq, slots):
                victim = self._decode_victim(seq, prompts)
                self.preempt(victim)
                if victim is seq:
                    break
        for seq in fresh:
            if seq.state == RUNNING:
                seq.sched_step = step
                co.join(seq, step)
        if fresh:
            self.outside = [s for s in self.outside if s.co_from < 0]
        batch = Batch(decode=co.members, cohort=co)
        return self._prompts_then_admit(batch, prompts, self.limits.max_batched_tokens - len(co.members),
                                        step, before, all_ran=True)

    def _decode_victim(self, seq: Sequence, prompts: list[Sequence]) -> Sequence:
        """``_victim`` during the cohort's decode pass: the last running sequence when it comes
        after ``seq`` (not yet scheduled); else the last prompt under way before it; else ``seq``."""
        last = self.running[-1]
        if last is not seq:
            return last
        for cand in reversed(prompts):
            if cand.state == RUNNING and cand is not seq:
                return cand
        return seq

    def dissolve_cohort(self, step: int) -> None:
        """Write every cohort member's own state back (as of ``step``): the engine is about to read
        it. They become ordinary running sequences."""
        if self.cohort is not None:
            self.cohort.dissolve(step)
            self.outside = list(self.running)

    def _admit(self, batch: Batch, budget: int, step: int) -> int:
        limits, waiting, running, prefill = self.limits, self.waiting, self.running, batch.prefill
        chunk, max_seqs = limits.chunked_prompts, limits.max_num_seqs
        outside = self.outside if self.cohort is not None else None
        while waiting and budget > 0 and len(running) < max_seqs:
            head = waiting[0]
            whole = not chunk and head.to_compute <= limits.max_batched_tokens
            n = self.try_admit(head, budget, step, whole)
            if n == 0:
                break
            prefill.append((head, n))  # try_admit appended it to ``running``
            if outside is not None:
                outside.append(head)
            budget -= n
        return budget

    def finish(self, seq: Sequence) -> None:
        co = self.cohort  # ``_leave`` then ``Scheduler.finish``, inline: once per request
        if co is not None:
            if seq.co_from >= 0:
                co.leave(seq, len(co.ends))
            else:
                self.outside.remove(seq)
        self.running.remove(seq)
        self.kv.free(seq)

    def cancel(self, seq: Sequence) -> None:
        if seq.state == RUNNING:
            self._leave(seq)
        super().cancel(seq)

    def preempt(self, seq: Sequence) -> None:
        self._leave(seq)
        super().preempt(seq)

    def _leave(self, seq: Sequence) -> None:
        """``seq`` leaves the running queue: out of the cohort (its fields written back to the
        steps finished so far) or out of the others."""
        co = self.cohort
        if co is None:
            return
        if seq.co_from >= 0:
            co.leave(seq, co.clock)
        else:
            self.outside.remove(seq)

    def _schedule_each(self, step: int) -> Batch:
        batch = Batch()
        before = self.preemptions
        budget = self.limits.max_batched_tokens
        g = self.limits.decode_tokens
        room = self.kv.block_size
        prompts = []
        decode = batch.decode
        all_ran = True
        # Decodes first, in running order; the prompts under way are set aside for after them. One
        # pass over a snapshot: a reservation may preempt (and remove) a sequence later in the list,
        # which then reads as not running.
        for seq in tuple(self.running):
            if seq.state != RUNNING:
                continue  # preempted to make room for an earlier one
            if not (seq.generated and seq.prompt_len + seq.generated - seq.num_computed == 1):
                prompts.append(seq)
                continue
            if not all_ran:
                continue  # the budget ran out: no further decode runs this step
            if budget < g:
                all_ran = False
                continue
            if seq.num_computed + g <= seq.num_blocks * room:  # fast path: no new block needed
                seq.sched_step = step
            elif not self.reserve(seq, seq.num_computed + g, step):
                continue
            decode.append(seq)
            budget -= g
        return self._prompts_then_admit(batch, prompts, budget, step, before, all_ran=all_ran)

    def _prompts_then_admit(self, batch: Batch, prompts: list[Sequence], budget: int, step: int,
                            before: int, *, all_ran: bool) -> Batch:
        """After the decodes: the prompts already under way, in order, then new admissions."""
        for seq in prompts:
            if seq.state != RUNNING:
                continue
            if budget <= 0:
                all_ran = False
                break
            n = min(seq.to_compute, budget)
            if self.reserve(seq, seq.num_computed + n, step):
                batch.prefill.append((seq, n))
                budget -= n
        if self.preemptions == before:
            self._admit(batch, budget, step)
        if not batch.prefill and all_ran and self.preemptions == before:
            # Nothing waiting could be admitted, and nothing that blocks it eases until a sequence
            # finishes: the same decode step repeats.
            batch.repeat_limit = UNBOUNDED
        return batch

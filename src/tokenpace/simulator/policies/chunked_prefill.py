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

from tokenpace.simulator.policies.base import UNBOUNDED, Batch, Scheduler
from tokenpace.simulator.sequence import RUNNING


class ChunkedPrefill(Scheduler):
    name = "chunked-prefill"
    summary = "decodes first, prompt chunks fill the token budget left (Sarathi-Serve, vLLM V1)"

    def schedule(self, step: int) -> Batch:
        batch = Batch()
        before = self.preemptions
        budget = self.limits.max_batched_tokens
        g = self.limits.decode_tokens
        room = self.kv.block_size
        chunk = self.limits.chunked_prompts
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
        for seq in prompts:  # then prompts already under way
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
            while self.waiting and budget > 0 and len(self.running) < self.limits.max_num_seqs:
                head = self.waiting[0]
                whole = not chunk and head.to_compute <= self.limits.max_batched_tokens
                n = self.try_admit(head, budget, step, whole=whole)
                if n == 0:
                    break
                batch.prefill.append((self.running[-1], n))
                budget -= n
        if not batch.prefill and all_ran and self.preemptions == before:
            # Nothing waiting could be admitted, and nothing that blocks it eases until a sequence
            # finishes: the same decode step repeats.
            batch.repeat_limit = UNBOUNDED
        return batch

"""Static batching (FasterTransformer, early servers): a batch runs to completion before anyone joins.

When nothing runs, up to ``max_num_seqs`` waiting requests form a batch, as many as the KV cache
holds at their full length (prompt + output), so the batch never preempts. Their prompts run whole,
in prefill-only steps of up to the token budget; then the batch decodes until its last sequence
finishes. Requests arriving meanwhile wait: head-of-line blocking.
"""

from __future__ import annotations

from tokenpace.simulator.policies.base import UNBOUNDED, Batch, Scheduler
from tokenpace.simulator.sequence import RUNNING


class StaticBatching(Scheduler):
    name = "static"
    summary = "a batch runs to completion before new requests join (head-of-line blocking)"

    def schedule(self, step: int) -> Batch:
        batch = Batch()
        if not self.running:
            self._form_batch()
        budget = self.limits.max_batched_tokens
        for seq in self.running:
            if not seq.is_decoding:
                n = seq.to_compute
                if batch.prefill and n > budget:
                    break
                if self.reserve(seq, seq.num_tokens, step):
                    batch.prefill.append((seq, n))
                    budget -= n
        if batch.prefill:
            return batch
        self.decode_all(batch, step)
        batch.repeat_limit = UNBOUNDED
        return batch

    def _form_batch(self) -> None:
        """Take waiting requests, FCFS, while their full-length KV fits."""
        bs, free = self.kv.block_size, self.kv.num_free
        while self.waiting and len(self.running) < self.limits.max_num_seqs:
            seq = self.waiting[0]
            peak = -(-(seq.prompt_len + seq.output_len) // bs)
            if peak > free and self.running:
                break
            free -= peak
            hits, _ = self.kv.match_prefix(seq)
            self.waiting.popleft()
            self.kv.admit(seq, hits)
            if seq.cached_prompt_tokens is None:
                seq.cached_prompt_tokens = hits * bs
            seq.state = RUNNING
            self.running.append(seq)

"""Prefill-first continuous batching (Orca-style, vLLM V0's default without chunking).

Whenever waiting prompts fit (sequences, token budget, KV cache), the step runs them whole, as a
prefill-only step, and running streams pause for it; otherwise every running sequence decodes. This
keeps TTFT low and makes TPOT spiky under mixed load.
"""

from __future__ import annotations

from tokenpace.simulator.policies.base import UNBOUNDED, Batch, Scheduler


class PrefillFirst(Scheduler):
    name = "prefill-first"
    summary = "continuous batching; waiting prompts run whole, pausing decodes (vLLM V0)"

    def schedule(self, step: int) -> Batch:
        batch = Batch()
        self.admit_whole_prompts(batch, step)
        if batch.prefill:
            return batch
        before = self.preemptions
        self.decode_all(batch, step)
        if self.preemptions == before:
            batch.repeat_limit = UNBOUNDED  # admission stays blocked until a sequence finishes
        return batch

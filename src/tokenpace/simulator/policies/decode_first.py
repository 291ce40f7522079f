"""Decode-first batching, as Hugging Face TGI's router does it.

Running streams keep decoding; waiting prompts are let in (as a prefill-only step) only when
enough of them have gathered (at least ``waiting_served_ratio`` × running; TGI's default 0.3) or
when they have waited ``max_waiting_steps`` decode steps (TGI's ``max_waiting_tokens``, default 20),
or when nothing is running. This protects TPOT of running streams at the cost of TTFT.
"""

from __future__ import annotations

from tokenpace.simulator.policies.base import UNBOUNDED, Batch, Scheduler


class DecodeFirst(Scheduler):
    name = "decode-first"
    summary = "running streams keep decoding; prompts join in batches (TGI's router)"

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self._last_prefill_step = 0

    def schedule(self, step: int) -> Batch:
        batch = Batch()
        lim = self.limits
        waited = step - self._last_prefill_step
        blocked = False  # waiting prompts were due but did not fit: only a finishing sequence helps
        if self.waiting:
            forced = not self.running or waited >= lim.max_waiting_steps
            min_size = 1 if forced else max(1, int(len(self.running) * lim.waiting_served_ratio))
            if forced or self._admissible() >= min_size:
                self.admit_whole_prompts(batch, step)
                if batch.prefill:
                    self._last_prefill_step = step
                    return batch
                blocked = True
        before = self.preemptions
        self.decode_all(batch, step)
        if self.preemptions == before:
            if not self.waiting or blocked:
                batch.repeat_limit = UNBOUNDED
            else:  # re-decide when the wait forces admission
                batch.repeat_limit = max(1, lim.max_waiting_steps - waited)
        return batch

    def _admissible(self) -> int:
        """How many waiting prompts would fit now (sequence slots and token budget; KV is checked
        when admitting)."""
        room = self.limits.max_num_seqs - len(self.running)
        budget, n = self.limits.max_batched_tokens, 0
        for seq in self.waiting:
            if n >= room or (n and seq.to_compute > budget):
                break
            budget -= seq.to_compute
            n += 1
        return n

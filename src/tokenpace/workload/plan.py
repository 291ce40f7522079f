"""The request plan: what to send, in what order, and (open loop) when.

A plan is a lazy, seeded stream of PlannedRequest, so duration-bounded runs need no upper bound and
the same seed always gives the same prompts, lengths and arrival offsets (each from its own random
stream, so changing the rate does not change the prompts). Where requests come from (one at most):

- synthetic (default): lengths from `input_tokens`/`output_tokens`, random common words; endless;
- `dataset`: the file's prompts in file order, then the plan ends; output lengths from the file
  when it has them, else drawn from `output_tokens`;
- `trace`: the trace's lengths and arrival times, `offset_s = (timestamp - first) * time_scale /
  1000`; each hash id stands for one 512-token block of text, so requests that share ids share
  that prompt prefix on a real server, and `block_hashes` carries the ids to the simulator; ends
  with the trace;
- `shared_prefix`: group system prompts of P tokens plus a unique user message of
  `input_tokens` tokens; ends after groups × per-group when per-group is given.

Conversations are not a flat plan (a turn waits for the previous reply): `conversations_for(spec)`
builds the sessions; see `tokenpace.workload.conversations`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from tokenpace.errors import UsageError
from tokenpace.workload import extras
from tokenpace.workload.arrivals import arrival_offsets
from tokenpace.workload.conversations import Conversation, ConversationSpec, build_conversations
from tokenpace.workload.datasets import TRACE_BLOCK_TOKENS, Dataset, messages_text
from tokenpace.workload.lengths import LengthSpec
from tokenpace.workload.prompts import PromptMaker, synthetic_prompt
from tokenpace.workload.shared_prefix import SharedPrefixSpec
from tokenpace.workload.tokenizer import Tokenizer

Prompt = str | list[dict[str, Any]]  # text, or chat messages (the client sends either)


@dataclass(frozen=True, slots=True)
class PlannedRequest:
    index: int
    prompt: Prompt
    input_tokens: int  # requested (approximate without a tokenizer)
    output_tokens: int  # sent as max_tokens
    offset_s: float | None  # open loop: intended send time from the run's start; None: closed loop
    prefix_group: int | None = None  # shared-prefix workloads: the group whose prefix it starts with
    prefix_tokens: int = 0  # ...and that prefix's length (included in input_tokens)
    block_hashes: tuple[int, ...] | None = None  # traces: one id per 512-token block of the prompt
    extra_body: dict[str, Any] | None = None  # fields merged into this request's body


@dataclass(frozen=True)
class WorkloadSpec:
    input_tokens: LengthSpec
    output_tokens: LengthSpec
    seed: int = 0
    rate: float | None = None  # None: closed loop (a trace brings its own arrival times)
    arrival: str = "poisson"
    burstiness: float = 1.0
    api: str = "chat"  # "completions" flattens chat messages into one text
    tokenizer: Tokenizer | None = None
    dataset: Dataset | None = None
    trace: Dataset | None = None
    time_scale: float = 1.0
    shared_prefix: SharedPrefixSpec | None = None
    conversations: ConversationSpec | None = None
    reasoning_effort: str | None = None
    tools: int = 0

    @property
    def open_loop(self) -> bool:
        return self.rate is not None or self.trace is not None

    @property
    def prompt_maker(self) -> PromptMaker:
        return PromptMaker(self.tokenizer)

    @property
    def input_length_source(self) -> str:
        """How input lengths were counted, for reports."""
        return self.prompt_maker.source

    @property
    def finite_requests(self) -> int | None:
        """How many requests the plan holds before it ends; None: endless."""
        if self.dataset is not None:
            return len(self.dataset.entries)
        if self.trace is not None:
            return len(self.trace.entries)
        if self.shared_prefix is not None:
            return self.shared_prefix.total
        if self.conversations is not None:
            return self.conversations.total_requests
        return None


class _LengthsOnly:
    """A prompt maker for targets that read only lengths (the simulator): generated text is left
    empty, which was half of a simulation's time; counts of given text stay exact. The lengths and
    every other draw are unchanged (prompt text has random streams of its own)."""

    def __init__(self, maker) -> None:
        self.count = maker.count

    def text(self, rng: np.random.Generator, tokens: int) -> str:
        return ""

    def fit(self, text: str, tokens: int, rng: np.random.Generator) -> str:
        return ""


def plan_requests(spec: WorkloadSpec, *, block: int = 256, text: bool = True) -> Iterator[PlannedRequest]:
    """Yield planned requests; endless for synthetic workloads (the runner stops by count or time),
    finite for datasets, traces and bounded shared-prefix workloads. ``text=False``: generated
    prompts are left empty (for the simulator, which reads only lengths)."""
    if spec.conversations is not None:
        raise UsageError("--conversations plans sessions, not a flat list of requests: "
                         "use tokenpace.workload.conversations_for")
    lengths_rng, prompts_rng, arrivals_rng, extra_rng = _streams(spec.seed)
    maker = spec.prompt_maker if text else _LengthsOnly(spec.prompt_maker)
    if spec.trace is not None:
        items = _trace_items(spec, maker, prompts_rng)
    elif spec.dataset is not None:
        items = _dataset_items(spec, maker, lengths_rng, block)
    elif spec.shared_prefix is not None:
        items = _shared_prefix_items(spec, maker, lengths_rng, prompts_rng, extra_rng, block)
    else:
        items = _synthetic_items(spec, maker, lengths_rng, prompts_rng, block)
    offsets = (arrival_offsets(spec.rate, spec.arrival, arrivals_rng, burstiness=spec.burstiness)
               if spec.rate and spec.trace is None else None)
    body = extras.extra_body(reasoning_effort=spec.reasoning_effort, tools=spec.tools, api=spec.api)
    for index, item in enumerate(items):
        prompt, n_in = item["prompt"], item["input_tokens"]
        if spec.tools:
            sentence = extras.tool_invitation(index, spec.tools)
            prompt, n_in = extras.with_invitation(prompt, sentence), n_in + maker.count(f"\n\n{sentence}")
        if spec.api == "completions" and not isinstance(prompt, str):
            prompt = messages_text(prompt)
        offset = item.get("offset_s")
        yield PlannedRequest(
            index=index, prompt=prompt, input_tokens=n_in, output_tokens=item["output_tokens"],
            offset_s=next(offsets) if offsets is not None else offset,
            prefix_group=item.get("prefix_group"), prefix_tokens=item.get("prefix_tokens", 0),
            block_hashes=item.get("block_hashes"), extra_body=body)


def planned_lengths(spec: WorkloadSpec, *, block: int = 256) -> Iterator[tuple[int, int, float | None]] | None:
    """A synthetic workload's requests as (input tokens, output tokens, arrival offset or None):
    ``plan_requests``' draws (the same seed, the same lengths and offsets) without prompts, dicts
    or ``PlannedRequest`` objects, for the simulator, which reads only lengths (20,000 requests:
    about 0.1 CPU-s less). None for any other workload: a dataset, a trace, shared prefixes,
    conversations, tools (whose invitation adds tokens)."""
    if spec.trace or spec.dataset or spec.shared_prefix or spec.conversations or spec.tools:
        return None
    lengths_rng, _, arrivals_rng, _ = _streams(spec.seed)
    pairs = _synthetic_lengths(spec, lengths_rng, block)
    if not spec.rate:
        return ((n_in, n_out, None) for n_in, n_out in pairs)
    offsets = arrival_offsets(spec.rate, spec.arrival, arrivals_rng, burstiness=spec.burstiness)
    return ((n_in, n_out, offset) for (n_in, n_out), offset in zip(pairs, offsets))


def _streams(seed: int) -> tuple[np.random.Generator, ...]:
    """The plan's four random streams (lengths, prompts, arrivals, extra): ``plan_requests`` and
    ``planned_lengths`` draw from the same ones, so their lengths and arrivals are the same."""
    return tuple(np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4))


def _synthetic_lengths(spec, lengths_rng, block) -> Iterator[tuple[int, int]]:
    while True:  # unchanged draws from the core's generator: same seed, same lengths
        ins = spec.input_tokens.sample(lengths_rng, block)
        outs = spec.output_tokens.sample(lengths_rng, block)
        yield from zip(ins.tolist(), outs.tolist())


def _synthetic_items(spec, maker, lengths_rng, prompts_rng, block) -> Iterator[dict]:
    for n_in, n_out in _synthetic_lengths(spec, lengths_rng, block):
        yield {"prompt": maker.text(prompts_rng, n_in), "input_tokens": n_in, "output_tokens": n_out}


def _dataset_items(spec, maker, lengths_rng, block) -> Iterator[dict]:
    drawn: list[int] = []
    for entry in spec.dataset.entries:
        prompt = list(entry.prompt) if isinstance(entry.prompt, tuple) else entry.prompt
        n_out = entry.output_tokens
        if n_out is None and entry.expected_output:
            n_out = maker.count(entry.expected_output) or None
        if n_out is None:
            if not drawn:
                drawn = spec.output_tokens.sample(lengths_rng, block).tolist()[::-1]
            n_out = drawn.pop()
        yield {"prompt": prompt, "input_tokens": max(maker.count(messages_text(prompt)), 1),
               "output_tokens": n_out}


def _trace_items(spec, maker, prompts_rng) -> Iterator[dict]:
    entries = spec.trace.entries
    t0 = min(e.timestamp_ms for e in entries)

    @lru_cache(maxsize=4096)
    def block_text(hash_id: int) -> str:  # the same id is the same text in every request
        return maker.text(np.random.default_rng([spec.seed, 0xB10C, hash_id & (2**63 - 1)]),
                          TRACE_BLOCK_TOKENS)

    for e in entries:
        n = e.input_tokens
        blocks = e.hash_ids[: -(-n // TRACE_BLOCK_TOKENS)]
        text = " ".join(block_text(h) for h in blocks)
        # Tokens beyond the hashed blocks are unique to the request; then cut to exactly n.
        text = maker.fit(text, n, prompts_rng) if text else maker.text(prompts_rng, n)
        yield {"prompt": text, "input_tokens": n, "output_tokens": e.output_tokens,
               "offset_s": (e.timestamp_ms - t0) * spec.time_scale / 1000.0,
               "block_hashes": e.hash_ids or None}


def _shared_prefix_items(spec, maker, lengths_rng, prompts_rng, prefix_rng, block) -> Iterator[dict]:
    sp = spec.shared_prefix
    prefixes = [maker.text(prefix_rng, sp.prefix_tokens) for _ in range(sp.groups)]
    ins: list[int] = []
    outs: list[int] = []
    for group in sp.group_order():
        if not ins:
            ins = spec.input_tokens.sample(lengths_rng, block).tolist()[::-1]
            outs = spec.output_tokens.sample(lengths_rng, block).tolist()[::-1]
        n_suffix, n_out = ins.pop(), outs.pop()
        suffix = maker.text(prompts_rng, n_suffix)
        prompt: Prompt = [{"role": "system", "content": prefixes[group]},
                          {"role": "user", "content": suffix}]
        yield {"prompt": prompt, "input_tokens": sp.prefix_tokens + n_suffix, "output_tokens": n_out,
               "prefix_group": group, "prefix_tokens": sp.prefix_tokens}


def conversations_for(spec: WorkloadSpec) -> list[Conversation]:
    """The sessions of a `--conversations` workload, with the spec's lengths, seed, arrivals and
    reasoning/tools body fields."""
    if spec.conversations is None:
        raise ValueError("the workload has no conversations")
    if spec.tools:
        raise UsageError("--tools with --conversations is not supported yet")
    return build_conversations(spec.conversations, spec.input_tokens, spec.output_tokens, seed=spec.seed,
                               maker=spec.prompt_maker, rate=spec.rate, arrival=spec.arrival,
                               burstiness=spec.burstiness,
                               extra_body=extras.extra_body(reasoning_effort=spec.reasoning_effort, tools=0,
                                                           api=spec.api))


def engine_block_hashes(planned: PlannedRequest, block_tokens: int) -> tuple[int, ...] | None:
    """A trace request's block ids at an engine's KV block size (the simulator's
    `prompt_block_hashes`): one id per full engine block inside the trace's 512-token blocks."""
    return trace_block_hashes(planned.block_hashes, planned.input_tokens, block_tokens)


def trace_block_hashes(hash_ids: tuple[int, ...] | list[int] | None, input_tokens: int,
                       block_tokens: int) -> tuple[int, ...] | None:
    """Trace ids (one per 512-token block) as ids of ``block_tokens``-token engine blocks. Trace ids
    already stand for their whole prefix, so (id, position in block) names a block."""
    if not hash_ids:
        return None
    per_trace_block = max(TRACE_BLOCK_TOKENS // block_tokens, 1)
    full = min(input_tokens // block_tokens, len(hash_ids) * per_trace_block)
    return tuple(hash((hash_ids[i // per_trace_block], i % per_trace_block)) for i in range(full))


__all__ = ["conversations_for", "engine_block_hashes", "trace_block_hashes", "PlannedRequest", "Prompt", "WorkloadSpec", "plan_requests", "planned_lengths", "synthetic_prompt"]

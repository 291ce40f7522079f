"""The engine steps a measured run went through, reconstructed from its records alone.

A continuous-batching engine (llama.cpp's server, vLLM, SGLang, the simulator) runs one step at a
time and, at the end of each, streams one chunk to every sequence that got a token. So the chunks
of all requests, sorted by arrival time, fall into bursts, one per step, separated by the step
time; the client adds only its reading jitter (well under a millisecond against steps of 10 ms or
more). A burst's members say what the step computed: a request's first chunk means its prompt
was prefilled in that step, a later chunk j means one decode with the prompt and j − 1 generated
tokens already in the KV cache. Its duration is the time since the previous burst when any member
was already decoding (the engine was busy), else since the latest of its members was sent (the
engine was idle; the HTTP path is then included, about a millisecond).

A burst is used only when it is unambiguous: every member's previous chunk is in the burst just
before (so a step that streamed nothing cannot hide in it); no request that may have reached the
engine before the step began is missing from it while the engine had room (the step may hold part
of its prompt: a token budget splits long prompts, and llama.cpp splits every prompt of a
sliding-window model to checkpoint its cache); no prompt in it may have reached the engine before
the step before began (part of it may have been computed there), unless every step since its send
streamed to the engine's limit of sequences (``max_num_seqs``: it was queued with no free slot, and
a prompt begins only in a slot); no request has two chunks in it
(the client read two steps at once); no request that was decoding across it is missing from it.
"May have reached the engine before a step began": sent before the step's start as the client
saw it (or at that very instant: the simulator's closed loop). Where prompts often take more than
one step from send to first token (llama.cpp's checkpoints), also sent up to a window (half the burst gap) after it: the engine takes
new requests after it has sent a step's results, so such a request may have joined the step.
A burst that holds two chunks of one request far apart is split into steps first: the gap threshold
follows the usual step, and a lone sequence's steps can be much shorter (``bursts.split_repeats``).
Each skipped burst is counted by reason, and the report says how many steps began between a
request's send and its first token (1 for an engine that computes a prompt in one step).

Each step that began on a busy engine also counts the requests sent during it (from its start,
included, to its end): on an engine whose HTTP threads share the compute core (llama-server pinned
to one core), taking a request in costs the step that runs meanwhile its host time
(``RooflineParams.arrival_s``). A step that began idle counts none: its duration runs from the
send that started it, so it holds that request's host time with the rest of its prompt's cost (and
a count there would be one for every such step, the same column as their fixed cost).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from tokenpace.errors import UsageError
from tokenpace.record import RequestRecord
from tokenpace.simulator.calibrate.bursts import ambiguous_bursts, split_repeats
from tokenpace.simulator.step import StepBatch

# Chunks closer together than this fraction of the shortest usual gap between one request's chunks
# (its 10th percentile) belong to the same step.
BURST_FRACTION = 0.35
# A request sent up to this fraction of that gap after a step began (as the client saw it) may still
# have joined the step: the client sees a step's chunks before the engine forms the next batch (it
# sends results, then takes new requests), and a request takes time to reach it.
ARRIVAL_FRACTION = 0.5
# Prompts count as computed in one step when at least this share of requests got their first token
# at the end of the first step that began after they were sent (the rest: sent just before a step
# began, but reached the engine just after).
ONE_STEP_SHARE = 0.75
_EXACT_CHUNK_SOURCES = ("chunk_usage", "simulated")


@dataclass(frozen=True, slots=True)
class ObservedStep:
    batch: StepBatch
    duration_s: float
    end_ns: int
    arrivals: int = 0  # requests sent during the step (its start included, its end not); 0 if it began idle

    @property
    def kind(self) -> str:
        """"prefill" (prompts only), "mixed" (prompts and decodes) or "decode"."""
        if not self.batch.prefill:
            return "decode"
        return "mixed" if self.batch.decode_context else "prefill"


@dataclass
class StepObservations:
    steps: list[ObservedStep]
    requests: int  # records whose chunks were used
    gap_threshold_ms: float
    skipped: dict[str, int] = field(default_factory=dict)  # reason → bursts
    prompt_steps: dict[int, int] = field(default_factory=dict)  # steps from send to first token → requests
    # Requests sent just after a step began (as the client saw it: a closed loop's next request):
    # how many still joined that step, and how many waited for the next.
    joins_after_start: tuple[int, int] = (0, 0)
    # Of those, the ones sent while another request that arrived during the step before waited to be
    # taken in: each send's delay after that step's end (seconds), joined the step or waited a step.
    join_offsets: tuple[tuple[float, ...], tuple[float, ...]] = ((), ())
    # The same for every such send, whether or not another request waited (``join_after="finish"``).
    join_offsets_any: tuple[tuple[float, ...], tuple[float, ...]] = ((), ())
    # Per burst of two or more chunks: (its last chunk − its first) / (chunks − 1), seconds: how far apart
    # the engine streams a step's sequences (``RooflineParams.stream_interval_s``).
    stream_spreads: tuple[float, ...] = ()
    # Per step in which one sequence ended and no request waited to be taken in: (how many chunks the
    # step streamed after that sequence's last, whether its client's next request joined the next
    # step). The engine's own order, not the client's clock, which the client's send delays.
    stream_places: tuple[tuple[int, bool], ...] = ()

    @property
    def stream_interval_s(self) -> float:
        """The median of ``stream_spreads`` (0 where no step streamed two sequences)."""
        return float(np.median(self.stream_spreads)) if self.stream_spreads else 0.0

    def describe(self) -> dict:
        kinds = Counter(s.kind for s in self.steps)
        decode = [s.batch.num_decode for s in self.steps if s.batch.num_decode]
        prompts = [n + c for s in self.steps for n, c in s.batch.prefill]
        contexts = [c for s in self.steps for c in s.batch.decode_context]
        return {
            "records": self.requests, "steps": len(self.steps),
            "prefill_steps": kinds["prefill"], "mixed_steps": kinds["mixed"], "decode_steps": kinds["decode"],
            "decode_batch_sizes": sorted(set(decode)),
            "prompt_tokens": [min(prompts), max(prompts)] if prompts else None,
            "decode_context_tokens": [min(contexts), max(contexts)] if contexts else None,
            "burst_gap_ms": round(self.gap_threshold_ms, 3),
            "skipped_bursts": dict(sorted(self.skipped.items())),
            "steps_from_send_to_first_token": {str(k): n for k, n in self.prompt_steps.items()},
            "sent_just_after_a_step_began": {"joined_it": self.joins_after_start[0],
                                             "waited_for_the_next": self.joins_after_start[1]},
            "stream_interval_ms": round(self.stream_interval_s * 1e3, 4),
        }


@dataclass(slots=True)
class _Stream:
    sent_ns: int
    prompt: int | None
    cached: int
    chunk_ns: list[int]


def observe_steps(records: Iterable[RequestRecord], *, max_batched_tokens: int | None = None,
                  max_num_seqs: int | None = None) -> StepObservations:
    """Every unambiguous engine step of the run (see the module docstring). ``max_batched_tokens``:
    the engine's token budget per step (a longer prompt is split over steps, so the step that ends
    it did not compute it all); ``max_num_seqs``: its limit on running sequences (a prompt that
    waited while the limit was reached was queued, not split). Unknown limits are not assumed."""
    streams = _streams(records)
    if not streams:
        raise UsageError("no streamed request with tokens in the run: nothing to calibrate from "
                         "(calibration needs a streaming run)")
    t = np.concatenate([np.asarray(s.chunk_ns, dtype=np.int64) for s in streams])
    sid = np.concatenate([np.full(len(s.chunk_ns), i) for i, s in enumerate(streams)])
    pos = np.concatenate([np.arange(len(s.chunk_ns)) for s in streams])
    order = np.argsort(t, kind="stable")
    t, sid, pos = t[order], sid[order], pos[order]

    gaps = np.concatenate([np.diff(np.asarray(s.chunk_ns, dtype=np.int64)) for s in streams])
    gaps = gaps[gaps > 0]
    threshold = BURST_FRACTION * float(np.percentile(gaps, 10)) if len(gaps) else 1e6
    burst = split_repeats(t, sid, np.concatenate([[0], np.cumsum(np.diff(t) > threshold)]))  # burst of each chunk
    first = np.flatnonzero(np.diff(np.concatenate([[-1], burst])))  # first chunk of each burst
    bursts = [list(zip(sid[lo:hi].tolist(), pos[lo:hi].tolist()))
              for lo, hi in zip(first, np.append(first[1:], len(t)))]
    end_ns = t[first].tolist()  # the earliest chunk of a burst: the least delayed by the client
    last = np.append(first[1:], len(t)) - 1
    many = last > first
    spreads = (t[last[many]] - t[first[many]]) / (last[many] - first[many]) / 1e9
    chunk_burst: list[list[int]] = [[0] * len(s.chunk_ns) for s in streams]
    for b, members in enumerate(bursts):
        for s, j in members:
            chunk_burst[s][j] = b

    skipped: Counter[str] = Counter()
    run = _Run(streams, bursts, end_ns, chunk_burst, ARRIVAL_FRACTION * threshold, max_batched_tokens,
               max_num_seqs, skipped)
    steps = [step for b in range(len(bursts)) if (step := run.step(b)) is not None]
    return StepObservations(steps=steps, requests=len(streams), gap_threshold_ms=threshold / 1e6,
                            skipped=dict(skipped), prompt_steps=run.prompt_steps(),
                            joins_after_start=run.joins_after_start(ARRIVAL_FRACTION * threshold),
                            join_offsets=run.join_offsets(ARRIVAL_FRACTION * threshold),
                            join_offsets_any=run.join_offsets(ARRIVAL_FRACTION * threshold, waiting_only=False),
                            stream_spreads=tuple(spreads.tolist()),
                            stream_places=run.stream_places(ARRIVAL_FRACTION * threshold, t))


def _streams(records: Iterable[RequestRecord]) -> list[_Stream]:
    """Every request that reached the engine and streamed tokens, warmup and failures included
    (they were in the batches too). One chunk is one step, except where exact per-chunk counts say
    a chunk carried several tokens (speculative decoding, a server that batches chunks)."""
    out, multi, exact = [], 0, 0
    for r in records:
        if not r.chunk_ns or r.sent_ns is None or r.retried or not r.stream:
            continue
        if r.chunk_tokens_source in _EXACT_CHUNK_SOURCES and r.chunk_tokens:
            exact += len(r.chunk_tokens)
            multi += sum(n > 1 for n in r.chunk_tokens)
        prompt = r.prompt_tokens if r.prompt_tokens is not None else r.requested_input_tokens
        out.append(_Stream(r.sent_ns, prompt, r.cached_prompt_tokens or 0, list(r.chunk_ns)))
    if exact and multi > 0.1 * exact:
        raise UsageError(f"{multi} of {exact} chunks carry several tokens (speculative decoding, or a "
                         "server that batches chunks): engine steps cannot be told apart")
    return out


class _Run:
    """The bursts of one run, and the judgement of each: an ObservedStep, or a reason to skip it."""

    def __init__(self, streams, bursts, end_ns, chunk_burst, window_ns, max_batched_tokens, max_num_seqs,
                 skipped: Counter) -> None:
        self.streams, self.bursts, self.end_ns, self.chunk_burst = streams, bursts, end_ns, chunk_burst
        self.max_batched_tokens, self.max_num_seqs, self.skipped = max_batched_tokens, max_num_seqs, skipped
        self.bad = ambiguous_bursts(chunk_burst)
        self.sizes = np.array([len(m) for m in bursts])
        self.ends_array = np.array(end_ns, dtype=np.int64)
        self.start_ns = [self._start(b) for b in range(len(bursts))]
        self.sent = np.array([s.sent_ns for s in streams], dtype=np.int64)
        self.first_burst = np.array([cb[0] for cb in chunk_burst])
        # Per step b: a request sent while it ran (after the burst before it, before its own) got its
        # first token at the end of the next step: it waited to be taken in after step b.
        during = np.searchsorted(self.ends_array, self.sent, side="left")
        inside = (during > 0) & (during < len(bursts))
        inside[inside] &= self.sent[inside] < self.ends_array[during[inside]]
        self.waited_in = np.zeros(len(bursts), dtype=bool)
        self.waited_in[during[inside & (self.first_burst == during + 1)]] = True
        # Where one step after a request's send brings its first token (the mode), the step of the
        # first token computed the whole prompt: a request sent just after a step began, as the
        # client saw it, either joined that step (and its first token ends it) or did not. Where
        # it takes more, an engine splits prompts over steps, and a request sent up to the window
        # after a step began may have part of its prompt in it.
        counts = self.prompt_steps()
        self.one_step_prompts = counts.get(1, 0) >= ONE_STEP_SHARE * sum(counts.values())
        self.window_ns = 0.0 if self.one_step_prompts else window_ns

    def _start(self, b: int) -> int | None:
        """When step b began: when the one before ended if a member was decoding (the engine was
        busy), else when the last of its prompts arrived, if the engine was idle by then."""
        members = self.bursts[b]
        prev = self.end_ns[b - 1] if b else None
        if any(j for _, j in members):
            return prev
        sent = max(self.streams[s].sent_ns for s, _ in members)
        return sent if prev is None else max(sent, prev)

    def step(self, b: int) -> ObservedStep | None:
        reason = self._reason_to_skip(b)
        if reason:
            self.skipped[reason] += 1
            return None
        prefill, decode = [], []
        for s, j in self.bursts[b]:
            st = self.streams[s]
            if j == 0:
                prefill.append((st.prompt - st.cached, st.cached))
            else:
                decode.append(st.prompt + j - 1)  # the prompt and the j - 1 earlier tokens are cached
        end, start = self.end_ns[b], self.start_ns[b]
        # Busy: a member was decoding, or every prompt was sent before the step before ended (a send
        # at that very instant, as the simulator's closed loop makes, found the engine idle).
        members = self.bursts[b]
        busy = any(j for _, j in members) or (
            b > 0 and max(self.streams[s].sent_ns for s, _ in members) < self.end_ns[b - 1])
        # Not the step's own prompts: a request taken in before its prefill began (a send at the
        # very instant the step began, as the simulator's closed loop makes) cost no step of others.
        arrivals = 0
        if busy:
            during = (self.sent >= start) & (self.sent < end)
            arrivals = int(np.count_nonzero(during)) - sum(1 for s, j in members if j == 0 and during[s])
        return ObservedStep(batch=StepBatch(prefill=tuple(prefill), decode_context=tuple(sorted(decode))),
                            duration_s=(end - start) / 1e9, end_ns=end, arrivals=arrivals)

    def _reason_to_skip(self, b: int) -> str | None:
        if b in self.bad:
            return self.bad[b]
        members, start = self.bursts[b], self.start_ns[b]
        if start is None or self.end_ns[b] <= start:
            return "no start seen"
        for s, j in members:
            st = self.streams[s]
            if st.prompt is None:
                return "prompt length unknown"
            if j == 0:
                if self.max_batched_tokens is not None and st.prompt - st.cached > self.max_batched_tokens:
                    return "prompt split over steps"
                if b and self.start_ns[b - 1] is not None and st.sent_ns <= self.start_ns[b - 1] + self.window_ns \
                        and not self._queued_behind_full(st.sent_ns, b):
                    return "prompt waited a step (queued, or split over steps)"
            elif self.chunk_burst[s][j - 1] != b - 1 or b - 1 in self.bad:
                return "previous step not seen"
        waiting = (self.sent <= start + self.window_ns) & (self.first_burst > b)
        if waiting.any() and (self.max_num_seqs is None or len(members) < self.max_num_seqs):
            return "a waiting prompt may be partly in it"
        return None

    def _queued_behind_full(self, sent_ns: int, b: int) -> bool:
        """True when every step that ended between ``sent_ns`` and step b streamed to
        ``max_num_seqs`` sequences: the engine had no free slot, so a prompt sent then could not
        begin before step b (the last of them freed the slot)."""
        if self.max_num_seqs is None:
            return False
        k0 = int(np.searchsorted(self.ends_array, sent_ns, side="right"))
        return k0 < b and bool((self.sizes[k0:b] >= self.max_num_seqs).all())

    def _sends_after_ends(self, window_ns: float):
        """The requests sent within ``window_ns`` after a busy step began (at or after the end of the
        burst before it): (request, that burst, the burst of its first token)."""
        ends = self.ends_array
        for q, st in enumerate(self.streams):
            b = int(np.searchsorted(ends, st.sent_ns, side="right")) - 1  # the last burst seen before the send
            if b < 0 or b + 1 >= len(self.bursts) or st.sent_ns - ends[b] > window_ns:
                continue
            if self.start_ns[b + 1] != self.end_ns[b]:  # the engine was idle: nothing to join
                continue
            yield q, b, int(self.first_burst[q])

    def stream_places(self, window_ns: float, t: np.ndarray) -> tuple[tuple[int, bool], ...]:
        """``StepObservations.stream_places``: per step in which exactly one sequence ended, the chunks
        streamed after its last and whether the first of ``joins_after_start``'s sends after that chunk
        (its closed-loop client's next request) joined the next step (False: waited a step). Steps
        during which a request was sent that the next step took in are left out: that one's setup
        holds the batch back (the join window), whatever the place. ``t``: every chunk's time, in
        the order the bursts list them."""
        out = []
        sends = sorted(self._sends_after_ends(window_ns), key=lambda x: self.sent[x[0]])
        offset = np.concatenate([[0], np.cumsum(self.sizes)])
        for q, b, k in sends:
            members = self.bursts[b]
            ends = [i for i, (s, j) in enumerate(members) if j == len(self.streams[s].chunk_ns) - 1]
            if len(ends) != 1 or k not in (b + 1, b + 2) or (out and out[-1][0] == b):
                continue
            if self.sent[q] < t[offset[b] + ends[0]]:
                continue  # sent before the sequence ended: not its client's next request
            if self.waited_in[b]:
                continue  # another request waited to be taken in
            out.append((b, len(members) - 1 - ends[0], k == b + 1))
        return tuple((a, j) for _, a, j in out)

    def joins_after_start(self, window_ns: float) -> tuple[int, int]:
        """Of the requests sent within ``window_ns`` after a busy step began (at or after the end of
        the burst before it), how many got their first token at its end, and how many one step later."""
        joined = waited = 0
        for _, b, k in self._sends_after_ends(window_ns):
            joined += k == b + 1
            waited += k == b + 2
        return joined, waited

    def join_offsets(self, window_ns: float, waiting_only: bool = True) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """``joins_after_start``'s sends made while a request sent during the step before (after it
        began, before it ended) got its first token at the end of the next step, so was waiting to
        be taken in: each one's delay after the burst before it, in seconds, as (joined the step,
        waited for the next). An engine that sets up new requests between steps keeps taking them
        in meanwhile: the delays that still joined bound its join window. ``waiting_only=False``:
        every such send, whether or not a request was waiting."""
        joined: list[float] = []
        waited: list[float] = []
        for q, b, k in self._sends_after_ends(window_ns):
            if b < 1:
                continue
            if waiting_only and not self.waited_in[b]:
                continue  # no request was waiting to be taken in
            delay = (self.streams[q].sent_ns - self.end_ns[b]) / 1e9
            if k == b + 1:
                joined.append(delay)
            elif k == b + 2:
                waited.append(delay)
        return tuple(joined), tuple(waited)

    def prompt_steps(self) -> dict[int, int]:
        """How many steps began between a request's send and its first token (inclusive), over the
        requests not queued behind a full engine: 1 where an engine computes a prompt in one step
        (the simulator, vLLM); more where it splits prompts (llama.cpp's context checkpoints)."""
        starts = np.array([s if s is not None else -1 for s in self.start_ns], dtype=np.int64)
        counts: Counter[int] = Counter()
        for q, st in enumerate(self.streams):
            k = int(self.first_burst[q])
            if self.start_ns[k] is None or self.start_ns[k] < st.sent_ns:
                continue
            n = int(((starts[: k + 1] >= st.sent_ns)).sum())
            full = self.max_num_seqs is not None and any(
                len(self.bursts[b]) >= self.max_num_seqs for b in range(k) if starts[b] >= st.sent_ns)
            if not full:
                counts[n] += 1
        return dict(sorted(counts.items()))

"""Turning a simulated sequence into the same ``RequestRecord`` a measured run produces."""

from __future__ import annotations

from tokenpace.record import RequestRecord
from tokenpace.simulator.load import to_ns
from tokenpace.simulator.sequence import Sequence


def _base(seq: Sequence) -> RequestRecord:
    """``scheduled``: the planned arrival (open loop) or the issue time (closed loop); ``sent``: when
    the request reached the engine, later than scheduled only under an open loop's in-flight cap."""
    planned = seq.request.arrival_s
    return RequestRecord(
        request_id=f"sim-{seq.index:06d}",
        index=seq.index,
        api="chat",
        stream=True,
        requested_input_tokens=seq.prompt_len,
        requested_output_tokens=seq.output_len,
        scheduled_ns=seq.arrival_ns if planned is None else to_ns(planned),
        sent_ns=seq.arrival_ns,
        session=seq.request.session,
        turn=seq.request.turn,
    )


def ones(n: int, shared: dict[int, list[int]] | None) -> list[int]:
    """``[1] * n``: one token per chunk. ``shared``: one run's lists by length, handed out to every
    record of that length (a 100,000-request run then holds a few lists instead of 100,000; records
    are read, never changed in place: a cut makes a new list)."""
    if shared is None:
        return [1] * n
    ones_ = shared.get(n)
    if ones_ is None:
        ones_ = shared[n] = [1] * n
    return ones_


def completed_record(seq: Sequence, shared: dict[int, list[int]] | None = None) -> RequestRecord:
    """Virtual timestamps: the stream's first token is the end of the step that finished the prompt,
    and every step that produced tokens for it is one chunk; the stream closes with its last token.
    ``shared``: see ``ones``."""
    rec = _base(seq)
    rec.first_token_ns = rec.first_content_ns = seq.first_token_ns
    rec.last_token_ns = rec.done_ns = seq.chunk_ns[-1]
    rec.chunk_ns = seq.chunk_ns
    rec.chunk_tokens = seq.chunk_tokens if seq.chunk_tokens is not None else ones(len(seq.chunk_ns), shared)
    rec.chunk_tokens_source = "simulated"
    rec.prompt_tokens = seq.prompt_len
    rec.prompt_tokens_source = "simulated"
    rec.cached_prompt_tokens = seq.cached_prompt_tokens or 0
    rec.output_tokens = seq.generated
    rec.output_tokens_source = "simulated"
    rec.http_status = 200
    rec.status = "ok"
    rec.finish_reason = "length"
    return rec


_TIMEOUT_MESSAGES = {"total_timeout": "no complete response within timeout_s",
                     "ttft_timeout": "no token within ttft_timeout_s"}


def timed_out_record(seq: Sequence, t_ns: int, kind: str) -> RequestRecord:
    """The client gave up at ``t_ns`` (virtual time): the chunks delivered until then, status timeout."""
    rec = _base(seq)
    if seq.chunk_ns:
        rec.first_token_ns = rec.first_content_ns = seq.first_token_ns
        rec.last_token_ns = seq.chunk_ns[-1]
    rec.chunk_ns = list(seq.chunk_ns)
    rec.chunk_tokens = seq.chunk_tokens if seq.chunk_tokens is not None else [1] * len(seq.chunk_ns)
    rec.chunk_tokens_source = "simulated"
    rec.output_tokens = sum(rec.chunk_tokens)
    rec.done_ns = t_ns
    rec.status = "timeout"
    rec.error_kind = kind
    rec.error_message = _TIMEOUT_MESSAGES[kind]
    return rec


def failed_record(seq: Sequence, t_ns: int, kind: str, message: str) -> RequestRecord:
    rec = _base(seq)
    rec.done_ns = t_ns
    rec.http_status = 400 if kind == "exceeds_kv_capacity" else None
    rec.status = "error"
    rec.error_kind = kind
    rec.error_message = message
    return rec

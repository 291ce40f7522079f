"""The per-request record: the one type that measured and simulated runs both produce.

Everything downstream (metrics, SLOs, reports) reads only these records, never asks where they
came from. Timestamps are integers in nanoseconds on a monotonic clock (``time.monotonic_ns()`` for
measured runs, virtual time for simulated ones); the client only stamps them, and all arithmetic on
them lives in pure functions in ``tokenpace.metrics``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

Status = Literal["ok", "error", "timeout", "cancelled"]
STATUSES: tuple[Status, ...] = ("ok", "error", "timeout", "cancelled")

# Where a token count came from. "usage": the server's final usage object; "chunk_usage": per-chunk
# usage (vLLM continuous_usage_stats); "estimate": the client's own estimate; "simulated": the
# simulator's exact count; None: unknown.
CountSource = Literal["usage", "chunk_usage", "estimate", "simulated"]

# How the tokens carried by each chunk were found. "chunk_usage": differences of per-chunk usage
# (exact); "apportioned": the server's total split over chunks in proportion to their text length;
# "one_per_chunk": no count from the server, one token per token-carrying chunk; "simulated": exact.
ChunkTokenSource = Literal["chunk_usage", "apportioned", "one_per_chunk", "simulated"]


@dataclass(slots=True)
class RequestRecord:
    request_id: str  # unique; sent as X-Request-ID so client and server views can be joined
    index: int  # position in the load schedule (0-based, warmup included)
    api: str = "chat"  # "chat", "completions", "responses" or "anthropic"
    stream: bool = True
    warmup: bool = False  # excluded from metrics
    model: str | None = None  # the model asked for, when the record's source knows it (instrumentation, proxy)

    # What was asked for.
    requested_input_tokens: int | None = None
    requested_output_tokens: int | None = None
    prefix_group: int | None = None  # shared-prefix workloads: the group whose prefix it starts with
    session: int | None = None  # multi-turn conversations: the session...
    turn: int | None = None  # ...and the turn number in it (from 1)

    # Monotonic timestamps, ns. See REFERENCE section 1 for their exact meaning.
    scheduled_ns: int | None = None  # when the load schedule intended to send it
    sent_ns: int | None = None  # when the client actually began the request
    first_token_ns: int | None = None  # first chunk carrying any generated token
    first_content_ns: int | None = None  # first chunk carrying visible content
    first_reasoning_ns: int | None = None  # first chunk carrying reasoning
    first_tool_call_ns: int | None = None  # first chunk carrying a tool-call delta
    last_token_ns: int | None = None  # last chunk carrying a generated token
    done_ns: int | None = None  # stream closed ([DONE] or EOF), or the failure was seen

    # Every token-carrying chunk: its arrival time and how many tokens it carried.
    chunk_ns: list[int] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    chunk_tokens_source: ChunkTokenSource | None = None

    # Token counts, each with its source.
    prompt_tokens: int | None = None
    prompt_tokens_source: CountSource | None = None
    cached_prompt_tokens: int | None = None  # included in prompt_tokens (OpenAI convention)
    # Prompt tokens written to the cache (Anthropic's cache_creation_input_tokens), also included
    # in prompt_tokens; never counted in cached_prompt_tokens. None: the API does not report it.
    cache_write_prompt_tokens: int | None = None
    output_tokens: int | None = None
    output_tokens_source: CountSource | None = None
    reasoning_tokens: int | None = None  # included in output_tokens
    # The client's own output count (token-carrying chunks, or a tokenizer's count when one is
    # given), kept beside the server's so that a mismatch can be reported.
    output_tokens_client: int | None = None

    # Outcome.
    http_status: int | None = None
    status: Status = "ok"
    error_kind: str | None = None  # e.g. "http_429", "connect", "reset_mid_stream", "idle_timeout"
    error_message: str | None = None
    attempt: int = 1  # 1 for the first try; retries of the same request count up
    retried: bool = False  # this attempt failed and was retried: kept on disk, not measured
    retry_after_s: float | None = None  # the server's Retry-After, when it sent one
    finish_reason: str | None = None
    # The server's own timing of this request, when its response carries one (llama.cpp's
    # `timings`: prompt_n, prompt_ms, predicted_n, predicted_ms, ...; numbers only, as sent).
    server_timing: dict[str, float] | None = None
    # A salted hash chain of the prompt's blocks, never its text (advise/hashchain.py): written by the
    # proxy (--prompt-hashes) and the instrumentation (prompt_hashes=) when asked, read by `workload reuse`.
    prompt_hash_chain: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RequestRecord:
        """Build a record from a dict, ignoring keys this version does not know."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @property
    def measured(self) -> bool:
        """True when the record counts towards metrics (not warmup, and actually sent)."""
        return not self.warmup and not self.retried and self.sent_ns is not None


RECORD_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(RequestRecord))

"""What one response has shown so far, and how it becomes the record's final fields.

``Progress.add`` runs once per chunk (hot path: a few comparisons and appends). ``finish_record``
runs once per request, on success, failure or cancellation alike, so a partial stream keeps its
latencies and token counts. It is two halves: ``finish_outcome`` (status, error, ``done_ns``) and
``finish_tokens`` (the counts), which the bench client's ``send_deferred`` runs later, off the loop
turn that read the stream's end.
"""

from __future__ import annotations

from typing import Any

from tokenpace.record import RequestRecord
from tokenpace.redact import redact

from .chunks import ChunkInfo
from .tokens import split_chunk_tokens

_ERROR_MESSAGE_CHARS = 300


class Progress:
    __slots__ = (
        "streaming",
        "response_seen",
        "saw_done",
        "done_ns",
        "last_read_ns",
        "weights",
        "usage_marks",
        "last_usage",
        "status",
        "error_kind",
        "error_message",
        "expected_tokens",
        "usage_note",
        "secrets",
    )

    def __init__(self, streaming: bool = True, expected_tokens: int | None = None,
                 secrets: tuple[str, ...] = ()) -> None:
        self.streaming = streaming
        self.secrets = secrets  # masked in every message (the API key)
        # The output the server promised (max_tokens with ignore_eos): a stream that ends short of it
        # with no finish_reason and no [DONE] was cut, not finished.
        self.expected_tokens = expected_tokens
        self.usage_note: str | None = None  # usage the server sent that cannot be true, and was ignored
        self.response_seen = False  # the status line and headers arrived
        self.saw_done = False  # [DONE], or a complete non-streaming body
        self.done_ns: int | None = None
        self.last_read_ns = 0  # when bytes last arrived (the idle timeout counts from it)
        self.weights: list[int] = []  # text length of each token-carrying chunk
        self.usage_marks: list[tuple[int, int]] = []  # (token chunks so far, cumulative tokens)
        self.last_usage: dict[str, Any] | None = None
        self.status = "ok"
        self.error_kind: str | None = None
        self.error_message: str | None = None

    def add(self, record: RequestRecord, info: ChunkInfo, now_ns: int) -> None:
        """Account for one chunk that arrived at ``now_ns``."""
        if info.is_token:
            if record.first_token_ns is None:
                record.first_token_ns = now_ns
            if info.content_chars and record.first_content_ns is None:
                record.first_content_ns = now_ns
            if info.reasoning_chars and record.first_reasoning_ns is None:
                record.first_reasoning_ns = now_ns
            if info.has_tool_call and record.first_tool_call_ns is None:
                record.first_tool_call_ns = now_ns
            record.last_token_ns = now_ns
            record.chunk_ns.append(now_ns)
            self.weights.append(info.content_chars + info.reasoning_chars + info.tool_call_chars)
        usage = info.usage
        if usage is not None:
            if self.last_usage is None or "prompt_tokens" in usage:  # chat: every usage is whole
                self.last_usage = usage
            else:  # Anthropic sends the prompt's counts first and the output's last: keep both
                self.last_usage = {**self.last_usage, **usage}
            completion_tokens = usage.get("completion_tokens")
            if type(completion_tokens) is int:
                if completion_tokens >= 0:
                    self.usage_marks.append((len(self.weights), completion_tokens))
                else:
                    self.usage_note = f"ignored impossible usage: completion_tokens={completion_tokens}"
        if info.finish_reason is not None:
            record.finish_reason = info.finish_reason

    def add_text(self, record: RequestRecord, chars: int, now_ns: int) -> None:
        """``add`` for the common chunk, text only (``chars`` > 0, nothing else): after the first
        text, all it changes is the last token's time and the per-token lists."""
        if record.first_content_ns is None:
            self.add(record, ChunkInfo(chars), now_ns)
            return
        record.last_token_ns = now_ns
        record.chunk_ns.append(now_ns)
        self.weights.append(chars)

    def tokens_so_far(self) -> int:
        """Output tokens received: the server's latest cumulative count, else one per token chunk."""
        return max(cumulative for _, cumulative in self.usage_marks) if self.usage_marks else len(self.weights)

    def fail(self, status: str, error_kind: str | None, message: str | None, now_ns: int) -> None:
        """Record the outcome of a failure seen at ``now_ns``. The first one wins, and nothing after
        [DONE] turns a complete response into a failed one."""
        if self.saw_done or self.status != "ok":
            return
        self.status = status
        self.error_kind = error_kind
        # The one place a server's text enters the record: secrets out first, then cut to one short line.
        self.error_message = None if message is None else truncate(one_line(redact(message, self.secrets)))
        self.done_ns = now_ns


def finish_record(record: RequestRecord, progress: Progress) -> None:
    """Write outcome, token counts and their sources into ``record`` (once per request)."""
    finish_outcome(record, progress)
    finish_tokens(record, progress)


def finish_outcome(record: RequestRecord, progress: Progress) -> None:
    """The first half of ``finish_record``: status, error kind and message, ``done_ns`` (a few
    assignments, for a caller that must judge the outcome at once and count the tokens later)."""
    record.status = progress.status  # type: ignore[assignment]
    record.error_kind = progress.error_kind
    record.error_message = progress.error_message
    record.done_ns = progress.done_ns


def finish_tokens(record: RequestRecord, progress: Progress) -> None:
    """The second half of ``finish_record``, after ``finish_outcome``: token counts per chunk and in
    all, their sources, the usage's prompt and reasoning counts (the split over the chunks is most of
    ``finish_record``'s time)."""
    weights = progress.weights
    marks = progress.usage_marks
    complete = progress.saw_done or record.finish_reason is not None

    if weights:
        chunk_tokens, source = split_chunk_tokens(weights, marks)
        record.chunk_tokens = chunk_tokens
        record.chunk_tokens_source = source  # type: ignore[assignment]
    if progress.streaming:
        record.output_tokens_client = len(weights)

    if marks:
        server_total = max(cumulative for _, cumulative in marks)
        unreported_chunks = len(weights) - marks[-1][0]  # token chunks after the last usage
        if unreported_chunks > 0:
            record.output_tokens = sum(record.chunk_tokens)
            record.output_tokens_source = "estimate"
        else:
            record.output_tokens = server_total
            record.output_tokens_source = "usage" if complete else "chunk_usage"
    elif weights or progress.status == "ok":
        record.output_tokens = len(weights)
        record.output_tokens_source = "estimate"

    usage = progress.last_usage
    if usage is not None:
        _read_prompt_usage(record, progress, usage, "usage" if complete else "chunk_usage")
        completion_details = usage.get("completion_tokens_details")
        reasoning = completion_details.get("reasoning_tokens") if type(completion_details) is dict else None
        if type(reasoning) is int and reasoning >= 0:
            record.reasoning_tokens = reasoning
    if progress.usage_note is not None and record.error_message is None:
        record.error_message = progress.usage_note  # an ok record says why its usage was not used


def _read_prompt_usage(record: RequestRecord, progress: Progress, usage: dict[str, Any], source: str) -> None:
    """The prompt counts of the server's usage; an impossible one (negative, cached above the total)
    is treated as absent: the client's count stands in, labelled "estimate", and the record says so."""
    prompt_tokens = usage.get("prompt_tokens")
    if prompt_tokens is None:
        return
    if type(prompt_tokens) is not int or prompt_tokens < 0:
        progress.usage_note = f"ignored impossible usage: prompt_tokens={prompt_tokens!r}"
        if record.requested_input_tokens is not None:
            record.prompt_tokens = record.requested_input_tokens
            record.prompt_tokens_source = "estimate"
        return
    record.prompt_tokens = prompt_tokens
    record.prompt_tokens_source = source  # type: ignore[assignment]
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if type(details) is dict else None
    if type(cached) is int:
        if 0 <= cached <= prompt_tokens:
            record.cached_prompt_tokens = cached
        else:
            progress.usage_note = f"ignored impossible usage: cached_tokens={cached} of {prompt_tokens} prompt tokens"
    written = details.get("cache_write_tokens") if type(details) is dict else None  # Anthropic's only
    if type(written) is int:
        if 0 <= written <= prompt_tokens - (record.cached_prompt_tokens or 0):
            record.cache_write_prompt_tokens = written
        else:
            progress.usage_note = (f"ignored impossible usage: cache_creation_input_tokens={written} "
                                   f"of {prompt_tokens} prompt tokens")


def one_line(value: object) -> str:
    text = value if isinstance(value, str) else f"{type(value).__name__}: {value}"
    return " ".join(text.split())


def truncate(text: str) -> str:
    return text if len(text) <= _ERROR_MESSAGE_CHARS else text[: _ERROR_MESSAGE_CHARS - 3] + "..."

"""Hand-made records with times written in milliseconds, so tests read like timelines."""

from __future__ import annotations

from tokenpace.record import RequestRecord

MS = 1_000_000  # ns per ms


def ns(ms: float | None) -> int | None:
    return None if ms is None else round(ms * MS)


_FROM_CHUNKS = object()


def record(*, sent: float | None = 0.0, chunks: list[tuple[float, int]] = (), index: int = 0,
           scheduled: float | None = _FROM_CHUNKS, first_token: float | None = _FROM_CHUNKS,
           first_content: float | None = _FROM_CHUNKS, last_token: float | None = _FROM_CHUNKS,
           done: float | None = _FROM_CHUNKS, output_tokens: int | None = _FROM_CHUNKS,
           status: str = "ok", **fields) -> RequestRecord:
    """A record sent at ``sent`` ms whose token-carrying chunks arrive at ``chunks`` =
    [(arrival_ms, tokens), ...]. Stamps not given follow from the chunks: first_token and
    first_content at the first chunk, last_token at the last, done at last_token (or sent),
    scheduled at sent, output_tokens = their sum (source "usage")."""
    arrivals = [t for t, _ in chunks]
    tokens = [k for _, k in chunks]
    carrying = [t for t, k in chunks if k > 0]
    if first_token is _FROM_CHUNKS:
        first_token = carrying[0] if carrying else None
    if first_content is _FROM_CHUNKS:
        first_content = first_token
    if last_token is _FROM_CHUNKS:
        last_token = carrying[-1] if carrying else None
    if done is _FROM_CHUNKS:
        done = last_token if last_token is not None else sent
    if scheduled is _FROM_CHUNKS:
        scheduled = sent
    if output_tokens is _FROM_CHUNKS:
        output_tokens = sum(tokens) if chunks else None
    fields.setdefault("output_tokens_source", "usage" if output_tokens is not None else None)
    return RequestRecord(
        request_id=fields.pop("request_id", f"r{index}"), index=index,
        scheduled_ns=ns(scheduled), sent_ns=ns(sent), first_token_ns=ns(first_token),
        first_content_ns=ns(first_content), last_token_ns=ns(last_token), done_ns=ns(done),
        chunk_ns=[ns(t) for t in arrivals], chunk_tokens=tokens, output_tokens=output_tokens,
        status=status, **fields)


def steady(n: int, *, start: float = 0.0, every: float = 100.0, ttft: float = 50.0,
           tokens: int = 5, itl: float = 10.0, **fields) -> list[RequestRecord]:
    """``n`` ok requests sent every ``every`` ms, each TTFT ``ttft`` then one token per ``itl``."""
    records = []
    for i in range(n):
        sent = start + i * every
        chunks = [(sent + ttft + k * itl, 1) for k in range(tokens)]
        records.append(record(sent=sent, chunks=chunks, index=i, **fields))
    return records

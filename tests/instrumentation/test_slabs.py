"""The instrumented stream's slabs (``SlabProgress``) give the record ``Progress`` gives, at any
length: within one slab, at its edge, across several, with other chunks between the text, and when
the stream ends early."""

from __future__ import annotations

import openai  # noqa: F401 - skips the module without the SDK (conftest)
import pytest
from openai.types.chat import ChatCompletionChunk

from tokenpace.client.chunk_objects import classify_chunk_object, text_chars
from tokenpace.client.chunks import classify_chunk
from tokenpace.client.progress import Progress, finish_record
from tokenpace.instrumentation.call import RecordFactory
from tokenpace.instrumentation.replay import ListStream
from tokenpace.instrumentation.slabs import FIRST_SLAB, SLAB, SlabProgress
from tokenpace.instrumentation.streams import InstrumentedStream
from tokenpace.record import RequestRecord

BASE = {"id": "c", "created": 1, "model": "m", "object": "chat.completion.chunk"}
ROLE = {"choices": [{"index": 0, "delta": {"role": "assistant"}}]}
REASONING = {"choices": [{"index": 0, "delta": {"reasoning_content": "think"}}]}
TOOL = {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "{"}}]}}]}
FINISH = {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}
USAGE = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}}


def text(i: int) -> dict:
    return {"choices": [{"index": 0, "delta": {"content": "x" * (1 + i % 5)}}]}


def stream_of(texts: int, others_at: dict[int, dict] | None = None) -> list[dict]:
    """A role chunk, ``texts`` text chunks with other kinds before the given text positions, the end."""
    chunks = [ROLE]
    for i in range(texts):
        if others_at and i in others_at:
            chunks.append(others_at[i])
        chunks.append(text(i))
    return chunks + [FINISH, USAGE]


def both(chunks: list[dict]) -> tuple[RequestRecord, RequestRecord, Progress, Progress]:
    """The wrapper's per-chunk path with slabs (short path for text) and ``Progress.add`` alone."""
    slab, plain = RequestRecord(request_id="a", index=0), RequestRecord(request_id="a", index=0)
    p_slab, p_plain = SlabProgress(), Progress()
    for now, chunk in enumerate(chunks, start=1):
        obj = ChatCompletionChunk.model_validate({**BASE, **chunk})
        chars = text_chars(obj)
        if chars > 0:
            p_slab.add_text(slab, chars, now)
        else:
            p_slab.add(slab, classify_chunk_object(obj), now)
        p_plain.add(plain, classify_chunk(chunk), now)
    return slab, plain, p_slab, p_plain


@pytest.mark.parametrize("texts", [0, 1, 2, FIRST_SLAB, FIRST_SLAB + 1, FIRST_SLAB + 2, SLAB - 1, SLAB, SLAB + 1,
                                   FIRST_SLAB + SLAB + 1, FIRST_SLAB + SLAB + 2, 2 * SLAB + 7])
def test_slabs_make_the_record_progress_makes(texts):
    others = {texts // 3: REASONING, texts // 2: TOOL, texts - 1: REASONING} if texts > 2 else None
    slab, plain, p_slab, p_plain = both(stream_of(texts, others))
    assert p_slab.tokens_so_far() == p_plain.tokens_so_far()  # counted before the slabs are moved
    p_slab.spill(slab)
    assert p_slab.weights == p_plain.weights and slab.chunk_ns == plain.chunk_ns
    p_slab.saw_done = p_plain.saw_done = True
    finish_record(slab, p_slab)
    finish_record(plain, p_plain)
    assert slab == plain
    assert len(slab.chunk_ns) == texts + (3 if others else 0)


def test_tokens_so_far_counts_what_the_slabs_hold():
    slab, plain, p_slab, p_plain = both(stream_of(SLAB + 3)[:-2])  # no usage yet: counted by chunks
    assert p_slab.tokens_so_far() == p_plain.tokens_so_far() == SLAB + 3
    assert len(slab.chunk_ns) < SLAB + 3  # some are still in the slabs...
    p_slab.spill(slab)
    assert slab.chunk_ns == plain.chunk_ns  # ...until they are moved, in order


@pytest.mark.parametrize("read", [1, 2, 50, FIRST_SLAB + 1, FIRST_SLAB + SLAB + 1, SLAB + 40])
def test_a_stream_closed_early_keeps_every_chunk_it_read(read):
    """``close()`` part way: the record holds the stamps of exactly the text chunks read, the last
    one's time as ``last_token_ns``, and the cancelled outcome."""
    records: list[RequestRecord] = []
    objs = [ChatCompletionChunk.model_validate({**BASE, **c}) for c in stream_of(2 * SLAB)]
    inner = ListStream(objs)
    stream = InstrumentedStream(inner, RecordFactory((records.append,)).start("chat", True))
    for _ in range(read + 1):  # the role chunk, then `read` text chunks
        next(stream)
    stream.close()
    assert inner.closed  # the SDK's stream is closed too
    [record] = records
    assert (record.status, record.error_kind) == ("cancelled", "closed_early")
    assert len(record.chunk_ns) == len(record.chunk_tokens) == record.output_tokens_client == read
    assert record.chunk_ns == sorted(record.chunk_ns) and record.last_token_ns == record.chunk_ns[-1]


def test_a_whole_stream_through_the_wrapper():
    records: list[RequestRecord] = []
    objs = [ChatCompletionChunk.model_validate({**BASE, **c}) for c in stream_of(SLAB + 5, {7: REASONING})]
    assert len(list(InstrumentedStream(ListStream(objs), RecordFactory((records.append,)).start("chat", True)))) == len(objs)
    [record] = records
    assert record.status == "ok" and len(record.chunk_ns) == SLAB + 6
    assert record.output_tokens == 7 and record.output_tokens_source == "usage"
    assert record.last_token_ns == record.chunk_ns[-1] and record.first_content_ns < record.first_reasoning_ns

"""Every way an instrumented call can end yields exactly one record, with the right outcome, and
the caller receives what the bare SDK would have given it."""

from __future__ import annotations

import asyncio
import gc

import openai
import pytest

import tokenpace

MODEL = "tokenpace-sim"
MSGS = [{"role": "user", "content": "hello there"}]


def sync_client(url: str, records: list) -> object:
    return tokenpace.instrument(openai.OpenAI(base_url=url, api_key="sk-test", max_retries=0),
                                records=records, prometheus=False)


def async_client(url: str, records: list) -> object:
    return tokenpace.instrument(openai.AsyncOpenAI(base_url=url, api_key="sk-test", max_retries=0),
                                records=records, prometheus=False)


def test_stream_to_the_end_counts_usage_and_hides_the_injected_usage_chunk(server_url):
    records: list = []
    client = sync_client(server_url, records)
    chunks = list(client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=12, stream=True))
    assert all(chunk.choices for chunk in chunks), "the usage-only chunk reached the caller"
    [record] = records
    assert (record.status, record.output_tokens, record.output_tokens_source) == ("ok", 12, "usage")
    assert record.prompt_tokens and record.prompt_tokens_source == "usage"
    assert record.model == MODEL and record.api == "chat" and record.stream
    assert len(record.chunk_ns) == 12
    # The role-only first chunk is not a token: TTFT is stamped on the first content chunk.
    assert chunks[0].choices[0].delta.content in (None, "")
    assert record.sent_ns < record.first_token_ns == record.first_content_ns <= record.last_token_ns <= record.done_ns


def test_usage_asked_for_by_the_caller_still_reaches_the_caller(server_url):
    records: list = []
    client = sync_client(server_url, records)
    chunks = list(client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=5, stream=True,
                                                 stream_options={"include_usage": True}))
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 5
    assert [r.output_tokens for r in records] == [5]


def test_bare_and_instrumented_clients_receive_the_same_chunks(server_url):
    bare = openai.OpenAI(base_url=server_url, api_key="k", max_retries=0)
    records: list = []
    client = sync_client(server_url, records)
    kwargs = dict(model=MODEL, messages=MSGS, max_tokens=6, stream=True, stream_options={"include_usage": True})
    strip = lambda c: c.model_dump(exclude={"id", "created"})  # noqa: E731
    assert [strip(c) for c in client.chat.completions.create(**kwargs)] == \
           [strip(c) for c in bare.chat.completions.create(**kwargs)]


def test_completions_api_streamed_and_not(server_url):
    records: list = []
    client = sync_client(server_url, records)
    texts = [c.choices[0].text for c in client.completions.create(model=MODEL, prompt="hi", max_tokens=4, stream=True)]
    whole = client.completions.create(model=MODEL, prompt="hi", max_tokens=4)
    assert len([t for t in texts if t]) == 4 and whole.choices[0].text
    assert [(r.api, r.stream, r.status, r.output_tokens) for r in records] == \
           [("completions", True, "ok", 4), ("completions", False, "ok", 4)]


def test_not_streamed_chat(server_url):
    records: list = []
    response = sync_client(server_url, records).chat.completions.create(model=MODEL, messages=MSGS, max_tokens=7)
    assert response.usage.completion_tokens == 7
    [record] = records
    assert (record.status, record.stream, record.output_tokens_source, record.output_tokens) == ("ok", False, "usage", 7)
    assert record.first_token_ns == record.done_ns


def test_early_break_gives_one_cancelled_record(server_url):
    records: list = []
    client = sync_client(server_url, records)
    for i, _chunk in enumerate(client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=50, stream=True)):
        if i == 3:
            break
    gc.collect()
    [record] = records
    assert (record.status, record.error_kind) == ("cancelled", "abandoned")
    assert 1 <= len(record.chunk_ns) <= 3  # role chunk, then tokens: what was read is kept


def test_close_and_with_block(server_url):
    records: list = []
    client = sync_client(server_url, records)
    stream = client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=50, stream=True)
    next(stream), next(stream)
    stream.close()
    stream.close()  # a second close adds nothing
    with client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=50, stream=True) as stream:
        next(stream)
    assert [(r.status, r.error_kind) for r in records] == [("cancelled", "closed_early")] * 2


def test_exception_in_the_callers_loop(server_url):
    records: list = []
    client = sync_client(server_url, records)

    def consume() -> None:
        for _chunk in client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=50, stream=True):
            raise RuntimeError("caller bug")

    with pytest.raises(RuntimeError):
        consume()
    gc.collect()
    assert [(r.status, r.error_kind) for r in records] == [("cancelled", "abandoned")]


def test_unconsumed_stream_collected(server_url):
    records: list = []
    client = sync_client(server_url, records)
    client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=5, stream=True)
    gc.collect()
    [record] = records
    assert (record.status, record.error_kind, record.chunk_ns) == ("cancelled", "abandoned", [])


def test_http_error_and_connect_error(server_url):
    records: list = []
    client = sync_client(server_url, records)
    with pytest.raises(openai.BadRequestError):  # prompt + max_tokens over the context length
        client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=10_000_000, stream=True)
    dead = sync_client("http://127.0.0.1:9/v1", records)
    with pytest.raises(openai.APIConnectionError):
        dead.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=5, stream=True)
    assert [(r.status, r.error_kind, r.http_status) for r in records] == \
           [("error", "http_400", 400), ("error", "connect", None)]


def test_faults_reset_mid_stream_429_and_stall(fault_url):
    records: list = []
    client = sync_client(fault_url, records)
    with pytest.raises(Exception):  # noqa: B017 - the SDK raises httpx's own error for a cut stream
        list(client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=8, stream=True))
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=8, stream=True)
    list(client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=8, stream=True))
    assert [(r.status, r.error_kind) for r in records] == \
           [("error", "reset_mid_stream"), ("error", "http_429"), ("ok", None)]
    assert len(records[0].chunk_ns) == 2  # the tokens that arrived before the reset are kept
    stalled = records[2]
    assert (stalled.first_token_ns - stalled.sent_ns) / 1e9 >= 0.3


def test_async_stream_end_close_and_cancel(server_url):
    records: list = []

    async def scenario() -> None:
        client = async_client(server_url, records)
        chunks = [c async for c in await client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=6,
                                                                         stream=True)]
        assert all(c.choices for c in chunks)
        stream = await client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=50, stream=True)
        await stream.__anext__()
        await stream.close()
        async with await client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=50, stream=True) as s:
            await s.__anext__()

        async def consume() -> None:
            async for _chunk in await client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=500,
                                                                      stream=True):
                pass

        task = asyncio.create_task(consume())
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # cancelled before the response: the create call itself
        task = asyncio.create_task(client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=5))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        response = await client.completions.create(model=MODEL, prompt="x", max_tokens=3)
        assert response.choices[0].text

    asyncio.run(scenario())
    assert [(r.status, r.error_kind) for r in records] == [
        ("ok", None), ("cancelled", "closed_early"), ("cancelled", "closed_early"),
        ("cancelled", "cancelled"), ("cancelled", "cancelled"), ("ok", None)]
    assert records[0].output_tokens == 6 and records[0].output_tokens_source == "usage"
    assert len(records[3].chunk_ns) > 0


def test_async_early_break_is_recorded_when_collected(server_url):
    records: list = []

    async def scenario() -> None:
        client = async_client(server_url, records)
        async for _chunk in await client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=50, stream=True):
            break
        gc.collect()

    asyncio.run(scenario())
    assert [(r.status, r.error_kind) for r in records] == [("cancelled", "abandoned")]


def test_async_errors_unconsumed_stream_and_completions(server_url):
    records: list = []

    async def scenario() -> None:
        client = async_client(server_url, records)
        with pytest.raises(openai.BadRequestError):
            await client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=10**8, stream=True)
        await client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=5, stream=True)  # dropped
        gc.collect()
        texts = [c.choices[0].text async for c in await client.completions.create(
            model=MODEL, prompt="x", max_tokens=4, stream=True)]
        assert len([t for t in texts if t]) == 4
        dead = async_client("http://127.0.0.1:9/v1", records)
        with pytest.raises(openai.APIConnectionError):
            await dead.completions.create(model=MODEL, prompt="x", max_tokens=4)

    asyncio.run(scenario())
    assert [(r.api, r.status, r.error_kind) for r in records] == [
        ("chat", "error", "http_400"), ("chat", "cancelled", "abandoned"), ("completions", "ok", None),
        ("completions", "error", "connect")]
    assert records[2].output_tokens_source == "usage"

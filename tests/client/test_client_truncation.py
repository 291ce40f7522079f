"""Never lies: a stream cut short is not a success, a [DONE] with a trailing space is still [DONE],
bytes that arrived before a failed read still count, and usage that cannot be true is not recorded."""

from __future__ import annotations

import asyncio
import gzip
from types import SimpleNamespace

import aiohttp
import orjson
import pytest

from tokenpace.client.progress import Progress, finish_record
from tokenpace.client.responses import read_stream
from tokenpace.record import RequestRecord

from client_helpers import END, HEAD, http_chunk, send_to_raw, token


def finished_chunk(text: str, usage: dict | None = None) -> bytes:
    chunk: dict = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "length"}]}
    if usage is not None:
        chunk["usage"] = usage
    return http_chunk(b"data: " + orjson.dumps(chunk) + b"\n\n")


def test_a_stream_that_ends_short_of_its_max_tokens_with_nothing_saying_it_finished_is_incomplete(serve_raw):
    record = send_to_raw(serve_raw, [HEAD, token("a"), token("b"), token("c"), END], requested_output_tokens=8)
    assert (record.status, record.error_kind) == ("error", "incomplete")
    assert "3 of 8 tokens" in record.error_message
    assert len(record.chunk_ns) == 3 and record.output_tokens == 3  # what arrived is kept


def test_a_short_stream_is_ok_when_the_server_said_it_finished(serve_raw):
    with_reason = send_to_raw(serve_raw, [HEAD, token("a"), finished_chunk("b"), END], requested_output_tokens=8)
    with_done = send_to_raw(serve_raw, [HEAD, token("a"), http_chunk(b"data: [DONE]\n\n"), END],
                            requested_output_tokens=8)
    all_there = send_to_raw(serve_raw, [HEAD, token("a"), token("b"), END], requested_output_tokens=2)
    assert [(r.status, r.error_kind) for r in (with_reason, with_done, all_there)] == [("ok", None)] * 3


def test_done_with_trailing_whitespace_is_done(serve_raw):
    record = send_to_raw(serve_raw, [HEAD, token("a"), http_chunk(b"data: [DONE] \n\n"), token("after"), END])
    assert (record.status, record.error_kind) == ("ok", None)
    assert len(record.chunk_ns) == 1


def test_a_body_that_is_not_the_gzip_it_claims_is_bad_encoding(serve_raw):
    head = HEAD.replace(b"\r\n\r\n", b"\r\nContent-Encoding: gzip\r\n\r\n")
    assert gzip.decompress(gzip.compress(b"x")) == b"x"  # (real gzip would decode: this is not it)
    record = send_to_raw(serve_raw, [head, http_chunk(b"data: not gzip at all\n\n" * 4), END])
    assert (record.status, record.error_kind, record.http_status) == ("error", "bad_encoding", 200)
    assert "content-encoding" in record.error_message.lower()


def test_bytes_that_arrived_before_a_failed_read_keep_their_tokens():
    # aiohttp raises a stored failure (a body cut short of its Content-Length, bytes past it) before
    # it hands over the bytes that came first: those tokens were sent and must count.
    def event(text: str) -> bytes:
        return b"data: " + orjson.dumps({"choices": [{"delta": {"content": text}}]}) + b"\n\n"

    async def scenario() -> RequestRecord:
        content = aiohttp.StreamReader(SimpleNamespace(_reading_paused=False), 2**16, loop=asyncio.get_running_loop())
        content.feed_data(event("a") + event("b"))
        content.set_exception(aiohttp.ClientPayloadError("Response payload is not completed"))
        record, progress = RequestRecord(request_id="r", index=0), Progress()
        with pytest.raises(aiohttp.ClientPayloadError):
            await read_stream(SimpleNamespace(content=content), record, progress)
        progress.fail("error", "reset_mid_stream", "cut", progress.last_read_ns)
        finish_record(record, progress)
        return record

    record = asyncio.run(scenario())
    assert len(record.chunk_ns) == 2 and record.output_tokens == 2


def test_a_negative_prompt_count_is_ignored_for_the_clients_own(serve_raw):
    bad_usage = {"prompt_tokens": -5, "completion_tokens": 2}
    record = send_to_raw(serve_raw, [HEAD, token("a"), finished_chunk("b", bad_usage), END],
                         requested_input_tokens=7, requested_output_tokens=2)
    assert (record.status, record.error_kind) == ("ok", None)
    assert (record.prompt_tokens, record.prompt_tokens_source) == (7, "estimate")
    assert (record.output_tokens, record.output_tokens_source) == (2, "usage")  # the possible part stands
    assert "prompt_tokens=-5" in record.error_message


def test_negative_completion_and_impossible_cached_counts_are_ignored(serve_raw):
    usage = {"prompt_tokens": 4, "completion_tokens": -1, "prompt_tokens_details": {"cached_tokens": 9}}
    record = send_to_raw(serve_raw, [HEAD, token("a"), finished_chunk("b", usage), END])
    assert record.status == "ok"
    assert (record.output_tokens, record.output_tokens_source) == (2, "estimate")
    assert (record.prompt_tokens, record.cached_prompt_tokens) == (4, None)
    assert "ignored impossible usage" in record.error_message

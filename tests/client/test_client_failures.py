"""Failures are data: each misbehaviour of a server becomes a record with a status and an error kind,
keeping what arrived before it. Byte-exact misbehaviour uses a raw TCP server."""

from __future__ import annotations

import asyncio
import socket

import orjson
import pytest
from aiohttp import web

from tokenpace.client import OpenAIClient
from tokenpace.errors import TargetError
from tokenpace.record import RequestRecord

from client_helpers import END, HEAD, http_chunk, send_to_raw, token


def send_to_app(serve_app, handler, path: str = "/v1/chat/completions", **client_args) -> RequestRecord:
    record = RequestRecord(request_id="r", index=0)

    async def scenario() -> None:
        async with serve_app({("POST", path): handler}) as base_url:
            async with OpenAIClient(base_url, "m", **client_args) as client:
                await client.send(record, "hi")

    asyncio.run(scenario())
    return record


def test_http_429_with_openai_error_body(serve_app):
    async def handler(request: web.Request) -> web.Response:
        body = {"error": {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit"}}
        return web.json_response(body, status=429)

    record = send_to_app(serve_app, handler)
    assert (record.status, record.error_kind, record.http_status) == ("error", "http_429", 429)
    assert record.error_message == "Rate limit reached for requests"
    assert record.first_token_ns is None and record.chunk_ns == []
    assert record.done_ns >= record.sent_ns


def test_http_500_with_a_long_plain_text_body_is_truncated(serve_app):
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text="boom " * 200, status=500)

    record = send_to_app(serve_app, handler)
    assert (record.status, record.error_kind, record.http_status) == ("error", "http_500", 500)
    assert record.error_message.startswith("boom boom")
    assert len(record.error_message) == 300


def test_connection_refused_is_a_connect_error():
    with socket.socket() as sock:  # a port that nothing listens on once this closes
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    record = RequestRecord(request_id="r", index=0)

    async def scenario() -> None:
        async with OpenAIClient(f"http://127.0.0.1:{port}/v1", "m") as client:
            await client.send(record, "hi")

    asyncio.run(scenario())
    assert (record.status, record.error_kind, record.http_status) == ("error", "connect", None)
    assert record.sent_ns <= record.done_ns


def test_server_closing_before_headers(serve_raw):
    record = send_to_raw(serve_raw, [])
    assert (record.status, record.error_kind, record.http_status) == ("error", "reset_before_headers", None)


def test_server_closing_mid_stream_keeps_the_tokens_that_arrived(serve_raw):
    record = send_to_raw(serve_raw, [HEAD, token("Hel", 1), token("lo", 3)])
    assert (record.status, record.error_kind, record.http_status) == ("error", "reset_mid_stream", 200)
    assert len(record.chunk_ns) == 2 and record.last_token_ns == record.chunk_ns[1]
    assert record.done_ns >= record.last_token_ns
    # The per-chunk usage that arrived still gives exact counts, labelled as not final.
    assert (record.chunk_tokens, record.chunk_tokens_source) == ([1, 2], "chunk_usage")
    assert (record.output_tokens, record.output_tokens_source) == (3, "chunk_usage")


def test_error_object_inside_the_stream(serve_raw):
    error = http_chunk(b'data: {"error": {"message": "engine overloaded", "code": 503}}\n\n')
    record = send_to_raw(serve_raw, [HEAD, token("a"), error, token("never counted"), END])
    assert (record.status, record.error_kind, record.error_message) == ("error", "stream_error", "engine overloaded")
    assert len(record.chunk_ns) == 1


def test_undecodable_json_is_invalid_json(serve_raw):
    record = send_to_raw(serve_raw, [HEAD, token("a"), token("b"), http_chunk(b"data: {not json\n\n"), END])
    assert (record.status, record.error_kind) == ("error", "invalid_json")
    assert "{not json" in record.error_message
    assert record.output_tokens_client == 2 and record.output_tokens == 2


def test_eof_without_done_after_tokens_is_ok(serve_raw):
    record = send_to_raw(serve_raw, [HEAD, token("a"), token("b"), END])
    assert (record.status, record.error_kind) == ("ok", None)
    assert record.output_tokens_client == 2 and record.done_ns >= record.last_token_ns


def test_eof_without_done_or_tokens_is_an_empty_response(serve_raw):
    role_only = http_chunk(b'data: {"choices": [{"delta": {"role": "assistant"}}]}\n\n')
    record = send_to_raw(serve_raw, [HEAD, role_only, END])
    assert (record.status, record.error_kind, record.http_status) == ("error", "empty_response", 200)


def test_total_timeout_keeps_what_arrived(serve_raw):
    record = send_to_raw(serve_raw, [HEAD, token("a", 1)], timeout_s=0.3, hang=True)
    assert (record.status, record.error_kind) == ("timeout", "total_timeout")
    assert len(record.chunk_ns) == 1
    assert 0.3e9 <= record.done_ns - record.sent_ns < 0.9e9


def test_cancellation_finishes_the_record_and_propagates(serve_app):
    release = asyncio.Event

    async def scenario() -> RequestRecord:
        hold = release()

        async def handler(request: web.Request) -> web.StreamResponse:
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            for text, total in (("one", 1), ("two three", 3)):
                chunk = {"choices": [{"delta": {"content": text}}], "usage": {"prompt_tokens": 2, "completion_tokens": total}}
                await response.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
            await hold.wait()  # never set: the client gives up first
            return response

        record = RequestRecord(request_id="r", index=0)
        async with serve_app({("POST", "/v1/chat/completions"): handler}) as base_url:
            async with OpenAIClient(base_url, "m") as client:
                task = asyncio.create_task(client.send(record, "hi"))
                while len(record.chunk_ns) < 2:
                    await asyncio.sleep(0.005)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            hold.set()
        return record

    record = asyncio.run(scenario())
    assert (record.status, record.error_kind) == ("cancelled", None)
    assert record.done_ns >= record.last_token_ns == record.chunk_ns[1]
    assert (record.chunk_tokens, record.output_tokens, record.output_tokens_source) == ([1, 2], 3, "chunk_usage")
    assert record.prompt_tokens == 2


def test_list_models_failures_raise_target_error(serve_app):
    async def unauthorized(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": "invalid api key"}}, status=401)

    async def scenario() -> list[str]:
        messages = []
        async with serve_app({("GET", "/v1/models"): unauthorized}) as base_url:
            async with OpenAIClient(base_url, "m") as client:
                with pytest.raises(TargetError) as info:
                    await client.list_models()
                messages.append(str(info.value))
        async with OpenAIClient("http://127.0.0.1:9/v1", "m") as client:  # port 9 (discard): refused
            with pytest.raises(TargetError) as info:
                await client.list_models()
            messages.append(str(info.value))
        return messages

    unauthorized_message, refused_message = asyncio.run(scenario())
    assert "HTTP 401" in unauthorized_message and "invalid api key" in unauthorized_message
    assert refused_message.startswith("GET http://127.0.0.1:9/v1/models failed:")
    assert "\n" not in refused_message


def test_a_kept_alive_connection_the_server_closed_is_not_a_failed_request(serve_raw):
    # llama-server closes the connection after every stream without "Connection: close": the next
    # request of a closed loop goes out on it before the close is seen and is never read. It must
    # be sent again on a new connection, not become an error (each request here is one connection).
    done = b"data: [DONE]\n\n"

    async def respond(request: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(HEAD + token("Hi", 1) + http_chunk(done) + END)
        await writer.drain()
        await asyncio.sleep(0.05)  # the client reuses the connection meanwhile; close unread

    records = [RequestRecord(request_id=f"r{i}", index=i) for i in range(3)]

    async def scenario() -> None:
        async with serve_raw(respond) as base_url:
            async with OpenAIClient(base_url, "m", timeout_s=10) as client:
                for record in records:
                    await client.send(record, "hi")

    asyncio.run(scenario())
    assert [(r.status, r.error_kind, r.output_tokens) for r in records] == [("ok", None, 1)] * 3


def test_a_line_that_never_ends_is_line_too_long_and_keeps_the_tokens(serve_raw):
    # 3 MiB without a line end, in 64 KiB writes, and the connection held open: the client must stop
    # at its 1 MiB line limit, not buffer on until the timeout.
    endless_line = [http_chunk(b"data: {\"choices\": [{\"delta\": {\"content\": \"")]
    endless_line += [http_chunk(b"x" * 65536)] * 48
    record = send_to_raw(serve_raw, [HEAD, token("a", 1), token("b", 2), *endless_line], timeout_s=60, hang=True)
    assert (record.status, record.error_kind, record.http_status) == ("error", "line_too_long", 200)
    assert "1048576 bytes" in record.error_message
    assert len(record.chunk_ns) == 2 and record.output_tokens == 2


def test_an_echoed_api_key_never_reaches_the_record(serve_app):
    key = "plain-secret-42"

    async def http_error(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": f"denied for {request.headers['Authorization']}"}}, status=500)

    async def stream_error(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        error = {"error": {"message": f"engine saw headers {dict(request.headers)}, key {key}"}}
        await response.write(b"data: " + orjson.dumps(error) + b"\n\n")
        return response

    records = [send_to_app(serve_app, handler, api_key=key) for handler in (http_error, stream_error)]
    assert [(r.status, r.error_kind) for r in records] == [("error", "http_500"), ("error", "stream_error")]
    assert records[0].error_message == "denied for Bearer ***"
    assert all(key not in r.error_message and "***" in r.error_message for r in records)

"""Never lies about framing: a server whose Content-Length is shorter than the body it sends broke
HTTP/1.1 framing. When the extra bytes come in the same read as the body, aiohttp discards the whole
response: the record is an error that says why (not a generic client error). When they come in a
later packet, HTTP says the body ended at the declared length: the tokens inside it count, and a
stream that promised more (ignore_eos) is incomplete."""

from __future__ import annotations

import orjson

from client_helpers import send_to_raw


def sse(text: str) -> bytes:
    return b"data: " + orjson.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}) + b"\n\n"


BODY = sse("a") + sse("b") + sse("c") + b"data: [DONE]\n\n"
DECLARED = len(sse("a") + sse("b"))  # the server claims two events' worth of bytes


def head(length: int) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n" % length


def test_bytes_past_a_short_content_length_in_one_packet_are_bad_framing(serve_raw):
    record = send_to_raw(serve_raw, [head(DECLARED) + BODY])
    assert (record.status, record.error_kind) == ("error", "bad_framing")
    assert "Content-Length" in record.error_message
    assert not record.chunk_ns  # discarded by aiohttp before any byte reached us: nothing is stamped


def test_a_body_cut_by_a_short_content_length_keeps_its_tokens_and_is_incomplete_if_more_was_promised(serve_raw):
    record = send_to_raw(serve_raw, [head(DECLARED), BODY], requested_output_tokens=3)
    assert (record.status, record.error_kind) == ("error", "incomplete")
    assert record.output_tokens == 2 and len(record.chunk_ns) == 2


def test_an_exact_content_length_is_a_clean_stream(serve_raw):
    record = send_to_raw(serve_raw, [head(len(BODY)) + BODY])
    assert (record.status, record.error_kind, record.output_tokens) == ("ok", None, 3)

"""The SSE parser: hand-written cases from the WHATWG rules, then properties over generated streams."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenpace.client import SSEEvent, SSEParser


def parse(*feeds: bytes) -> list[SSEEvent]:
    parser = SSEParser()
    events: list[SSEEvent] = []
    for feed in feeds:
        events += parser.feed(feed)
    return events + parser.close()


def datas(events: list[SSEEvent]) -> list[str]:
    return [event.data for event in events]


def test_openai_style_stream():
    stream = b'data: {"a":1}\n\ndata: {"a":2}\n\ndata: [DONE]\n\n'
    assert datas(parse(stream)) == ['{"a":1}', '{"a":2}', "[DONE]"]


def test_events_are_returned_by_the_feed_that_completes_them():
    parser = SSEParser()
    assert parser.feed(b"data: hel") == []
    assert parser.feed(b"lo\n") == []
    assert parser.feed(b"\n") == [SSEEvent("hello")]


def test_multi_line_data_is_joined_with_newline():
    assert datas(parse(b"data: first\ndata: second\ndata:\n\n")) == ["first\nsecond\n"]


def test_event_and_id_fields_and_id_persistence():
    events = parse(b"event: delta\nid: 42\ndata: x\n\ndata: y\n\n")
    assert events == [SSEEvent("x", "delta", "42"), SSEEvent("y", "message", "42")]


def test_id_with_nul_is_ignored():
    assert parse(b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n")[1].id == "1"


def test_comments_keep_alives_and_unknown_fields_produce_nothing():
    assert parse(b": keep-alive\n\n:\n\nfoo: bar\n\n") == []
    assert datas(parse(b": ping\ndata: x\n: another\n\n")) == ["x"]


def test_blank_line_without_data_dispatches_nothing_but_resets_the_type():
    assert parse(b"event: a\n\ndata: x\n\n") == [SSEEvent("x", "message")]


def test_field_without_colon_and_without_space():
    assert datas(parse(b"data\n\n")) == [""]
    assert datas(parse(b"data:x\n\n")) == ["x"]
    assert datas(parse(b"data:  two spaces\n\n")) == [" two spaces"]  # only one space is removed


def test_retry_field_sets_retry_ms_only_when_numeric():
    parser = SSEParser()
    parser.feed(b"retry: 1500\n\nretry: soon\n\n")
    assert parser.retry_ms == 1500


def test_cr_crlf_and_lf_line_endings():
    expected = ["a", "b", "c"]
    assert datas(parse(b"data: a\r\n\r\ndata: b\r\n\r\ndata: c\r\n\r\n")) == expected
    assert datas(parse(b"data: a\r\rdata: b\r\rdata: c\r\r")) == expected
    assert datas(parse(b"data: a\n\ndata: b\r\n\r\ndata: c\r\r")) == expected


def test_crlf_split_between_feeds_is_one_line_ending():
    # A CR at the end of one read and the LF at the start of the next must not make a blank line.
    parser = SSEParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"\ndata: b\r") == []
    assert parser.feed(b"\n\r") == [SSEEvent("a\nb")]
    assert parser.feed(b"\n") == []


def test_utf8_character_split_across_feeds():
    payload = "data: héllo → 世界\n\n".encode()
    for cut in range(len(payload) + 1):
        assert datas(parse(payload[:cut], payload[cut:])) == ["héllo → 世界"]


def test_invalid_utf8_is_replaced_not_raised():
    assert datas(parse(b"data: \xff\xfe\n\n")) == ["\ufffd\ufffd"]


def test_leading_bom_is_stripped_even_when_split():
    assert datas(parse(b"\xef\xbb", b"\xbfdata: x\n\n")) == ["x"]
    assert datas(parse(b"\xef", b"\xbb", b"\xbf", b"data: x\n\n")) == ["x"]


def test_close_dispatches_an_event_the_stream_did_not_end():
    assert datas(parse(b"data: last")) == ["last"]
    assert datas(parse(b"data: last\n")) == ["last"]
    assert parse(b"") == []


# ---- properties -------------------------------------------------------------------------------

def _chars(excluded: str) -> st.SearchStrategy[str]:
    return st.characters(blacklist_categories=("Cs",), blacklist_characters=excluded)  # Cs: surrogates


_line_text = st.text(_chars("\r\n"), max_size=20)
_event = st.fixed_dictionaries(
    {
        "type": st.none() | st.text(_chars("\r\n"), min_size=1, max_size=8),
        "id": st.none() | st.text(_chars("\r\n\x00"), max_size=8),
        "data": st.lists(_line_text, min_size=1, max_size=4),
        "comment": st.booleans(),
    }
)


def encode_stream(events: list[dict], newline: str) -> bytes:
    lines: list[str] = []
    for event in events:
        if event["comment"]:
            lines.append(": keep-alive")
        if event["type"] is not None:
            lines.append(f"event: {event['type']}")
        if event["id"] is not None:
            lines.append(f"id: {event['id']}")
        lines += [f"data: {line}" for line in event["data"]]
        lines.append("")
    return "".join(line + newline for line in lines).encode()


def expected_events(events: list[dict]) -> list[SSEEvent]:
    expected, last_id = [], ""
    for event in events:
        last_id = event["id"] if event["id"] is not None else last_id
        expected.append(SSEEvent("\n".join(event["data"]), event["type"] or "message", last_id))
    return expected


@settings(max_examples=150, deadline=None)
@given(events=st.lists(_event, max_size=6), newline=st.sampled_from(["\n", "\r\n", "\r"]), data=st.data())
def test_any_split_of_a_valid_stream_gives_the_same_events(events, newline, data):
    stream = encode_stream(events, newline)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)])]
    assert parse(*pieces) == parse(stream) == expected_events(events)


@settings(max_examples=100, deadline=None)
@given(events=st.lists(_event, max_size=6))
def test_crlf_cr_and_lf_streams_are_equivalent(events):
    assert parse(encode_stream(events, "\r\n")) == parse(encode_stream(events, "\n"))
    assert parse(encode_stream(events, "\r")) == parse(encode_stream(events, "\n"))


@settings(max_examples=200, deadline=None)
@given(chunks=st.lists(st.binary(max_size=64), max_size=10))
def test_random_bytes_never_raise(chunks):
    events = parse(*chunks)
    assert all(isinstance(event.data, str) for event in events)


# ---- the line limit ---------------------------------------------------------------------------

def test_an_unterminated_line_over_the_limit_stops_the_parser_and_frees_its_buffer():
    parser = SSEParser(max_line_bytes=1000)
    assert parser.feed(b"data: ok\n\ndata: ") == [SSEEvent("ok")]
    for _ in range(9):
        assert parser.feed(b"x" * 100) == [] and not parser.line_too_long
    assert parser.feed(b"x" * 100) == [] and parser.line_too_long
    assert parser._tail == [] and parser._tail_bytes == 0  # nothing of it is kept
    assert parser.feed(b"\n\ndata: later\n\n") == [] and parser.close() == []


def test_a_complete_line_over_the_limit_in_one_read_is_too_long_too():
    parser = SSEParser(max_line_bytes=100)
    assert parser.feed(b"data: a\n\ndata: " + b"y" * 200 + b"\n\ndata: b\n\n") == [SSEEvent("a")]
    assert parser.line_too_long


def test_the_data_lines_of_one_event_count_together():
    parser = SSEParser(max_line_bytes=100)
    assert parser.feed(b"data: " + b"z" * 50 + b"\n" + b"data: " + b"z" * 50 + b"\n\n") == []
    assert parser.line_too_long


def test_a_line_of_exactly_the_limit_is_accepted():
    line = b"data: " + b"w" * 94  # 100 bytes
    assert datas(SSEParser(max_line_bytes=100).feed(line + b"\n\n")) == ["w" * 94]

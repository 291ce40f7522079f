"""Per-request server timing: the built-in server's `--timings` (llama.cpp's `timings` object) and
the client keeping it in the record; records without it still read back."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from tokenpace.client import OpenAIClient
from tokenpace.record import RequestRecord
from tokenpace.results import read_records
from tokenpace.servers import BuiltinServerConfig, running_server


async def _send(config: BuiltinServerConfig, **client_kw) -> RequestRecord:
    async with running_server(config) as url:
        client = OpenAIClient(url, config.model, **client_kw)
        try:
            record = RequestRecord(request_id="t-1", index=0, requested_output_tokens=12)
            await client.send(record, "one two three four five six seven eight")
        finally:
            await client.close()
    return record


@pytest.mark.parametrize("api, stream", [("chat", True), ("completions", True), ("chat", False)])
def test_the_builtin_server_sends_llama_cpp_timings_and_the_client_keeps_them(api, stream):
    config = BuiltinServerConfig(timings=True, prefill_base_s=0.03, decode_base_s=0.005, jitter_frac=0)
    record = asyncio.run(_send(config, api=api, stream=stream))
    assert record.status == "ok"
    t = record.server_timing
    assert t is not None and t["predicted_n"] == 12 and t["cache_n"] == 0
    assert t["prompt_n"] == record.prompt_tokens
    ttft_ms = (record.first_token_ns - record.sent_ns) / 1e6
    assert 25.0 <= t["prompt_ms"] <= ttft_ms  # the 30 ms prefill is inside the client's TTFT
    if stream:  # 11 decode steps of 5 ms between the first and the last token
        assert 50.0 <= t["predicted_ms"] <= (record.last_token_ns - record.first_token_ns) / 1e6 + 1.0


def test_without_timings_the_server_sends_none():
    record = asyncio.run(_send(BuiltinServerConfig(prefill_base_s=0.001, decode_base_s=0.001)))
    assert record.status == "ok" and record.server_timing is None


def test_records_without_server_timing_still_read(tmp_path):
    old = RequestRecord(request_id="old", index=0).to_dict()
    del old["server_timing"]  # a JSONL line written before the field existed
    new = RequestRecord(request_id="new", index=1, server_timing={"prompt_ms": 12.5, "prompt_n": 7})
    path = tmp_path / "r.records.jsonl"
    path.write_bytes(orjson.dumps(old) + b"\n" + orjson.dumps(new.to_dict()) + b"\n")
    back = read_records(path)
    assert back[0].server_timing is None and back[1] == new

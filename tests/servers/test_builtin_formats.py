"""The built-in server in all four request formats, read by tokenpace's own client (and, for the
wire fields, by its SSE parser): cached-token accounting across a prefix miss and hit, faults in
each format, the same workload giving the same token totals through every API."""

from __future__ import annotations

import aiohttp
import orjson
import pytest

from tokenpace import BenchConfig, run_bench
from tokenpace.client import OpenAIClient
from tokenpace.client.sse import SSEParser
from tokenpace.record import RequestRecord
from tokenpace.servers import BuiltinServerConfig, start_server_process
from tokenpace.servers.formats import parse_api_formats
from tokenpace.servers.serve import running_server
from tokenpace.simulator.config import SimConfig

from servers_helpers import fast_config, run

APIS = ("chat", "completions", "responses", "anthropic")
PREFIX = " ".join(f"w{i}" for i in range(256))  # 16 full blocks of 16 words


async def send(url: str, api: str, prompt, *, max_tokens: int = 4, stream: bool = True, **client_args) -> RequestRecord:
    record = RequestRecord("r", 0, requested_output_tokens=max_tokens)
    async with OpenAIClient(url, "tokenpace-sim", api=api, stream=stream, **client_args) as client:
        await client.send(record, prompt)
    return record


def prompt_for(api: str, suffix: str):
    if api == "completions":
        return f"{PREFIX} {suffix}"
    return [{"role": "system", "content": PREFIX}, {"role": "user", "content": suffix}]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stream", [True, False])
def test_a_prefix_miss_then_a_hit_in_each_format(api, stream):
    config = BuiltinServerConfig(sim=SimConfig(prefix_caching=True))

    async def scenario():
        async with running_server(config) as url:
            miss = await send(url, api, prompt_for(api, "first question here"), stream=stream)
            hit = await send(url, api, prompt_for(api, "another question entirely"), stream=stream)
        return miss, hit

    miss, hit = run(scenario())
    for record in (miss, hit):
        assert (record.status, record.error_message) == ("ok", None)
        assert (record.prompt_tokens, record.output_tokens) == (259, 4)
    assert miss.cached_prompt_tokens == 0
    assert hit.cached_prompt_tokens == 256  # the 16 blocks of the shared prefix
    # Without a breakpoint nothing is written to Anthropic's cache; the other APIs have no such field.
    assert miss.cache_write_prompt_tokens == hit.cache_write_prompt_tokens == (0 if api == "anthropic" else None)


def test_anthropic_breakpoint_writes_on_a_miss_and_reads_on_a_hit():
    config = BuiltinServerConfig(sim=SimConfig(prefix_caching=True))

    async def scenario():
        async with running_server(config) as url:
            records = [await send(url, "anthropic", prompt_for("anthropic", q), cache_breakpoint="system")
                       for q in ("first question here", "another question entirely")]
            async with aiohttp.ClientSession() as session:  # the raw fields, read by the SSE parser
                body = {"model": "tokenpace-sim", "max_tokens": 2, "stream": True,
                        "system": [{"type": "text", "text": PREFIX, "cache_control": {"type": "ephemeral"}}],
                        "messages": [{"role": "user", "content": "a third one"}]}
                async with session.post(f"{url}/messages", json=body) as r:
                    raw = await r.read()
        return records, raw

    (miss, hit), raw = run(scenario())
    assert (miss.prompt_tokens, miss.cached_prompt_tokens, miss.cache_write_prompt_tokens) == (259, 0, 256)
    assert (hit.prompt_tokens, hit.cached_prompt_tokens, hit.cache_write_prompt_tokens) == (259, 256, 0)
    events = SSEParser(strict=True).feed(raw)
    assert [e.event for e in events][:3] == ["message_start", "content_block_start", "ping"]
    assert [e.event for e in events][-3:] == ["content_block_stop", "message_delta", "message_stop"]
    usage = orjson.loads(events[0].data)["message"]["usage"]
    assert usage == {"input_tokens": 3, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 256,
                     "output_tokens": 0}
    assert orjson.loads(events[-2].data)["usage"]["output_tokens"] == 2


def test_the_same_workload_through_all_four_apis_gives_the_same_token_totals(tmp_path):
    totals = {}
    with start_server_process(fast_config(tokens_per_chunk=2)) as server:
        for api in APIS:
            result = run_bench(BenchConfig(url=server.url, api=api, requests=6, concurrency=2, input_tokens="uniform:min=40,max=80",
                                           output_tokens="uniform:min=5,max=12", seed=3, progress=False,
                                           out=str(tmp_path / f"{api}.json")))
            records = [r for r in result.records if r.measured]
            assert [r.status for r in records] == ["ok"] * 6, [r.error_message for r in records]
            totals[api] = (sum(r.prompt_tokens for r in records), sum(r.output_tokens for r in records),
                           sum(sum(r.chunk_tokens) for r in records), sum(r.requested_output_tokens for r in records))
    assert len(set(totals.values())) == 1, totals
    prompt, output, chunked, requested = totals["chat"]
    assert output == chunked == requested and prompt > 6 * 40 - 6


@pytest.mark.parametrize("api", APIS)
def test_http_529_and_an_overloaded_event_in_each_format(api):
    config = fast_config(faults="http-529=at:1,overloaded=at:2:3")

    async def scenario():
        async with running_server(config) as url:
            async with aiohttp.ClientSession() as session:
                body = {"model": "tokenpace-sim", "max_tokens": 8, "messages": [{"role": "user", "content": "x"}],
                        "prompt": "x", "input": "x"}
                path = {"chat": "/chat/completions", "completions": "/completions", "responses": "/responses",
                        "anthropic": "/messages"}[api]
                async with session.post(url + path, json=body) as r:
                    status, error = r.status, await r.json()
            mid = await send(url, api, "one two", max_tokens=8)
        return status, error, mid

    status, error, mid = run(scenario())
    assert status == 529
    if api == "anthropic":
        assert error == {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded (injected fault)"}}
    else:
        assert error["error"]["type"] == "overloaded_error" and error["error"]["code"] == 529
    assert (mid.status, mid.error_kind) == ("error", "overloaded")
    assert sum(mid.chunk_tokens) == 3  # the tokens sent before the error are kept


@pytest.mark.parametrize("api", ("responses", "anthropic"))
def test_empty_and_no_usage_faults_in_the_new_formats(api):
    config = fast_config(faults="empty-choices=at:1,no-usage=at:2")

    async def scenario():
        async with running_server(config) as url:
            return [await send(url, api, "one two", max_tokens=3) for _ in range(2)]

    empty, no_usage = run(scenario())
    assert (empty.status, empty.error_kind) == ("error", "empty_response")
    assert no_usage.status == "ok" and no_usage.output_tokens_source == "estimate"
    assert no_usage.output_tokens == 3  # one per token event, as the client counts without usage


def test_only_the_formats_asked_for_are_served():
    config = fast_config(api_formats=("chat", "anthropic"))

    async def scenario():
        async with running_server(config) as url, aiohttp.ClientSession() as session:
            statuses = {}
            for path in ("/chat/completions", "/completions", "/responses", "/messages"):
                async with session.post(url + path, json={"max_tokens": 1, "messages": [{"role": "user",
                                                                                          "content": "a"}]}) as r:
                    statuses[path] = r.status
            return statuses

    assert run(scenario()) == {"/chat/completions": 200, "/completions": 404, "/responses": 404, "/messages": 200}
    assert parse_api_formats(" chat , anthropic,chat") == ("chat", "anthropic")
    for bad in ("", "chat,grpc"):
        with pytest.raises(ValueError, match="--api-formats"):
            parse_api_formats(bad)


def test_anthropic_errors_have_anthropic_shape():
    async def scenario():
        async with running_server(fast_config()) as url, aiohttp.ClientSession() as session:
            out = []
            for body in ({"model": "tokenpace-sim", "messages": [{"role": "user", "content": "a"}]},
                         {"model": "nope", "max_tokens": 1, "messages": [{"role": "user", "content": "a"}]}):
                async with session.post(f"{url}/messages", json=body) as r:
                    out.append((r.status, await r.json()))
            return out

    (missing, missing_body), (unknown, unknown_body) = run(scenario())
    assert missing == 400 and missing_body["error"]["type"] == "invalid_request_error"
    assert "max_tokens" in missing_body["error"]["message"]
    assert unknown == 404 and unknown_body == {"type": "error", "error": {
        "type": "not_found_error", "message": "The model `nope` does not exist."}}

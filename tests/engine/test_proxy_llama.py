"""The measuring proxy in front of a real llama-server, driven by the instrumented openai SDK: both
views of the same calls agree, the engine's own timings land in the proxy's records, and a client
that leaves mid-stream is recorded as such. Skips without the cached engine (see conftest.py)."""

from __future__ import annotations

import asyncio
import threading

import pytest

import tokenpace
from tokenpace.proxy import ProxyConfig, running_proxy

pytestmark = pytest.mark.engine
openai = pytest.importorskip("openai")


def test_sdk_through_the_proxy_to_llama_server(llama_url):
    proxy_records: list = []
    ready, stop = threading.Event(), None
    box: dict = {}

    async def serve() -> None:
        nonlocal stop
        stop = asyncio.Event()
        async with running_proxy(ProxyConfig(upstream=llama_url, port=0)) as (url, state):
            inner = state.record_done
            state.record_done = lambda record, timing: (proxy_records.append(record), inner(record, timing))
            box["url"], box["loop"] = url, asyncio.get_running_loop()
            ready.set()
            await stop.wait()

    thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
    thread.start()
    assert ready.wait(10)
    client_records: list = []
    try:
        client = tokenpace.instrument(openai.OpenAI(base_url=box["url"], api_key="k", max_retries=0, timeout=120),
                                      records=client_records, prometheus=False)
        model = client.models.list().data[0].id  # passed through, not measured
        messages = [{"role": "user", "content": "Count from one to twenty."}]
        for _ in range(3):
            chunks = list(client.chat.completions.create(model=model, messages=messages, max_tokens=16, stream=True))
            assert all(chunk.choices for chunk in chunks)  # the injected usage chunk stayed hidden
        client.chat.completions.create(model=model, messages=messages, max_tokens=8)
        stream = client.chat.completions.create(model=model, messages=messages, max_tokens=200, stream=True)
        for _ in range(4):
            next(stream)
        stream.close()
    finally:
        box["loop"].call_soon_threadsafe(stop.set)
        thread.join(30)
    assert [r.status for r in client_records] == ["ok"] * 4 + ["cancelled"]
    by_id = {r.request_id: r for r in proxy_records}
    assert set(by_id) == {r.request_id for r in client_records}  # X-Request-ID joins the two views
    for seen in client_records[:3]:
        at_proxy = by_id[seen.request_id]
        assert at_proxy.status == "ok" and at_proxy.output_tokens == seen.output_tokens == 16
        assert at_proxy.output_tokens_source == seen.output_tokens_source == "usage"
        assert at_proxy.server_timing and at_proxy.server_timing["predicted_n"] == 16
        # the client sent before the proxy received, and got the first token after the proxy did
        assert seen.first_token_ns - seen.sent_ns >= at_proxy.first_token_ns - at_proxy.sent_ns
    assert by_id[client_records[3].request_id].stream is False
    assert by_id[client_records[4].request_id].error_kind == "client_disconnected"

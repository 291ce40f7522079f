"""The proxy relays each chunk when it arrives: inter-token gaps through it look like the direct
ones. A buffering hop would deliver the chunks together (gaps near zero, TTFT near E2E)."""

from __future__ import annotations

import asyncio

import numpy as np

from tokenpace.client import OpenAIClient
from tokenpace.metrics.latency import itl_samples
from tokenpace.proxy import ProxyConfig, running_proxy
from tokenpace.record import RequestRecord
from tokenpace.servers import BuiltinServerConfig, start_server_process


async def _streams(url: str, n: int, tag: str) -> list[RequestRecord]:
    records = [RequestRecord(request_id=f"{tag}-{i}", index=i, requested_output_tokens=20) for i in range(n)]
    async with OpenAIClient(url, "tokenpace-sim") as client:
        await asyncio.gather(*(client.send(r, "hi") for r in records))
    return records


def test_itl_through_the_proxy_matches_direct(tmp_path):
    # 20 ms between tokens: a buffered stream would show gaps of ~0 instead.
    server = start_server_process(BuiltinServerConfig(decode_base_s=0.02, jitter_frac=0.0))
    try:
        async def scenario() -> tuple[list, list]:
            async with running_proxy(ProxyConfig(upstream=server.url, port=0)) as (url, _state):
                via = await _streams(url, 4, "via")
            direct = await _streams(server.url, 4, "direct")
            return via, direct

        via, direct = asyncio.run(scenario())
    finally:
        server.stop()
    assert all(r.status == "ok" and len(r.chunk_ns) == 20 for r in via + direct)
    itl_via = np.median([s for r in via for s in itl_samples(r)])
    itl_direct = np.median([s for r in direct for s in itl_samples(r)])
    assert itl_direct > 15  # the server's 20 ms steps, as the client saw them
    assert itl_via > 0.75 * itl_direct  # behaviour, with a wide margin: buffering gives ~0
    # and no two chunks of one stream arrived in the same read through the proxy
    assert all(len(set(r.chunk_ns)) == 20 for r in via)

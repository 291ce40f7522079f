"""A client that leaves mid-stream through the proxy frees the engine: the proxy closes its
upstream request, and the server (whose /metrics counts running requests) stops generating."""

from __future__ import annotations

import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tokenpace.proxy import ProxyConfig

openai = pytest.importorskip("openai")


def running(server_url: str) -> float:
    text = urllib.request.urlopen(server_url[:-3] + "/metrics", timeout=5).read().decode()
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == "vllm:num_requests_running")


def test_client_leaving_stops_the_upstream_request(server_url, make_proxy):
    with make_proxy(ProxyConfig(upstream=server_url, port=0)) as (url, state):
        client = openai.OpenAI(base_url=url, api_key="k", max_retries=0)
        # 5,000 tokens at 2 ms each: 10 s of generation if nobody stops it.
        stream = client.chat.completions.create(model="tokenpace-sim", messages=[{"role": "user", "content": "x"}],
                                                max_tokens=5000, stream=True)
        for _ in range(5):
            next(stream)
        assert running(server_url) == 1
        stream.close()
        deadline = time.monotonic() + 5
        while running(server_url) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert running(server_url) == 0
        assert state.in_flight == 0

"""The official openai SDK through the proxy to real servers: what the client receives is the
upstream's, and every call is one record with the right outcome."""

from __future__ import annotations

import gc
import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tokenpace.proxy import ProxyConfig
from tokenpace.runner.sink import read_records
from tokenpace.servers import BuiltinServerConfig, start_server_process

openai = pytest.importorskip("openai")

MODEL = "tokenpace-sim"
MSGS = [{"role": "user", "content": "hello"}]


def metrics(url: str) -> dict:
    import urllib.request

    text = urllib.request.urlopen(url[:-3] + "/metrics", timeout=5).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_streams_whole_bodies_models_and_records(server_url, make_proxy, tmp_path):
    path = tmp_path / "live.jsonl"
    with make_proxy(ProxyConfig(upstream=server_url, port=0, slo="chat", records_path=str(path))) as (url, _):
        client = openai.OpenAI(base_url=url, api_key="sk-secret-key-123", max_retries=0)
        direct = openai.OpenAI(base_url=server_url, api_key="k", max_retries=0)
        kwargs = dict(model=MODEL, messages=MSGS, max_tokens=9, stream=True, stream_options={"include_usage": True})
        via = [c.model_dump(exclude={"id", "created"}) for c in client.chat.completions.create(**kwargs)]
        assert via == [c.model_dump(exclude={"id", "created"}) for c in direct.chat.completions.create(**kwargs)]
        whole = client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=4)
        assert whole.usage.completion_tokens == 4
        assert [m.id for m in client.models.list()] == [MODEL]
        texts = list(client.completions.create(model=MODEL, prompt="x", max_tokens=3, stream=True))
        assert texts
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=10**8, stream=True)
        stream = client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=2000, stream=True)
        next(stream), next(stream), next(stream)
        stream.close()  # the client leaves mid-stream
        del stream
        gc.collect()
        scraped = _wait_for_records(url, 5)
    records = read_records(path)
    assert [(r.api, r.stream, r.status, r.error_kind) for r in records] == [
        ("chat", True, "ok", None), ("chat", False, "ok", None), ("completions", True, "ok", None),
        ("chat", True, "error", "http_400"), ("chat", True, "cancelled", "client_disconnected")]
    first = records[0]
    assert (first.output_tokens, first.output_tokens_source, first.model) == (9, "usage", MODEL)
    assert first.sent_ns < first.first_token_ns <= first.last_token_ns <= first.done_ns
    assert len(records[4].chunk_ns) < 2000
    assert "sk-secret-key-123" not in path.read_text()  # the key is passed on, never stored
    assert scraped[("tokenpace_requests_total", (("api", "chat"), ("error_kind", ""), ("model", MODEL),
                                                 ("status", "ok")))] == 2
    assert scraped[("tokenpace_requests_total", (("api", "chat"), ("error_kind", "http_400"), ("model", MODEL),
                                                 ("status", "error")))] == 1
    assert scraped[("tokenpace_ttft_seconds_count", (("api", "chat"), ("model", MODEL)))] == 2
    assert scraped[("tokenpace_proxy_added_seconds_count", ())] >= 4
    assert scraped[("tokenpace_window_requests", ())] == 5
    assert 0 <= scraped[("tokenpace_goodput_ratio", ())] <= 0.6  # 3 of 5 at most were ok


def _wait_for_records(url: str, count: int) -> dict:
    import time

    deadline = time.monotonic() + 10
    while True:
        scraped = metrics(url)
        if scraped.get(("tokenpace_window_requests", ()), 0) >= count or time.monotonic() > deadline:
            return scraped
        time.sleep(0.05)


def test_faults_through_the_proxy(make_proxy, tmp_path):
    faults = "reset-mid=at:1:3,http-429=at:2,stall-first=at:3:0.3,malformed-sse=at:4:2"
    server = start_server_process(BuiltinServerConfig(decode_base_s=0.002, faults=faults))
    path = tmp_path / "f.jsonl"
    try:
        with make_proxy(ProxyConfig(upstream=server.url, port=0, records_path=str(path))) as (url, _):
            client = openai.OpenAI(base_url=url, api_key="k", max_retries=0)
            call = dict(model=MODEL, messages=MSGS, max_tokens=8, stream=True)
            with pytest.raises(Exception):  # noqa: B017 - the SDK raises its HTTP library's error for a cut stream
                list(client.chat.completions.create(**call))
            with pytest.raises(openai.RateLimitError) as caught:
                client.chat.completions.create(**call)
            assert caught.value.response.headers.get("retry-after") == "1"  # passed through unchanged
            list(client.chat.completions.create(**call))
            raw = client.chat.completions.with_raw_response.create(**call)  # the malformed line reaches the client
            _wait_for_records(url, 4)
    finally:
        server.stop()
    del raw
    records = read_records(path)
    assert [(r.status, r.error_kind) for r in records] == [
        ("error", "reset_mid_stream"), ("error", "http_429"), ("ok", None), ("error", "malformed_sse")]
    assert len(records[0].chunk_ns) == 3
    assert (records[2].first_token_ns - records[2].sent_ns) / 1e9 >= 0.3
    assert records[1].retry_after_s == 1.0


def test_upstream_down_is_a_502_and_a_record(make_proxy, tmp_path):
    path = tmp_path / "d.jsonl"
    with make_proxy(ProxyConfig(upstream="http://127.0.0.1:9/v1", port=0, records_path=str(path))) as (url, _):
        client = openai.OpenAI(base_url=url, api_key="k", max_retries=0)
        with pytest.raises(openai.InternalServerError) as caught:
            client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=3)
        assert caught.value.status_code == 502
    [line] = path.read_text().splitlines()
    assert (json.loads(line)["status"], json.loads(line)["error_kind"]) == ("error", "connect")

"""The Prometheus export of an instrumented client, read with prometheus_client's own parser."""

from __future__ import annotations

import openai
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

import tokenpace
from tokenpace.instrumentation import PrometheusExporter
from tokenpace.metrics import parse_slo

MODEL = "tokenpace-sim"
MSGS = [{"role": "user", "content": "a prompt that must not be exported"}]


def scrape(exporter: PrometheusExporter) -> dict:
    text = generate_latest(exporter.registry).decode()
    assert "must not be exported" not in text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_histograms_counters_and_goodput(server_url, fault_url):
    # TTFT <= 200 ms: the fault server's third request stalls 0.3 s before its first token.
    exporter = PrometheusExporter(parse_slo("ttft=200ms"))
    records: list = []
    ok = tokenpace.instrument(openai.OpenAI(base_url=server_url, api_key="k", max_retries=0),
                              records=records, prometheus=exporter)
    faulty = tokenpace.instrument(openai.OpenAI(base_url=fault_url, api_key="k", max_retries=0),
                                  records=records, prometheus=exporter)
    for _ in range(2):
        list(ok.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=10, stream=True))
    with pytest.raises(Exception):  # noqa: B017 - reset mid-stream
        list(faulty.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=10, stream=True))
    with pytest.raises(openai.RateLimitError):
        faulty.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=10, stream=True)
    list(faulty.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=10, stream=True))  # stalled

    s = scrape(exporter)
    labels = (("api", "chat"), ("model", MODEL))
    assert s[("tokenpace_requests_total", (("api", "chat"), ("error_kind", ""), ("model", MODEL), ("status", "ok")))] == 3
    assert s[("tokenpace_requests_total", (("api", "chat"), ("error_kind", "http_429"), ("model", MODEL),
                                           ("status", "error")))] == 1
    assert s[("tokenpace_requests_total", (("api", "chat"), ("error_kind", "reset_mid_stream"), ("model", MODEL),
                                           ("status", "error")))] == 1
    assert s[("tokenpace_ttft_seconds_count", labels)] == 3  # ok requests only
    assert s[("tokenpace_ttft_seconds_bucket", (*labels[:1], ("le", "0.25"), labels[1]))] == 2  # the stall is above
    assert s[("tokenpace_itl_seconds_count", labels)] == 27  # 9 gaps of one token in each of 3 streams
    assert s[("tokenpace_tokens_total", (*labels, ("type", "output")))] == 30 + 2  # + 2 tokens before the reset
    assert s[("tokenpace_window_requests", ())] == 5
    assert s[("tokenpace_goodput_ratio", ())] == pytest.approx(2 / 5)
    assert len(records) == 5

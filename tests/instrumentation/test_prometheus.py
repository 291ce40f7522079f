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


def test_the_one_pass_export_matches_prometheus_clients_own_histograms():
    """The exporter buckets into its own arrays; prometheus_client's Histogram and Counter, fed the
    same records one sample at a time (ITL from metrics.latency.itl_samples), must scrape the same."""
    import random

    from prometheus_client import CollectorRegistry, Counter, Histogram

    from tokenpace.instrumentation import buckets
    from tokenpace.metrics.latency import e2e, itl_samples, tpot, ttft
    from tokenpace.record import RequestRecord

    rng = random.Random(7)
    records = []
    for i in range(300):
        sent = rng.randrange(10**9)
        n = rng.choice([0, 1, 2, 5, 40])
        gaps = [rng.choice([0.0004, 0.001, 0.0025, 0.003, 0.02, 0.6, 3.0]) for _ in range(n)]
        chunk_ns, at = [], sent + int(rng.choice([0.001, 0.005, 0.3, 12.0]) * 1e9)
        for g in gaps:
            at += int(g * 1e9)
            chunk_ns.append(at)
        tokens = [rng.choice([1, 1, 2, 3]) for _ in chunk_ns]
        status = rng.choice(["ok", "ok", "ok", "error", "cancelled"])
        records.append(RequestRecord(
            request_id=str(i), index=i, api=rng.choice(["chat", "completions"]), stream=rng.random() < 0.8,
            model=rng.choice(["a", "b", None]), sent_ns=sent, first_token_ns=chunk_ns[0] if chunk_ns else None,
            last_token_ns=chunk_ns[-1] if chunk_ns else None, chunk_ns=chunk_ns, chunk_tokens=tokens,
            output_tokens=sum(tokens) or None, prompt_tokens=rng.choice([None, 0, 17]),
            cached_prompt_tokens=rng.choice([None, 5]), reasoning_tokens=rng.choice([None, 3]),
            status=status, error_kind=None if status == "ok" else rng.choice(["http_429", "reset_mid_stream"])))
    exporter = PrometheusExporter()
    for r in records:
        exporter(r)

    reg = CollectorRegistry()
    labels = ("api", "model")
    hists = {name: Histogram(f"tokenpace_{name}_seconds", "x", labels, buckets=b, registry=reg) for name, b in
             (("ttft", buckets.TIME_TO_FIRST_CHUNK_S), ("tpot", buckets.ITL_S), ("itl", buckets.ITL_S),
              ("e2e", buckets.OPERATION_DURATION_S))}
    tokens = Counter("tokenpace_tokens", "x", (*labels, "type"), registry=reg)
    requests = Counter("tokenpace_requests", "x", (*labels, "status", "error_kind"), registry=reg)
    for r in records:
        key = (r.api, r.model or "")
        requests.labels(*key, r.status, r.error_kind or "").inc()
        if r.status == "ok":
            for name, measure in (("ttft", ttft), ("tpot", tpot), ("e2e", e2e)):
                if measure(r) is not None:
                    hists[name].labels(*key).observe(measure(r) / 1000)
            for sample in itl_samples(r):
                hists["itl"].labels(*key).observe(sample / 1000)
        for kind, count in zip(("input", "output", "cached_input", "reasoning"),
                               (r.prompt_tokens, r.output_tokens, r.cached_prompt_tokens, r.reasoning_tokens)):
            if count:
                tokens.labels(*key, kind).inc(count)

    def samples(registry) -> dict:
        text = generate_latest(registry).decode()
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for family in text_string_to_metric_families(text) for s in family.samples
                if not s.name.endswith("_created") and not s.name.startswith(("tokenpace_window", "tokenpace_goodput"))}

    got, want = samples(exporter.registry), samples(reg)
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-9), key
    assert want[("tokenpace_itl_seconds_count", (("api", "chat"), ("model", "a")))] > 100  # the test has ITLs to check

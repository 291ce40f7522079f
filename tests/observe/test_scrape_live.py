"""Scraping a real /metrics on loopback during a run: the built-in server (vLLM names) as a
separate process under run_bench, and small in-loop servers that fail, are missing, or are not
an engine."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiohttp import web

from tokenpace import BenchConfig, read_records, run_bench
from tokenpace.observe import EngineWatch, engine_metrics_section, metrics_url_for
from tokenpace.servers import BuiltinServerConfig, start_server_process

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def small_engine():
    """A parametric built-in server that runs 4 requests at a time and queues the rest."""
    server = start_server_process(BuiltinServerConfig(max_num_seqs=4, timings=True, decode_base_s=0.01))
    try:
        yield server
    finally:
        server.stop()


def _bench(url: str, tmp_path, *, concurrency: int, requests: int, **kw):
    return run_bench(BenchConfig(url=url, concurrency=concurrency, requests=requests, input_tokens="64",
                                 output_tokens="16", scrape_metrics=True, scrape_interval_s=0.2,
                                 progress=False, out=str(tmp_path / "run.json"), **kw))


@pytest.mark.slow
def test_queue_builds_past_max_num_seqs_and_histograms_count_the_run(small_engine, tmp_path):
    result = _bench(small_engine.url, tmp_path, concurrency=16, requests=64, warmup_requests=4)
    em = result.engine_metrics
    assert em["engine"] == "vllm" and em["url"] == metrics_url_for(small_engine.url)
    assert em["scrapes"]["failed"] == 0 and em["scrapes"]["ok"] >= 5
    s = em["series"]
    assert len(s["t_s"]) == em["scrapes"]["ok"] and s["t_s"][0] < 0 < s["t_s"][1]
    # 16 in flight against 4 slots: 12 wait while the run is in full swing.
    assert max(s["waiting"]) >= 8 and max(s["running"]) == 4
    assert em["peaks"]["waiting"]["queued_fraction"] >= 0.5
    # The run's own 68 requests (warmup included), not the server's earlier ones.
    assert em["histograms_ms"]["ttft"]["count"] == 68 == em["totals"]["prompt_tokens"] / 64
    assert em["diagnosis"][0]["rule"] == "compute_bound"
    ttft = em["vs_client"]["ttft"]
    assert ttft["client"]["count"] == 68
    # The engine's TTFT is inside the client's, queueing included: had it left the wait for a slot
    # out, the difference would be a whole request (16 x 10 ms) for most requests. (An upper bound
    # of 50 ms was the machine's speed.)
    assert 0 < ttft["mean_diff_ms"] < 0.5 * 16 * 10
    per = em["vs_client"]["per_request"]
    assert per["requests"] == 68 and per["ttft_minus_prompt_ms"]["min"] > 0
    # Queued requests waited for a slot: that is outside llama.cpp-style prompt time.
    assert per["ttft_minus_prompt_ms"]["p90"] > 100
    records = read_records(result.records_path)
    assert all(r.server_timing and r.server_timing["predicted_n"] == 16 for r in records)


@pytest.mark.slow
def test_no_queue_below_max_num_seqs(small_engine, tmp_path):
    em = _bench(small_engine.url, tmp_path, concurrency=2, requests=16).engine_metrics
    assert max(em["series"]["waiting"]) == 0 and em["histograms_ms"]["ttft"]["count"] == 16
    assert [f["rule"] for f in em["diagnosis"]] == ["no_queueing"]


@pytest.mark.slow
def test_shared_prefixes_without_cache_hits_are_diagnosed(small_engine, tmp_path):
    # The parametric server counts prefix-cache queries and never hits: a cache that is off.
    em = _bench(small_engine.url, tmp_path, concurrency=2, requests=8,
                shared_prefix="groups=2,prefix-tokens=256").engine_metrics
    assert em["totals"]["prefix_cache_queries"] > 8 * 256 and em["totals"]["prefix_cache_hit_rate"] == 0
    assert "low_prefix_hit_rate" in [f["rule"] for f in em["diagnosis"]]


@pytest.mark.slow
def test_without_the_flag_there_is_no_section_and_no_server_timing(tmp_path):
    result = run_bench(BenchConfig(concurrency=2, requests=4, output_tokens="4", builtin_timing="parametric",
                                   progress=False, out=str(tmp_path / "run.json")))
    assert result.engine_metrics is None
    assert all(r.server_timing is None for r in result.records)


class MetricsStub:
    """A /metrics on loopback that answers from a list of (status, body), repeating the last."""

    def __init__(self, answers: list[tuple[int, str]]) -> None:
        self.answers, self.served = answers, []

    @property
    def hits(self) -> int:
        return len(self.served)

    async def handle(self, request: web.Request) -> web.Response:
        status, body = self.answers[min(self.hits, len(self.answers) - 1)]
        self.served.append(status)
        return web.Response(status=status, text=body, content_type="text/plain")


async def _watch(stub: MetricsStub, seconds: float, *, until_hits: int = 0) -> tuple[EngineWatch, list[str]]:
    app = web.Application()
    app.router.add_get("/metrics", stub.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    warnings: list[str] = []
    try:
        async with EngineWatch(f"http://127.0.0.1:{port}/metrics", 0.1, warn=warnings.append) as watch:
            await asyncio.sleep(seconds)
            while stub.hits < until_hits:
                await asyncio.sleep(0.05)
    finally:
        await runner.cleanup()
    return watch, warnings


def test_failed_scrapes_are_counted_and_the_run_goes_on():
    text = (DATA / "vllm_v1.txt").read_text()
    stub = MetricsStub([(200, text), (500, "oops"), (200, text), (503, "busy")] * 3 + [(200, text)])
    watch, warnings = asyncio.run(_watch(stub, 0.3, until_hits=8))
    assert warnings == []
    c = watch.counts
    served = stub.served
    assert c.failed_by_kind == {f"http_{code}": served.count(code) for code in (500, 503) if code in served}
    assert c.failed == served.count(500) + served.count(503) >= 4 and c.ok == served.count(200) >= 4
    section = engine_metrics_section(watch, [], start_ns=None, prefix_shared=None)
    assert section["scrapes"]["failed"] == c.failed and len(section["series"]["t_s"]) == c.ok
    assert section["histograms_ms"]["ttft"] is None  # the stub never changes: no observation in the run


def test_a_missing_endpoint_is_one_warning_at_the_start():
    stub = MetricsStub([(404, "404: Not Found")])
    watch, warnings = asyncio.run(_watch(stub, 0.35))
    assert len(warnings) == 1 and "HTTP 404" in warnings[0] and "goes on without them" in warnings[0]
    assert watch.preflight_error and watch.counts.ok == 0 and watch.counts.failed_by_kind["http_404"] >= 3


def test_prometheus_text_from_no_known_engine_stops_the_poller():
    stub = MetricsStub([(200, (DATA / "not_an_engine.txt").read_text())])
    watch, warnings = asyncio.run(_watch(stub, 0.5))
    assert len(warnings) == 1 and "none of vLLM's" in warnings[0]
    assert stub.hits == 1 and watch.engine is None  # no point polling what we cannot read


def test_metrics_url_from_the_target():
    assert metrics_url_for("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/metrics"
    assert metrics_url_for("http://h:8000/v1/") == "http://h:8000/metrics"
    assert metrics_url_for("https://h/api") == "https://h/api/metrics"

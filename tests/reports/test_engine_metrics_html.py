"""The engine's scraped metrics (bench --scrape-metrics) in the HTML run report: a real run against
the built-in server (the engine simulator with 4 slots and prefix caching, 16 requests in flight,
prompts sharing prefixes), rendered and opened in Chromium; and constructed sections for engines
that expose less, or for runs without the section."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import replace
from html import unescape

import pytest

from tokenpace.cli.main import main
from tokenpace.reports.html import render_run_html
from tokenpace.reports.html.engine_metrics import engine_metrics_html, interval_hit_rate
from tokenpace.reports.html.markup import ms
from tokenpace.reports.run_data import load_run_data
from tokenpace.servers import BuiltinServerConfig, start_server_process
from tokenpace.simulator.config import SimConfig

from .chromium import artifacts_dir, visit
from .conftest import SCREENSHOTS
from .test_browser import PROBE, assert_renders
from .test_html import RUN_PLOTS, plots_in

SERIES_IDS = ("engine-waiting", "engine-running", "engine-kv-usage", "engine-prefix-hit-rate")


@pytest.fixture(scope="module")
def scraped_run(tmp_path_factory):
    """(result document, HTML path) of a scraped run, reported with `tokenpace report --html`."""
    d = tmp_path_factory.mktemp("scraped")
    run, html = d / "run.json", d / "run.html"
    server = start_server_process(BuiltinServerConfig(max_num_seqs=4, timings=True,
                                                      sim=SimConfig(prefix_caching=True)))
    try:
        code = main(["bench", "--url", server.url, "--requests", "48", "--concurrency", "16",
                     "--output-tokens", "32", "--shared-prefix", "groups=2,prefix-tokens=1024,per-group=24",
                     "--scrape-metrics", "--scrape-interval", "0.2", "--slo", "chat", "--gpu-hour-usd", "3",
                     "--out", str(run), "--quiet"])
    finally:
        server.stop()
    assert code == 0
    assert main(["report", str(run), "--html", str(html)]) == 0
    return json.loads(run.read_text()), html


def engine_section(html: str) -> str:
    match = re.search(r'<section id="engine-metrics">.*?</section>', html, re.S)
    assert match, "no engine-metrics section"
    return match.group(0)


def cells(section: str, first: str) -> list[str]:
    """The cells of the table row whose first cell is ``first``."""
    row = re.search(rf"<tr><td>{re.escape(first)}</td>(.*?)</tr>", section)
    assert row, first
    return [unescape(c) for c in re.findall(r"<td>(.*?)</td>", row.group(1))]


@pytest.mark.slow
def test_scraped_run_report_shows_the_engine_over_time(scraped_run):
    doc, html_path = scraped_run
    em = doc["engine_metrics"]
    html = html_path.read_text(encoding="utf-8")
    assert plots_in(html) == RUN_PLOTS + ["engine-metrics"]
    sec = engine_section(html)
    # One figure, every series the built-in server exposes drawn in it.
    svg = re.search(r'data-plot="engine-metrics">(<svg.*?</svg>)', sec, re.S).group(1)
    for gid in SERIES_IDS:
        assert f'id="{gid}"' in svg, gid
    assert "KV-cache usage (peak" in svg and "Prefix-cache hit rate per scrape interval" in svg
    assert 0.3 < em["totals"]["prefix_cache_hit_rate"] < 1  # the shared prefixes hit the cache
    assert f"whole run {em['totals']['prefix_cache_hit_rate']:.0%}" in svg
    # 16 in flight against 4 slots: the diagnosis names the queue, and the page says it.
    assert em["diagnosis"][0]["rule"] == "compute_bound"
    for finding in em["diagnosis"]:
        assert f'<li data-rule="{finding["rule"]}">' in sec
        assert unescape(sec).count(finding["message"]) == 1
    # The engine against the client: TTFT from the engine's histogram and from the records.
    ttft = em["vs_client"]["ttft"]
    row = cells(sec, "TTFT")
    assert row[:3] == [ms(ttft["engine"]["mean"]), ms(ttft["client"]["mean"]), f"{ttft['mean_diff_ms']:+,.1f} ms"]
    # The engine's own histograms over the run, and how the scraping went.
    hist_rows = re.findall(r"<tr><td>([^<]+)</td><td>([\d,]+)</td>", sec)
    assert ("TTFT", f"{em['histograms_ms']['ttft']['count']:,}") in hist_rows
    assert em["histograms_ms"]["ttft"]["count"] == 48
    assert cells(sec, "scrapes ok") == [str(em["scrapes"]["ok"])] and em["scrapes"]["ok"] >= 10
    assert cells(sec, "scrapes failed") == ["0"]
    assert cells(sec, "URL") == [em["url"]] and cells(sec, "engine") == ["vLLM"]


ENGINE_PROBE = """JSON.stringify({
  page: JSON.parse(%s),
  series: Object.fromEntries(%s.map(id => {
    const g = document.getElementById(id); const box = g ? g.getBoundingClientRect() : null;
    return [id, box && {width: box.width, height: box.height, paths: g.querySelectorAll('path').length}];
  })),
  findings: Array.from(document.querySelectorAll('#engine-metrics li[data-rule]')).map(li => ({
    rule: li.dataset.rule, text: li.innerText, height: li.getBoundingClientRect().height})),
})""" % (PROBE, json.dumps(SERIES_IDS))


@pytest.mark.slow
def test_scraped_run_report_in_chromium(chromium, scraped_run):
    doc, html = scraped_run
    seen = asyncio.run(visit(chromium, html, artifacts_dir() / "report-scrape-metrics.png", ENGINE_PROBE))
    print(f"\nscreenshot of {html.name} (--scrape-metrics): {seen['screenshot']}")
    SCREENSHOTS.append(f"{html.name} (--scrape-metrics): {seen['screenshot']}")
    probe = json.loads(seen["probe"])
    assert_renders(seen, probe["page"], RUN_PLOTS + ["engine-metrics"])
    engine_plot = next(p for p in probe["page"]["plots"] if p["id"] == "engine-metrics")
    assert engine_plot["height"] > 400  # three panels
    for gid, box in probe["series"].items():
        # Each series is drawn across most of the plot's width (the run lasts for many scrapes).
        assert box and box["paths"] >= 1 and box["width"] > 0.6 * engine_plot["width"], (gid, box)
    # The queue rose from 0 to 12: its curve spans a good part of its panel's height.
    assert probe["series"]["engine-waiting"]["height"] > 50
    assert [(f["rule"], f["text"]) for f in probe["findings"]] == [
        (f["rule"], f"{f['rule']}: {f['message']}") for f in doc["engine_metrics"]["diagnosis"]]
    assert all(f["height"] > 0 for f in probe["findings"])


def test_run_without_engine_metrics_has_no_engine_metrics_section(constructed_runs):
    data = load_run_data(constructed_runs["base"])
    assert "engine_metrics" not in data.doc
    without = render_run_html(data)
    with_null = render_run_html(replace(data, doc={**data.doc, "engine_metrics": None}))
    assert with_null == without
    assert "engine-metrics" not in without and "Engine metrics" not in without


def section(series: dict, engine: str | None, **extra) -> dict:
    return {"engine": engine, "engine_label": engine, "url": "http://127.0.0.1:9/metrics", "interval_s": 1.0,
            "scrapes": {"ok": len(series["t_s"]), "failed": 2, "failed_by_kind": {"timeout": 2},
                        "last_error": "timed out after 1 s"},
            "preflight_error": None, "series": series, "peaks": {}, "totals": {}, "histograms_ms": {},
            "histogram_window_s": None, "vs_client": {}, "diagnosis": [], **extra}


def panel_titles(html: str) -> list[str]:
    return [t for t in re.findall(r"<text[^>]*>([^<]+)</text>", html)
            if t.startswith(("Engine: requests", "KV-cache usage", "Prefix-cache hit rate"))]


def test_panels_follow_what_the_engine_exposes():
    t = [-0.5, 0.5, 1.5, 2.5]
    # llama.cpp: queue and slots, prompt tokens without the cached ones; no KV gauge.
    llama = engine_metrics_html(section({"t_s": t, "waiting": [0, 2, 1, 0], "running": [0, 4, 4, 1],
                                         "prompt_tokens": [0, 300, 600, 600],
                                         "prefix_cache_hits": [0, 100, 900, 900]}, "llamacpp"))
    assert [x.split(" (")[0] for x in panel_titles(llama)] == [
        "Engine: requests waiting and running", "Prefix-cache hit rate per scrape interval"]
    assert 'id="engine-kv-usage"' not in llama
    # TGI: only the queue and the batch.
    tgi = engine_metrics_html(section({"t_s": t, "waiting": [0, 3, 3, 0], "running": [0, 8, 8, 2]}, "tgi"))
    assert [x.split(" (")[0] for x in panel_titles(tgi)] == ["Engine: requests waiting and running"]
    # SGLang: a hit-rate gauge rather than counters.
    sglang = engine_metrics_html(section({"t_s": t, "kv_usage": [0, 0.4, 0.6, 0.1],
                                          "prefix_cache_hit_rate": [0, 0.5, 0.7, 0.7]}, "sglang"))
    assert [x.split(" (")[0] for x in panel_titles(sglang)] == ["KV-cache usage",
                                                                 "Prefix-cache hit rate"]
    assert "own gauge" in sglang and 'id="engine-prefix-hit-rate"' in sglang
    # Nothing plottable: no figure, but the scrapes are still accounted for.
    bare = engine_metrics_html(section({"t_s": t}, None))
    assert "data-plot" not in bare and "exposes none of the queue" in bare
    assert "<td>scrapes failed</td><td>2 (timeout ×2)</td>" in bare
    assert "<td>last error</td><td>timed out after 1 s</td>" in bare
    assert "No diagnosis" in bare


def test_hit_rate_per_interval_only_where_tokens_were_looked_up():
    s = {"t_s": [-0.1, 0.2, 0.4, 0.6, 0.8, 1.0],
         "prefix_cache_queries": [0, 1000, 1000, 3000, None, 3500],
         "prefix_cache_hits": [0, 250, 250, 2250, None, 2250]}
    rates = interval_hit_rate(s, "vllm")
    # 0.2–0.4: nothing looked up, no rate; 0.6–0.8 and 0.8–1.0: a missing scrape, no rate.
    assert rates.start_s.tolist() == [-0.1, 0.4] and rates.end_s.tolist() == [0.2, 0.6]
    assert rates.rate.tolist() == [0.25, 1.0]
    # llama.cpp counts the cached tokens apart from its prompt tokens: 100 hits of 400 looked up.
    llama = interval_hit_rate({"t_s": [0.0, 1.0], "prompt_tokens": [0, 300], "prefix_cache_hits": [0, 100]},
                              "llamacpp")
    assert llama.rate.tolist() == [0.25]
    assert interval_hit_rate({"t_s": [0.0, 1.0], "prompt_tokens": [0, 300],
                              "prefix_cache_hits": [0, 100]}, "vllm") is None  # no queries counter
    assert interval_hit_rate({"t_s": [0.0, 1.0], "prefix_cache_queries": [0, 0],
                              "prefix_cache_hits": [0, 0]}, "vllm") is None

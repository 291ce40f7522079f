"""Open the HTML reports in a real headless Chromium started by the test: the plots render, the
console stays clean, and the page makes no network request. A screenshot of each is kept as a
test artifact (path printed; see chromium.artifacts_dir).

Skipped when no Chromium is installed, unless TOKENPACE_REQUIRE_BROWSER=1 (set by .ci/run), which
turns the skip into a failure."""

from __future__ import annotations

import asyncio
import json

import pytest

from tokenpace.cli.main import main

from .chromium import artifacts_dir, visit
from .conftest import SCREENSHOTS
from .test_html import RUN_PLOTS

PROBE = """JSON.stringify({
  plots: Array.from(document.querySelectorAll('figure.plot')).map(f => {
    const svg = f.querySelector('svg'); const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
    return {id: f.dataset.plot, width: box.width, height: box.height,
            paths: svg ? svg.querySelectorAll('path').length : 0,
            text: svg ? svg.querySelectorAll('text').length : 0};
  }),
  cards: Array.from(document.querySelectorAll('.card')).map(c => c.dataset.card),
  title: document.title,
  scripts: document.scripts.length,
  images: Array.from(document.images).map(i => i.src),
  workload: (document.querySelector('#workload') || {}).innerText || null,
})"""


def open_report(chromium, html, name):
    shot = artifacts_dir() / f"{name}.png"
    seen = asyncio.run(visit(chromium, html, shot, PROBE))
    print(f"\nscreenshot of {html.name}: {seen['screenshot']}")
    SCREENSHOTS.append(f"{html.name}: {seen['screenshot']}")
    return seen, json.loads(seen["probe"])


def assert_renders(seen, page, expected_plots):
    assert seen["errors"] == [], seen["errors"]
    # The only request is the page itself, from disk.
    assert [u for u in seen["requests"] if not u.startswith("file://")] == [], seen["requests"]
    assert page["scripts"] == 0 and page["images"] == []
    assert [p["id"] for p in page["plots"]] == expected_plots
    for plot in page["plots"]:
        # Drawn at a readable size, with curves or bars and labelled axes.
        assert plot["width"] > 300 and plot["height"] > 150, plot
        assert plot["paths"] >= 5 and plot["text"] >= 4, plot
    assert page["cards"] == ["ttft", "tpot", "itl", "e2e", "throughput", "goodput", "cost"]
    assert seen["screenshot"].stat().st_size > 20_000


@pytest.mark.slow
def test_measured_run_report_in_chromium(chromium, tmp_path):
    run, html = tmp_path / "run.json", tmp_path / "run.html"
    code = main(["bench", "--requests", "64", "--concurrency", "16", "--output-tokens", "32",
                 "--slo", "chat", "--gpu-hour-usd", "3", "--out", str(run), "--quiet"])
    assert code == 0
    assert main(["report", str(run), "--html", str(html)]) == 0
    seen, page = open_report(chromium, html, "report-bench")
    assert_renders(seen, page, RUN_PLOTS)
    assert page["title"] == "tokenpace report: run.json"
    # The page says what each request asked for.
    assert "input tokens\t512" in page["workload"] and "output tokens\t32" in page["workload"]
    assert "chat API, streaming" in page["workload"]


@pytest.mark.slow
def test_simulation_report_in_chromium(chromium, tmp_path):
    run, html = tmp_path / "sim.json", tmp_path / "sim.html"
    assert main(["sim", "--requests", "300", "--concurrency", "32", "--prefix-caching",
                 "--shared-prefix-tokens", "512", "--slo", "chat", "--gpu-hour-usd", "3",
                 "--out", str(run), "--quiet"]) == 0
    assert main(["report", str(run), "--html", str(html)]) == 0
    seen, page = open_report(chromium, html, "report-sim")
    assert_renders(seen, page, RUN_PLOTS + ["engine-timeline"])


def test_a_page_that_fetches_is_caught(chromium, tmp_path):
    """The check itself works: a page with an external image is seen making a request."""
    html = tmp_path / "fetches.html"
    html.write_text('<!DOCTYPE html><html><body><img src="http://example.invalid/x.png"></body></html>')
    seen, _ = open_report(chromium, html, "fetches")
    assert any(u.startswith("http://example.invalid") for u in seen["requests"])
    assert seen["errors"]  # the failed load shows up as an error


@pytest.mark.slow
def test_anthropic_run_report_in_chromium(chromium, tmp_path):
    """A run through the Anthropic API with a cache breakpoint and token prices: the same report,
    plus the cache-use and token-cost lines, read from the rendered page."""
    run, html = tmp_path / "anthropic.json", tmp_path / "anthropic.html"
    assert main(["bench", "--api", "anthropic", "--requests", "48", "--concurrency", "8", "--output-tokens", "16",
                 "--shared-prefix", "groups=2,prefix-tokens=512,per-group=24", "--cache-breakpoint", "system",
                 "--input-usd-per-mtok", "3", "--output-usd-per-mtok", "15", "--slo", "chat",
                 "--gpu-hour-usd", "3", "--out", str(run), "--quiet"]) == 0
    assert main(["report", str(run), "--html", str(html)]) == 0
    seen, page = open_report(chromium, html, "report-anthropic")
    assert_renders(seen, page, RUN_PLOTS)
    text = asyncio.run(visit(chromium, html, artifacts_dir() / "report-anthropic-text.png",
                             "document.body.innerText"))["probe"]
    text = " ".join(text.split())  # the console summary is wrapped to the page's width
    assert "Cache use (Anthropic):" in text and " writes (TTFT p50" in text and " reads (TTFT p50" in text
    assert "Token cost ($3 in / $15 out per 1M tokens; cache write ×1.25, read ×0.1)" in text

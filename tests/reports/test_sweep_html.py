"""The sweep report's curves, built from step summaries (the sweep command and its document come
with issue 6; only the adapter from that document is missing). Opened in a real Chromium too."""

from __future__ import annotations

import asyncio
import json
import re

from tokenpace.metrics import summarize
from tokenpace.reports.html.sweep_page import render_sweep_html
from tokenpace.reports.html.sweep_plots import SweepStep

from .chromium import artifacts_dir, visit
from .conftest import SCREENSHOTS
from .runs import make_records
from .test_browser import PROBE


def steps() -> list[SweepStep]:
    """Two --vary combinations over four loads: latency and goodput as a saturating engine gives."""
    out = []
    for group, slowdown in (("policy=prefill-first", 1.6), ("policy=chunked-prefill", 1.0)):
        for i, load in enumerate((1, 4, 16, 32)):
            records = make_records(n=200, ttft_ms=80 * (1 + slowdown * i * i), every_ms=200 / load,
                                   itl_ms=8 + 4 * i, errors=10 * i, seed=i)
            out.append(SweepStep(load, summarize(records, slo="chat", gpu_hour_usd=3.0), group, knee=i == 2))
    return out


def render() -> str:
    return render_sweep_html("tokenpace sweep: test", steps(), load_label="concurrency",
                             limits_ms={"ttft": 500.0, "tpot": 50.0},
                             recommendations=[{"SLO": "chat", "concurrency": 16, "goodput req/s": 70.1,
                                               "$ per 1M output": 0.41}])


def test_sweep_page_has_curves_table_and_recommendations():
    html = render()
    assert re.findall(r'data-plot="([^"]+)"', html) == ["sweep-latency", "sweep-goodput", "sweep-cost"]
    assert "<script" not in html
    assert html.count("policy=chunked-prefill") >= 4  # legend and steps table
    assert "Recommended operating points" in html and "70.1" in html


def test_sweep_page_in_chromium(chromium, tmp_path):
    html = tmp_path / "sweep.html"
    html.write_text(render(), encoding="utf-8")
    seen = asyncio.run(visit(chromium, html, artifacts_dir() / "report-sweep.png", PROBE))
    print(f"\nscreenshot of sweep.html: {seen['screenshot']}")
    SCREENSHOTS.append(f"sweep.html: {seen['screenshot']}")
    page = json.loads(seen["probe"])
    assert seen["errors"] == [] and [u for u in seen["requests"] if not u.startswith("file://")] == []
    assert [p["id"] for p in page["plots"]] == ["sweep-latency", "sweep-goodput", "sweep-cost"]
    assert all(p["width"] > 300 and p["paths"] >= 5 for p in page["plots"])

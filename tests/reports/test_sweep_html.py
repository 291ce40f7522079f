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


def _real_sweep(tmp_path):
    """A --vary sweep on the simulator, as `tokenpace sweep --sim` writes it."""
    from tokenpace.config import BenchConfig
    from tokenpace.simulator.config import SimConfig
    from tokenpace.sweep import SweepConfig, run_sweep

    config = SweepConfig(base=BenchConfig(duration_s=20, input_tokens="1024", output_tokens="128", slo="chat",
                                          progress=False),
                         axis="rate", loads=[5, 15, 25, 35, 50], sim=SimConfig(),
                         vary=[("policy", ["prefill-first", "chunked-prefill"])], out=str(tmp_path / "s.json"))
    return run_sweep(config)


def test_report_of_a_sweep_file_in_chromium(chromium, tmp_path):
    from tokenpace.reports.html.sweep_document import write_sweep_html
    from tokenpace.results import load_document

    result = _real_sweep(tmp_path)
    doc = load_document(result.path)
    html = write_sweep_html(doc, tmp_path / "sweep-doc.html")
    text = html.read_text()
    assert "Findings" in text and "The knee is at" in text and "policy=chunked-prefill" in text
    assert "GPU-h / 1M output" in text  # no price given: the cost in GPU-hours
    seen = asyncio.run(visit(chromium, html, artifacts_dir() / "report-sweep-doc.png", PROBE))
    SCREENSHOTS.append(f"sweep-doc.html: {seen['screenshot']}")
    page = json.loads(seen["probe"])
    assert seen["errors"] == [] and [u for u in seen["requests"] if not u.startswith("file://")] == []
    assert [p["id"] for p in page["plots"]] == ["sweep-latency", "sweep-goodput", "sweep-cost"]
    # Two combinations: p50 and p99 lines for each, plus the SLO limit and the knee markers.
    assert all(p["width"] > 300 and p["paths"] >= 5 for p in page["plots"])

"""The sweep report: its curves built from step summaries, and the page of a real sweep file, which
names what was swept. Opened in a real Chromium too."""

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


SWEEP_PLOTS = ["sweep-latency", "sweep-goodput", "sweep-cost", "sweep-pareto"]


def test_sweep_page_has_curves_table_and_recommendations():
    html = render()
    assert re.findall(r'data-plot="([^"]+)"', html) == SWEEP_PLOTS
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
    assert [p["id"] for p in page["plots"]] == SWEEP_PLOTS
    assert all(p["width"] > 300 and p["paths"] >= 5 for p in page["plots"])


def _tick_labels(svg: str) -> list[float]:
    """The numbers the axes print (tick labels are SVG text: svg.fonttype none)."""
    texts = re.findall(r">\s*([−-]?[\d,]+(?:\.\d+)?)\s*</text>", svg)
    return [float(t.replace(",", "").replace("−", "-")) for t in texts]


def test_an_slo_limit_far_above_the_curves_is_an_arrow_not_a_squashing_line():
    from tokenpace.reports.html.sweep_plots import latency_vs_throughput_svg

    far = latency_vs_throughput_svg(steps(), {"ttft": 60_000.0, "tpot": 5_000.0})
    assert "SLO ≤ 60,000 ms (above)" in far and "SLO ≤ 5,000 ms (above)" in far
    assert max(_tick_labels(far)) < 5_000  # neither axis was stretched to its limit
    near = latency_vs_throughput_svg(steps(), {"ttft": 500.0})
    assert "(above)" not in near and "SLO ≤ 500 ms" in near  # a limit among the data is a line


def test_goodput_has_its_y_equals_x_line_and_cost_a_log_axis():
    from tokenpace.reports.html.sweep_plots import per_load_svg

    goodput = per_load_svg(steps(), "g", "Goodput", "requests/s", (("goodput.requests_s", "goodput"),),
                           "request rate (req/s)", identity=True)
    assert "y = x (all offered load good)" in goodput
    def cost(log_y):
        return per_load_svg(steps(), "c", "Cost", "$", (("cost.usd_per_1m_output_tokens", "per 1M"),),
                            "concurrency", log_y=log_y)

    # A log axis labels its ticks as powers of ten: a base and a raised exponent (SVG tspans).
    assert "(log scale)" in cost(True) and "<tspan" in cost(True)
    assert "<tspan" not in cost(False)


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


NAMES = """JSON.stringify({
  headline: document.querySelector('p.headline').innerText,
  configuration: document.querySelector('#configuration').innerText,
  steps_header: Array.from(document.querySelectorAll('#steps th')).map(th => th.innerText),
  recommendations: document.querySelectorAll('#recommendations tbody tr').length,
})"""


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
    assert [p["id"] for p in page["plots"]] == SWEEP_PLOTS
    # What a reader sees names the model, its hardware and precision, and the workload.
    shot = artifacts_dir() / "report-sweep-doc-names.png"
    named = json.loads(asyncio.run(visit(chromium, html, shot, NAMES))["probe"])
    for where in (named["headline"], named["configuration"]):
        assert "simulated llama-3.1-8b on 1× h100-sxm (TP 1), bf16 weights" in where
        assert "input 1024 tokens, output 128 tokens" in where
        assert "chat (TTFT ≤ 500 ms, TPOT ≤ 50 ms for 90% of requests)" in where
    assert "roofline" in named["configuration"] and "tokenpace " in named["configuration"]
    assert "policy prefill-first, chunked-prefill" in named["configuration"]
    assert named["steps_header"][1:3] == ["offered request rate (req/s)", "achieved"]
    assert named["recommendations"] == 2 * 4  # one row per (combination, preset); the SLO is the chat preset
    # Two combinations: p50 and p99 lines for each, plus the SLO limit and the knee markers.
    assert all(p["width"] > 300 and p["paths"] >= 5 for p in page["plots"])

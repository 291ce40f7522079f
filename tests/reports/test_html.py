"""The HTML report's content, read as text: every section and plot is there, nothing is fetched,
and partial or record-only input works. (test_browser.py opens it in a real browser.)"""

from __future__ import annotations

import re

from tokenpace.cli.main import main
from tokenpace.reports.html import render_run_html
from tokenpace.reports.run_data import load_run_data

from .runs import make_records, write_run

RUN_PLOTS = [f"{kind}-{m}" for m in ("ttft", "tpot", "itl", "e2e") for kind in ("cdf", "hist")] + [
    "request-timeline", "load-over-time"]
SECTIONS = ["workload", "summary", "distributions", "timeline", "load", "tokens", "load-generator", "console",
            "configuration", "definitions"]


def plots_in(html: str) -> list[str]:
    return re.findall(r'<figure class="plot" data-plot="([^"]+)">\s*<svg', html)


def test_run_report_has_every_section_and_plot(constructed_runs, tmp_path):
    out = tmp_path / "run.html"
    assert main(["report", str(constructed_runs["errors"]), "--html", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    assert plots_in(html) == RUN_PLOTS
    for section in SECTIONS:
        assert f'<section id="{section}">' in html
    for card in ("ttft", "tpot", "itl", "e2e", "throughput", "goodput", "cost"):
        assert f'data-card="{card}"' in html
    assert "SLO ≤ 500 ms" in html and "SLO MISSED" not in html  # 90% good meets the 90% attainment
    assert "vLLM bench serve, SGLang" in html and "guidellm" in html  # other tools' names
    assert "&quot;model&quot;: &quot;constructed&quot;" in html  # the exact configuration


def test_report_is_self_contained(constructed_runs):
    html = render_run_html(load_run_data(constructed_runs["base"]))
    assert "<script" not in html and "<link" not in html and "@import" not in html
    assert "@font-face" not in html
    assert not re.findall(r"url\((?!#)", html)  # only references to ids in the page (clip paths)
    # The only URLs are XML namespace names inside the SVGs, which are never fetched.
    urls = set(re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)""", html))
    assert not {u for u in urls if not u.startswith("#")}, urls


def test_same_run_same_bytes(constructed_runs):
    data = load_run_data(constructed_runs["base"])
    assert render_run_html(data) == render_run_html(data)


def test_large_run_timeline_is_subsampled_and_says_so(tmp_path):
    run = write_run(tmp_path, "big", make_records(n=1500, every_ms=5.0))
    html = render_run_html(load_run_data(run))
    assert "400 of 1500 requests, evenly subsampled" in html
    assert "Subsampled for size" in html


def test_partial_jsonl_report(tmp_path, capsys):
    write_run(tmp_path, "run", make_records(n=50))
    jsonl = tmp_path / "run.records.jsonl"
    with open(jsonl, "ab") as fh:
        fh.write(b'{"request_id": "torn')
    out = tmp_path / "partial.html"
    assert main(["report", str(jsonl), "--html", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    assert plots_in(html) == RUN_PLOTS
    assert "Records only" in html
    assert "1 unreadable line(s) skipped" in capsys.readouterr().out


def test_missing_records_file_is_said_not_fatal(tmp_path):
    run = write_run(tmp_path, "run", make_records(n=50))
    (tmp_path / "run.records.jsonl").unlink()
    html = render_run_html(load_run_data(run))
    assert "records file run.records.jsonl not found" in html
    assert 'data-card="ttft"' in html and plots_in(html) == []


def test_simulation_report_has_engine_timeline(tmp_path):
    out = tmp_path / "sim.json"
    assert main(["sim", "--requests", "120", "--concurrency", "16", "--prefix-caching",
                 "--shared-prefix-tokens", "256", "--input-tokens", "256", "--output-tokens", "32",
                 "--out", str(out), "--quiet"]) == 0
    html = render_run_html(load_run_data(out))
    assert plots_in(html) == RUN_PLOTS + ["engine-timeline"]
    assert "Prefix-cache hit rate" in html and "KV-cache usage" in html
    assert "Simulation: timestamps are virtual time" in html


def test_a_run_with_a_columnar_file_is_drawn_from_it_and_says_what_it_subsampled(tmp_path, monkeypatch):
    from tokenpace.reports import series
    from tokenpace.results.columnar import columns_path, write_table

    records = make_records(n=300, every_ms=5.0)
    run = write_run(tmp_path, "big", records)
    plain = render_run_html(load_run_data(run, table=True))  # no columnar file: from the JSONL
    write_table(columns_path(tmp_path / "big.records.jsonl"), records)
    data = load_run_data(run, table=True)
    assert not isinstance(data.records, list)  # the table, its chunks left on disk
    assert render_run_html(data) == plain  # every request's ITL drawn: the same page
    monkeypatch.setattr(series, "MAX_ITL_REQUESTS", 50)
    html = render_run_html(load_run_data(run, table=True))
    assert plots_in(html) == RUN_PLOTS
    streamed = sum(1 for r in records if r.measured and r.status == "ok" and r.stream)
    step = -(-streamed // 50)
    assert (f"the tokens of every {step}th streamed ok request ({len(range(0, streamed, step))} of "
            f"{streamed})") in html

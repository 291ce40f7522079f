"""The plan page (`tokenpace plan --html`), from a real plan, opened in a real Chromium."""

from __future__ import annotations

import asyncio
import json

from tokenpace.cli.main import main

from .chromium import artifacts_dir, visit
from .conftest import SCREENSHOTS
from .test_browser import PROBE

WINNER_PROBE = PROBE[:-2] + """  winner: document.querySelector('#winner .winner').textContent,
  ranked: document.querySelectorAll('#ranked tbody tr').length,
})"""


def test_plan_page_in_chromium(chromium, tmp_path):
    out, html = tmp_path / "plan.json", tmp_path / "plan.html"
    code = main(["plan", "--model", "llama-3.1-8b", "--rate", "30", "--slo", "chat", "--gpus", "h100-sxm,l40s",
                 "--quant", "fp8", "--tp", "1,2", "--input-tokens", "512", "--output-tokens", "128",
                 "--out", str(out), "--html", str(html)])
    assert code == 0
    doc = json.loads(out.read_text())
    seen = asyncio.run(visit(chromium, html, artifacts_dir() / "report-plan.png", WINNER_PROBE))
    SCREENSHOTS.append(f"plan.html: {seen['screenshot']}")
    page = json.loads(seen["probe"])
    assert seen["errors"] == [] and [u for u in seen["requests"] if not u.startswith("file://")] == []
    assert page["scripts"] == 0
    assert [p["id"] for p in page["plots"]] == ["plan-frontier", "plan-finalists"]
    assert all(p["width"] > 300 and p["paths"] >= 4 and p["text"] >= 4 for p in page["plots"])
    assert page["title"] == "tokenpace plan: llama-3.1-8b at 30 req/s"
    assert page["winner"] == doc["winner"]["sentence"]
    assert page["ranked"] == len(doc["ranked"])

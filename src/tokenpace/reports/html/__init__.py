"""The HTML report of a run: one self-contained file (inline CSS and SVG plots, no script)."""

from __future__ import annotations

from pathlib import Path

from tokenpace.files import write_whole
from tokenpace.reports.html.page import render_run_html
from tokenpace.results import RunData

__all__ = ["render_run_html", "write_run_html"]


def write_run_html(data: RunData, path: str | Path) -> Path:
    return write_page(render_run_html(data), path)


def write_page(html: str, path: str | Path) -> Path:
    """Write a rendered page atomically (never a half-written report)."""
    return write_whole(path, html.encode("utf-8"), what="the HTML report")

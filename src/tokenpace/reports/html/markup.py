"""Tiny HTML helpers: every piece of text from a run goes through ``esc``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from typing import Any


def esc(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def section(section_id: str, title: str, body: str) -> str:
    return f'<section id="{esc(section_id)}"><h2>{esc(title)}</h2>{body}</section>'


def plot(plot_id: str, svg: str, caption: str = "") -> str:
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
    return f'<figure class="plot" data-plot="{esc(plot_id)}">{svg}{cap}</figure>'


def num(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def ms(value: float | None) -> str:
    return "—" if value is None else (f"{value:.1f} ms" if value < 1000 else f"{value / 1000:,.2f} s")

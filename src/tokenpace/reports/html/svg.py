"""Matplotlib figures as inline SVG text: no JavaScript, no fonts, no network when opened.

Text is left as text (``svg.fonttype: none``) so the browser draws it with its own sans-serif
font: smaller files than glyph outlines, and selectable. Each figure gets its own hash salt so
that the ids of several SVGs in one page never collide, and no date is written, so the same run
gives the same bytes.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager

import matplotlib

matplotlib.use("Agg")  # never look for a display

from matplotlib.figure import Figure  # noqa: E402

_STYLE = {
    "svg.fonttype": "none",
    "font.family": "sans-serif",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.titlesize": 10,
    "axes.titleweight": "bold",
    "axes.titlelocation": "left",
}
COLORS = {"wait": "#9e9e9e", "ttft": "#f39c12", "stream": "#2e86de", "error": "#c0392b",
          "p50": "#27ae60", "p99": "#8e44ad", "limit": "#c0392b", "base": "#2e86de"}


@contextmanager
def figure(name: str, width_in: float = 5.2, height_in: float = 3.0, rows: int = 1,
           cols: int = 1, sharex: bool = False) -> Iterator[tuple[Figure, object]]:
    """Fixed margins, in inches, rather than a layout engine: constrained layout measured every
    tick label again and took half of the report's rendering time."""
    with matplotlib.rc_context({**_STYLE, "svg.hashsalt": f"tokenpace-{name}"}):
        fig = Figure(figsize=(width_in, height_in))
        fig.subplots_adjust(left=0.75 / width_in, right=1 - 0.65 / width_in, bottom=0.5 / height_in,
                            top=1 - 0.3 / height_in, hspace=0.45 * rows / max(height_in, 1))
        axes = fig.subplots(rows, cols, sharex=sharex, squeeze=True)
        yield fig, axes


def to_svg(fig: Figure, name: str) -> str:
    with matplotlib.rc_context({**_STYLE, "svg.hashsalt": f"tokenpace-{name}"}):
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog and DOCTYPE: the SVG is inline

"""`tokenpace sim --members N`'s table: each headline figure's spread over the step-noise members."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def render_members(section: dict[str, Any], console: Console) -> None:
    """Min, median and max of each figure over the members, and its spread (max − min over the median)."""
    seeds = section["noise_seeds"]
    table = Table(title=f"Run to run: {section['members']} members, step noise {section['step_noise']:g} "
                        f"(noise seeds {seeds[0]}–{seeds[-1]}; files: seed {seeds[0]}'s)",
                  title_justify="left", box=None, header_style="bold", pad_edge=False)
    for i, col in enumerate(("figure", "this run", "min", "median", "max", "spread")):
        table.add_column(col, justify="left" if i == 0 else "right")
    for f in section["figures"].values():
        first = f["values"][0]
        cells = ["—" if v is None else f"{v:,.1f}" for v in (first, f["min"], f["median"], f["max"])]
        spread = "—" if f["spread_pct"] is None else f"{f['spread_pct']:.1f}%"
        table.add_row(f["label"], *cells, spread)
    console.print(table)

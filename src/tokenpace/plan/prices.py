"""GPU prices for the planner: dollars per GPU-hour, plain data with a source and a date per price
(data/prices.json, an example), and a user's file that replaces entries by GPU id."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from tokenpace.errors import UsageError
from tokenpace.simulator.catalog import get_gpu


@dataclass(frozen=True)
class Price:
    gpu: str  # catalog id
    usd_per_gpu_hour: float
    source: str
    read: str | None = None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "usd_per_gpu_hour": self.usd_per_gpu_hour, "source": self.source,
                "read": self.read, "note": self.note}


def _entries(doc: Any, where: str) -> list[Price]:
    if not isinstance(doc, dict) or not isinstance(doc.get("prices"), list):
        raise UsageError(f"{where}: expected an object with a \"prices\" list")
    out = []
    for i, e in enumerate(doc["prices"]):
        try:
            gpu = get_gpu(str(e["gpu"])).id
            usd = float(e["usd_per_gpu_hour"])
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"{where}: prices[{i}]: needs a known \"gpu\" and a number "
                             f"\"usd_per_gpu_hour\" ({exc})") from None
        if not usd > 0:
            raise UsageError(f"{where}: prices[{i}]: usd_per_gpu_hour must be > 0, not {usd!r}")
        out.append(Price(gpu, usd, str(e.get("source", where)), e.get("read"), e.get("note")))
    return out


def load_prices(path: str | Path | None = None) -> dict[str, Price]:
    """GPU id -> price: the shipped example, with ``path``'s entries replacing it by GPU id."""
    shipped = json.loads(resources.files("tokenpace.plan").joinpath("data/prices.json").read_text("utf-8"))
    prices = {p.gpu: p for p in _entries(shipped, "tokenpace's example prices")}
    if path is not None:
        try:
            doc = json.loads(Path(path).read_text("utf-8"))
        except FileNotFoundError:
            raise UsageError(f"--prices: {path}: no such file") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UsageError(f"--prices: {path}: not a JSON price table ({exc})") from None
        prices.update({p.gpu: p for p in _entries(doc, str(path))})
    return prices

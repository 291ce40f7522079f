"""``sim_fidelity.py --write-band``: the simulator's validated error, written where every simulated
run and every plan quotes it (``src/tokenpace/simulator/data/error_band.json``).

One entry per predictor ("roofline": the engine presets' roofline, sim_fidelity's "after";
"kernels"), each from the issue's points (published_points.json and REFERENCE section 5): the
median |error| per metric group as a fraction, the points behind each, the largest errors, and the
extra points' medians beside them. The file's other entries (the calibration's note) are kept.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

BAND_FILE = Path(__file__).resolve().parents[1] / "src" / "tokenpace" / "simulator" / "data" / "error_band.json"
KEYS = {"throughput": "throughput", "TTFT": "ttft", "TPOT/ITL": "tpot"}  # metric group -> the band's key
WORST = 3


def _medians(rows: list[dict], when: str) -> tuple[dict[str, float], dict[str, int]]:
    medians, points = {}, {}
    for group, key in KEYS.items():
        errs = [abs(r[f"{when}_error_pct"]) for r in rows
                if r["group"] == group and r.get(f"{when}_error_pct") is not None]
        if errs:
            medians[key] = round(statistics.median(errs) / 100, 3)
            points[key] = len(errs)
    return medians, points


def band_entry(rows: list[dict], extra_rows: list[dict], when: str, date: str, command: str) -> dict | None:
    """The entry for ``when`` ("after" or "kernels"), or None when no point has its estimate."""
    medians, points = _medians(rows, when)
    if set(medians) != set(KEYS.values()):
        return None
    scored = sorted((r for r in rows if r.get(f"{when}_error_pct") is not None),
                    key=lambda r: -abs(r[f"{when}_error_pct"]))
    worst = "; ".join(f"{r[f'{when}_error_pct']:+.1f}% ({r['point']} {r['metric']})" for r in scored[:WORST])
    extra, extra_points = _medians(extra_rows, when)
    label = {key: group for group, key in KEYS.items()}
    said = ", ".join(f"{label[k]} {v:.1%} on {extra_points[k]}" for k, v in extra.items())
    return {
        "source": f"`{command}`, {date}: {len(scored)} published figures (../shared/published_points.json and "
                  f"REFERENCE section 5)" + (f"; the extra ones of benchmarks/extra_points.json: {said}" if extra else ""),
        "points": points,
        "median_abs_error": medians,
        "worst_abs_error": round(abs(scored[0][f"{when}_error_pct"]) / 100, 3),
        "worst": worst,
        **({"extra_median_abs_error": extra, "extra_points": extra_points} if extra else {}),
    }


def write_band(rows: list[dict], extra_rows: list[dict], date: str, command: str, path: Path = BAND_FILE) -> dict:
    """Replace the roofline and kernels entries of ``path`` (a predictor with no estimate on any
    point keeps its entry) and return the new document."""
    doc = json.loads(path.read_text("utf-8"))
    for name, when in (("roofline", "after"), ("kernels", "kernels")):
        entry = band_entry(rows, extra_rows, when, date, command)
        if entry is not None:
            doc[name] = entry
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", "utf-8")
    return doc

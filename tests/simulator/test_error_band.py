"""The simulator's validated error: the shipped file's entries, and `sim_fidelity.py --write-band`,
which writes them from a fidelity run (its band builder on hand-made rows)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tokenpace.reports.validated import band_text
from tokenpace.simulator.error_band import error_band, error_bands

ROOT = Path(__file__).resolve().parents[2]


def _band_module():
    spec = importlib.util.spec_from_file_location("_fidelity_band", ROOT / "benchmarks" / "_fidelity_band.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def row(point: str, group: str, after: float | None, kernels: float | None = None, metric: str = "m") -> dict:
    return {"point": point, "metric": metric, "group": group, "after_error_pct": after, "kernels_error_pct": kernels}


def test_the_shipped_file_has_an_entry_per_way_a_step_is_priced():
    bands = error_bands()
    assert set(bands) == {"roofline", "kernels", "calibration"}
    for name in ("roofline", "kernels"):
        m = bands[name]["median_abs_error"]
        assert set(m) == {"throughput", "ttft", "tpot"} and all(0 < v < 1 for v in m.values())
        assert bands[name]["worst"] and bands[name]["source"]
    assert bands["calibration"]["note"] and "median_abs_error" not in bands["calibration"]
    assert error_band("kernels") == bands["kernels"]
    assert error_band("kernels", calibrated=True) == bands["calibration"]  # a calibration's own record


def test_band_text_gives_the_medians_then_the_worst():
    band = {"median_abs_error": {"throughput": 0.036, "ttft": 0.1, "tpot": 0.025},
            "points": {"throughput": 20, "ttft": 10, "tpot": 7}, "worst_abs_error": 0.376,
            "worst": "+37.6% (a ttft_ms)", "source": "s"}
    assert band_text(band) == ("median |error| throughput 3.6%, TTFT 10.0%, TPOT/ITL 2.5% on 20/10/7 published "
                               "points; worst +37.6% (a ttft_ms)")
    assert band_text(band, worst=False).endswith("on 20/10/7 published points, worst 38%")
    assert band_text({"note": "fitted to your runs", "source": "s"}) == "fitted to your runs"


def test_write_band_takes_the_medians_and_worst_of_the_issues_points_and_keeps_the_rest(tmp_path):
    band = _band_module()
    rows = [row("a", "throughput", +2.0, -1.0), row("b", "throughput", -6.0, +3.0), row("c", "throughput", +4.0),
            row("d", "TTFT", +37.6, +39.4, metric="ttft_ms"), row("e", "TTFT", -10.0, -8.0),
            row("f", "TPOT/ITL", +2.5, None), row("g", "E2E", +50.0, +50.0)]
    extra = [row("x", "throughput", +7.0, +8.0), row("y", "TPOT/ITL", -9.0, -9.6)]
    path = tmp_path / "error_band.json"
    path.write_text(json.dumps({"_about": "kept", "calibration": {"source": "hand", "note": "kept too"},
                                "kernels": {"source": "old"}}))
    doc = band.write_band(rows, extra, "2026-12-06", "python benchmarks/sim_fidelity.py --write-band", path)

    roof = doc["roofline"]
    assert roof["median_abs_error"] == {"throughput": 0.04, "ttft": 0.238, "tpot": 0.025}  # |errors| 2, 4, 6 ...
    assert roof["points"] == {"throughput": 3, "ttft": 2, "tpot": 1}
    # The worst are the largest |errors| of any group (E2E's too), largest first.
    assert roof["worst"].startswith("+50.0% (g m); +37.6% (d ttft_ms); -10.0% (e m)")
    assert roof["worst_abs_error"] == 0.5
    assert roof["extra_median_abs_error"] == {"throughput": 0.07, "tpot": 0.09}
    assert "--write-band`, 2026-12-06" in roof["source"]
    # The kernel predictor has no TPOT/ITL estimate here: its old entry stays, as do the others.
    assert doc["kernels"] == {"source": "old"}
    assert doc["calibration"] == {"source": "hand", "note": "kept too"} and doc["_about"] == "kept"
    assert json.loads(path.read_text()) == doc


def test_write_band_refuses_a_partial_run():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sim_fidelity.py"), "--write-band",
                           "--only", "l40s"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--write-band needs the whole run" in proc.stderr


@pytest.mark.parametrize("name", ["roofline", "kernels"])
def test_the_shipped_entries_are_what_the_writer_writes(name):
    """The shipped roofline and kernels entries carry every field the writer writes (they came from it)."""
    assert {"source", "points", "median_abs_error", "worst_abs_error", "worst"} <= set(error_bands()[name])

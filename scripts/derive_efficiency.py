"""Derive the roofline's efficiencies from aiconfigurator-core's measured kernel tables.

    python scripts/derive_efficiency.py                 # print every figure with its samples' spread
    python scripts/derive_efficiency.py --write         # and rewrite data/efficiency_measured.json and efficiency_moe.json
    python scripts/derive_efficiency.py --gpu h100-sxm  # one GPU

Needs the kernels extra (``pip install 'tokenpace[kernels]'``). For every GPU of our catalog that
the installed tables cover and every engine (vLLM, SGLang, TensorRT-LLM, at the newest version the
package ships, as ``--predictor kernels`` reads them), it computes each operator class's fraction of
the GPU catalog's peak over representative shapes (``tokenpace.simulator.kernels.derive`` says
which, and which statistic), and with ``--write`` writes them as efficiency-catalog entries, each
figure's source naming the tables, shapes, statistic and this command. The simulator reads that
file as static data: it never loads a table at simulation time.

A script, not a benchmark: it times nothing. It writes package data, as make_sample_datasets.py does.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from importlib.metadata import version
from pathlib import Path

import pyarrow.parquet as pq

from tokenpace.simulator.catalog import get_gpu
from tokenpace.simulator.kernels import derive
from tokenpace.simulator.kernels.tables import BACKENDS, GPU_SYSTEMS, load_tables, tables_available

OUT = Path(__file__).resolve().parents[1] / "src" / "tokenpace" / "simulator" / "data" / "efficiency_measured.json"
MOE_OUT = OUT.with_name("efficiency_moe.json")
MOE_ABOUT = ("The moe_efficiency figures derived from NVIDIA aiconfigurator-core's measured MoE tables, written by "
             "`python scripts/derive_efficiency.py --write`: do not edit by hand. Entries as in "
             "efficiency_measured.json; read only to price a mixture of experts. by_size_rows: [one GPU's share "
             "of an expert's weights (hidden x inter / tp), GEMM rows per touched expert, efficiency].")
ABOUT = ("Efficiencies derived from NVIDIA aiconfigurator-core's silicon-measured kernel tables (Apache-2.0), "
         "written by `python scripts/derive_efficiency.py --write`: do not edit by hand. Same layout as "
         "efficiency.json, whose entries these join (an entry's `engine`, the --engine preset, matches "
         "that engine's tables; '*': the three engines' samples pooled, used without a preset). "
         "weight_bandwidth's `by_rows` is the [rows, efficiency] curve the roofline interpolates by a "
         "GEMM's row count; its `value` is the median over decode rows 1-256.")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help=f"rewrite {OUT.name}")
    ap.add_argument("--gpu", action="append", help="only this GPU id (repeatable)")
    ns = ap.parse_args(argv)
    if not tables_available():
        print("needs aiconfigurator-core: pip install 'tokenpace[kernels]'", file=sys.stderr)
        return 2
    aic = version("aiconfigurator-core")
    systems: dict[str, list[str]] = {}
    for gpu_id, system in GPU_SYSTEMS.items():
        systems.setdefault(system, []).append(gpu_id)
    for compute, (_, bpw, _) in derive.DTYPES.items():
        shapes = derive.serving_configs(bytes_per_weight=bpw)
        print(f"aiconfigurator-core {aic}; {compute} shapes: " + ", ".join(f"{m.id} TP{tp}" for m, tp in shapes))
    entries = []
    for system, gpu_ids in systems.items():
        if ns.gpu and not set(ns.gpu) & set(gpu_ids):
            continue
        gpu = get_gpu(gpu_ids[0])  # the first id is the part the tables were measured on
        tables = [load_tables(gpu_ids[0], b) for b in BACKENDS]
        t = tables[0]
        device = pq.read_table(t.dir / "gemm" / t.backend / t.version / "gemm_perf.parquet",
                               columns=["device"]).column("device")[0].as_py()
        found = derive.catalog_entries(gpu_ids, gpu, tables, aic, device)
        _print(gpu_ids, device, found)
        entries += found
    if ns.write:
        dense, moe = derive.split_moe(entries)
        OUT.write_text(json.dumps({"_about": ABOUT, "efficiency": dense}, indent=1) + "\n", encoding="utf-8")
        MOE_OUT.write_text(_compact(json.dumps({"_about": MOE_ABOUT, "efficiency": moe}, indent=1)) + "\n",
                           encoding="utf-8")
        print(f"wrote {len(dense)} entries to {OUT} and {len(moe)} to {MOE_OUT}")
    return 0


def _compact(text: str) -> str:
    """``text`` with each innermost list of numbers on one line (a curve's points: [rows, efficiency,
    latency]), not one number per line."""
    return re.sub(r"\[\s+([-+0-9.eE,\s]+?)\s+\]", lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]",
                  text)


def _print(gpu_ids: list[str], device: str, entries: list[dict]) -> None:
    print(f"\n== {', '.join(gpu_ids)} (tables measured on {device})")
    print(f"{'engine':7} {'compute':7} {'figure':27} {'value':>10}  samples")
    for e in entries:
        for name, f in e.items():
            if not isinstance(f, dict):
                continue
            spread = f["source"].split("; ")[-1].split(" (python")[0]
            print(f"{e['engine']:7} {e['compute']:7} {name:27} {f['value']:>10.4g}  {spread}")
            if "by_rows" in f:
                print(f"{'':43}by rows (rows:efficiency/latency us): "
                      + " ".join(f"{m}:{v:.2f}/{lat * 1e6:.1f}" for m, v, lat in f["by_rows"]))
            if "by_group" in f:
                print(f"{'':43}by query heads per KV head: " + " ".join(f"{g}:{v:.2f}" for g, v in f["by_group"]))


if __name__ == "__main__":
    sys.exit(main())

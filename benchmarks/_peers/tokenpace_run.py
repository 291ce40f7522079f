"""tokenpace itself, run as a user would (the CLI of this checkout), read from ``--out`` JSON."""

from __future__ import annotations

import json
from pathlib import Path

from .common import Row, Target, Workload, stat_ms

TOOL = "tokenpace"


def command(tokenpace_bin: Path, w: Workload, t: Target, out_dir: Path) -> list[str]:
    return [str(tokenpace_bin), "bench", "--url", t.url, "--model", t.model,
            "--api", "completions", "--concurrency", str(w.concurrency),
            "--requests", str(w.requests), "--input-tokens", str(w.input_tokens),
            "--output-tokens", str(w.output_tokens), "--tokenizer", str(t.tokenizer_dir),
            "--seed", str(w.seed), "--timeout", str(w.timeout_s),
            "--out", str(out_dir / "run.json"), "--no-progress"]


def parse(out_dir: Path, version: str) -> Row:
    path = out_dir / "run.json"
    doc = json.loads(path.read_text())
    s = doc["summary"]
    lat = s["latency_ms"]
    counts = s["counts"]
    thr = s["throughput"]
    row = Row(TOOL, version or doc["tool"]["version"],
              ttft_ms=stat_ms(lat["ttft"], scale=1.0), tpot_ms=stat_ms(lat["tpot"], scale=1.0),
              itl_ms=stat_ms(lat["itl"], scale=1.0), e2e_ms=stat_ms(lat["e2e"], scale=1.0),
              output_tokens_s=thr["output_tokens_s"], requests_s=thr["requests_s"],
              ok=counts["ok"], failed=counts["sent"] - counts["ok"],
              output_tokens_total=thr["output_tokens"],
              window_s=(s.get("window") or {}).get("duration_s"),
              names={"ttft": "ttft", "tpot": "tpot", "itl": "itl (per token)",
                     "output_tokens_s": "throughput.output_tokens_s (server usage)"})
    row.raw = {"file": str(path), "tokens": s.get("tokens"), "chunk_gap": lat.get("chunk_gap"),
               "window": s.get("window")}
    return row

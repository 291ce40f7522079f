"""Each tool's per-request records re-read under tokenpace's definitions.

The row a tool prints mixes two things: what it measured (its clock, its event loop) and how it
defines a figure (which token count, which end stamp). Recomputing our figures from its own
per-request timestamps and the server's ``usage`` count removes the second, so what is left
between tools is measurement. Definitions (README, "What the numbers mean"):
TTFT = first token − start; TPOT = (last token − first token) / (server tokens − 1);
ITL = chunk gaps, each one token, only where the chunks and the server's count agree (a server
that streams one token per chunk, as llama-server does); E2E = last token − start;
output tokens/s = Σ server tokens / (last end − first start).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .common import Row, Stat


def _stat(values: list[float]) -> Stat:
    if not values:
        return Stat()
    a = np.asarray(values, dtype=float)
    return Stat(float(a.mean()), float(np.percentile(a, 50)), float(np.percentile(a, 99)))


def _row(tool: str, version: str, reqs: list[dict], start_end: tuple[float, float]) -> Row:
    """``reqs``: dicts with start, first, last (s), tokens (server), gaps (s, or None)."""
    ttft = [(r["first"] - r["start"]) * 1e3 for r in reqs]
    tpot = [(r["last"] - r["first"]) / (r["tokens"] - 1) * 1e3 for r in reqs if r["tokens"] > 1]
    e2e = [(r["last"] - r["start"]) * 1e3 for r in reqs]
    gaps: list[float] = []
    for r in reqs:
        if r.get("gaps") is None or len(r["gaps"]) + 1 != r["tokens"]:
            gaps = []
            break
        gaps += [g * 1e3 for g in r["gaps"]]
    window = start_end[1] - start_end[0]
    tokens = sum(r["tokens"] for r in reqs)
    return Row(f"{tool} (our definitions)", version, ttft_ms=_stat(ttft), tpot_ms=_stat(tpot),
               itl_ms=_stat(gaps), e2e_ms=_stat(e2e), output_tokens_s=tokens / window,
               requests_s=len(reqs) / window, ok=len(reqs), output_tokens_total=tokens,
               window_s=window)


def aiperf(out_dir: Path, version: str) -> Row:
    reqs, starts, ends = [], [], []
    for line in (out_dir / "artifacts" / "profile_export.jsonl").read_text().splitlines():
        rec = json.loads(line)
        meta, m = rec["metadata"], rec["metrics"]
        if rec.get("error") or "time_to_first_token" not in m:
            continue
        start = meta["request_start_ns"] / 1e9
        first = start + m["time_to_first_token"]["value"] / 1e3
        last = start + m["request_latency"]["value"] / 1e3
        gaps = m.get("inter_chunk_latency", {}).get("value")
        reqs.append({"start": start, "first": first, "last": last,
                     "tokens": int(m["usage_completion_tokens"]["value"]),
                     "gaps": [g / 1e3 for g in gaps] if gaps is not None else None})
        starts.append(start)
        ends.append(meta["request_end_ns"] / 1e9)
    return _row("aiperf", version, reqs, (min(starts), max(ends)))


def inference_perf(out_dir: Path, version: str) -> Row:
    path = next((out_dir / "reports").rglob("per_request_lifecycle_metrics.json"))
    reqs, starts, ends = [], [], []
    for rec in json.loads(path.read_text()):
        rm = (rec.get("info") or {}).get("response_metrics") or {}
        times = rm.get("chunk_times") or []
        if rec.get("error") or not times:
            continue
        reqs.append({"start": rec["start_time"], "first": times[0], "last": times[-1],
                     "tokens": int(rm["server_usage"]["completion_tokens"]),
                     "gaps": list(np.diff(times))})
        starts.append(rec["start_time"])
        ends.append(rec["end_time"])
    return _row("inference-perf", version, reqs, (min(starts), max(ends)))


def guidellm(out_dir: Path, version: str) -> Row:
    bench = json.loads((out_dir / "guidellm.json").read_text())["benchmarks"][0]
    reqs = []
    for rec in bench["requests"]["successful"]:
        t = rec["info"]["timings"]
        reqs.append({"start": t["request_start"], "first": t["first_token_iteration"],
                     "last": t["last_token_iteration"],
                     "tokens": int(rec["output_metrics"]["total_tokens"]), "gaps": None})
    starts = [r["info"]["timings"]["request_start"] for r in bench["requests"]["successful"]]
    ends = [r["info"]["timings"]["request_end"] for r in bench["requests"]["successful"]]
    return _row("guidellm", version, reqs, (min(starts), max(ends)))


RECOMPUTE = {"aiperf": aiperf, "inference-perf": inference_perf, "guidellm": guidellm}

"""inference-perf (kubernetes-sigs): a YAML config in, ``summary_lifecycle_metrics.json`` out.

Definitions, read from its source (``inference_perf/reportgen/base.py``, 0.7.0):
- TTFT: first content-bearing chunk's arrival (``time.perf_counter`` when the SSE message is
  parsed) − request start.  Role-only and usage-only chunks are excluded, as in ours.
- TPOT ``time_per_output_token``: (last token time − first token time) / (output tokens − 1),
  one sample per request: our TPOT, but the token count is the client's re-tokenization of the
  whole output text by default (``use_server_output_tokens: false``), not the server's usage.
- ITL ``inter_token_latency``: each chunk is re-tokenized; its tokens all get the chunk's arrival
  time; every consecutive difference (intra-chunk 0s included) is one sample, pooled over
  requests: token-weighted like ours, but a multi-token chunk gives one full gap and zeros
  instead of the gap spread evenly (the mean is the same, the percentiles are not).
- ``normalized_time_per_output_token``: (end − start) / output tokens, TTFT included.
- Throughput: tokens (client-counted) / (last end − first start) over successful requests.
Only the 'synthetic' and 'random' generators give exact lengths, and both use /v1/completions.
"""

from __future__ import annotations

import json
from pathlib import Path

from .common import Row, Target, Workload, stat_ms

TOOL = "inference-perf"


def config(w: Workload, t: Target, out_dir: Path) -> dict:
    fixed = lambda n: {"min": n, "max": n, "mean": n, "std_dev": 0,  # noqa: E731
                       "total_count": w.requests, "type": "fixed"}
    return {
        "api": {"type": "completion", "streaming": True},
        "data": {"type": "synthetic", "input_distribution": fixed(w.input_tokens),
                 "output_distribution": fixed(w.output_tokens)},
        "load": {"type": "concurrent", "base_seed": w.seed, "num_workers": 1,
                 "stages": [{"num_requests": w.requests, "concurrency_level": w.concurrency}],
                 "request_timeout": float(w.timeout_s)},
        "server": {"type": "vllm", "model_name": t.model, "base_url": t.base, "ignore_eos": True},
        "tokenizer": {"pretrained_model_name_or_path": str(t.tokenizer_dir)},
        "report": {"request_lifecycle": {"summary": True, "per_stage": False, "per_request": True,
                                         "percentiles": [50, 90, 99]},
                   "prometheus": None},
        "storage": {"local_storage": {"path": str(out_dir / "reports")}},
    }


def command(venv: Path, w: Workload, t: Target, out_dir: Path) -> list[str]:
    cfg = out_dir / "inference-perf.yaml"
    cfg.write_text(json.dumps(config(w, t, out_dir), indent=1))  # JSON is valid YAML
    return [str(venv / "bin" / "inference-perf"), "--config_file", str(cfg)]


def parse(out_dir: Path, version: str) -> Row:
    path = next((out_dir / "reports").rglob("summary_lifecycle_metrics.json"))
    doc = json.loads(path.read_text())
    ok = doc["successes"]
    lat = ok["latency"]
    s = 1000.0
    pct = dict(p50="median", p99="p99")
    row = Row(TOOL, version,
              ttft_ms=stat_ms(lat.get("time_to_first_token"), scale=s, **pct),
              tpot_ms=stat_ms(lat.get("time_per_output_token"), scale=s, **pct),
              itl_ms=stat_ms(lat.get("inter_token_latency"), scale=s, **pct),
              e2e_ms=stat_ms(lat.get("request_latency"), scale=s, **pct),
              output_tokens_s=ok["throughput"]["output_tokens_per_sec"],
              requests_s=ok["throughput"]["requests_per_sec"],
              ok=ok["count"], failed=doc.get("failures", {}).get("count"),
              window_s=doc.get("benchmark_time_seconds"),
              names={"ttft": "time_to_first_token", "tpot": "time_per_output_token",
                     "itl": "inter_token_latency (chunk time per re-tokenized token)",
                     "output_tokens_s": "throughput.output_tokens_per_sec (client-counted)"})
    client_len = ok.get("output_len") or {}
    server_len = ok.get("output_tokens") or {}
    row.output_tokens_total = server_len.get("total")
    row.raw = {"file": str(path), "output_len_client": client_len, "output_tokens_server": server_len,
               "token_count_mismatches": ok.get("token_count_mismatches"),
               "prompt_tokens": ok.get("prompt_tokens"),
               "normalized_time_per_output_token": lat.get("normalized_time_per_output_token")}
    return row

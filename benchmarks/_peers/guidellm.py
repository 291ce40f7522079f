"""guidellm (vLLM project): ``kind=...`` CLI configs in, a JSON report out.

Definitions, read from its source (``guidellm/schemas/base/request_stats.py`` and
``benchmark/schemas/metrics.py``, 0.8.1):
- TTFT ``time_to_first_token_ms``: first iteration carrying text − request start, stamped with
  ``time.time()`` (the wall clock, not a monotonic one).
- ITL ``inter_token_latency_ms``: (last token − first token) / (output tokens − 1) per request:
  our TPOT. Its distribution weights each request by (output tokens − 1).
- TPOT ``time_per_output_token_ms``: (last token − request start) / output tokens: TTFT
  included, so it is larger than ours; weighted by output tokens.
- Output tokens: the server's ``usage`` when sent (it asks for ``include_usage`` and
  ``continuous_usage_stats``), else one token per stream iteration.
- Throughput: tokens / the benchmark window (first request start → last request end).
- Percentiles are read off the (weighted) cumulative distribution without interpolation
  (``searchsorted``); ours interpolate linearly. With 40 samples the two differ visibly.
Output length is forced: with ``output_tokens`` set it sends ``max_tokens``, ``ignore_eos: true``
and ``stop: null``.
"""

from __future__ import annotations

import json
from pathlib import Path

from .common import Row, Target, Workload, stat_ms

TOOL = "guidellm"


def command(venv: Path, w: Workload, t: Target, out_dir: Path) -> list[str]:
    return [str(venv / "bin" / "guidellm"), "run",
            "--backend", f"kind=openai_http,target={t.base},model={t.model},"
                         f"request_format=/v1/completions,timeout={w.timeout_s}",
            "--profile", f"kind=concurrent,streams={w.concurrency}",
            "--constraint", f"kind=max_requests,count={w.requests}",
            "--constraint", f"kind=max_duration,seconds={w.timeout_s}",
            "--data", f"kind=synthetic_text,prompt_tokens={w.input_tokens},"
                      f"output_tokens={w.output_tokens}",
            "--tokenizer", f"kind=huggingface_auto,model={t.tokenizer_dir}",
            "--seed", f"kind=static,value={w.seed}",
            "--output", f"kind=json,path={out_dir / 'guidellm.json'}",
            "--disable-progress"]


def parse(out_dir: Path, version: str) -> Row:
    path = out_dir / "guidellm.json"
    bench = json.loads(path.read_text())["benchmarks"][0]
    m = bench["metrics"]

    def ok(name: str) -> dict:
        s = dict(m[name]["successful"])
        s["p50"] = s.get("median")
        s["p99"] = (s.get("percentiles") or {}).get("p99")
        return s

    totals = m["request_totals"]
    row = Row(TOOL, version,
              ttft_ms=stat_ms(ok("time_to_first_token_ms"), scale=1.0),
              tpot_ms=stat_ms(ok("inter_token_latency_ms"), scale=1.0),
              e2e_ms=stat_ms(ok("request_latency"), scale=1000.0),
              output_tokens_s=ok("output_tokens_per_second")["mean"],
              requests_s=ok("requests_per_second")["mean"],
              ok=totals["successful"], failed=totals["errored"] + totals["incomplete"],
              output_tokens_total=ok("output_token_count").get("total_sum"),
              window_s=bench.get("duration"),
              names={"ttft": "time_to_first_token_ms", "tpot": "inter_token_latency_ms",
                     "itl": "— (no per-token gap figure)",
                     "output_tokens_s": "output_tokens_per_second (server usage)"})
    row.raw = {"file": str(path),
               "time_per_output_token_ms (TTFT included)": stat_ms(
                   ok("time_per_output_token_ms"), scale=1.0).__dict__,
               "output_token_count": {k: ok("output_token_count").get(k)
                                      for k in ("mean", "min", "max", "total_sum")},
               "prompt_token_count": {k: ok("prompt_token_count").get(k)
                                      for k in ("mean", "min", "max")},
               "stream_iterations": {k: ok("request_streaming_iterations_count").get(k)
                                     for k in ("mean", "min", "max")},
               "warnings": [str(x)[:300] for x in bench.get("warnings") or []]}
    return row

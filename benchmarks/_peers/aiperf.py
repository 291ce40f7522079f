"""NVIDIA aiperf: CLI flags in, ``profile_export_aiperf.json`` (+ per-request JSONL) out.

Definitions, read from its source (``aiperf/metrics/types/``, 0.13.0):
- TTFT ``time_to_first_token``: first content response − request start.
- ITL ``inter_token_latency``: (request latency − TTFT) / (output tokens − 1), one value per
  request, where request latency ends at the last *content* response: our TPOT. Output tokens
  are the client's re-tokenization of the output text unless ``--use-server-token-count``.
- ICL ``inter_chunk_latency``: every gap between chunks, pooled: our chunk gap.
- Throughput ``output_token_throughput``: total output tokens / benchmark duration, which runs
  from the earliest request start to the latest final response.
- Percentiles interpolate linearly, as ours do.
Output length is forced with ``--extra-inputs ignore_eos:true`` and ``max_tokens`` (the
``--use-legacy-max-tokens`` spelling; by default it sends ``max_completion_tokens``).
With ``HF_HUB_OFFLINE=1`` aiperf 0.13.0 only loads tokenizers from a hub cache entry (a
filesystem path is rejected by its offline branch), so it is given our folder laid out as
one (``hf_tokenizer.write_hub_cache_mirror``) under a private ``HF_HUB_CACHE``.
"""

from __future__ import annotations

import json
from pathlib import Path

from .common import Row, Target, Workload, stat_ms

TOOL = "aiperf"
REPO_ID = "tokenpace-local/from-gguf"


def command(venv: Path, w: Workload, t: Target, out_dir: Path) -> list[str]:
    return [str(venv / "bin" / "aiperf"), "profile",
            "--model", t.model, "--url", t.base, "--endpoint-type", "completions", "--streaming",
            "--tokenizer", REPO_ID,
            "--concurrency", str(w.concurrency), "--request-count", str(w.requests),
            "--isl", str(w.input_tokens), "--isl-stddev", "0",
            "--osl", str(w.output_tokens), "--osl-stddev", "0",
            "--extra-inputs", "ignore_eos:true", "--use-legacy-max-tokens",
            "--random-seed", str(w.seed), "--request-timeout-seconds", str(w.timeout_s),
            "--no-server-metrics", "--no-gpu-telemetry", "--ui-type", "none",
            "--artifact-dir", str(out_dir / "artifacts"), "--export-level", "records"]


def parse(out_dir: Path, version: str) -> Row:
    path = out_dir / "artifacts" / "profile_export_aiperf.json"
    doc = json.loads(path.read_text())

    def block(name: str) -> dict | None:
        b = doc.get(name)
        if b and b.get("unit") not in (None, "ms"):
            raise ValueError(f"aiperf {name} in {b.get('unit')}, expected ms")
        return b

    pct = dict(mean="avg", p50="p50", p99="p99")
    usage = doc.get("usage_completion_tokens") or {}
    osl = doc.get("output_sequence_length") or {}
    row = Row(TOOL, version,
              ttft_ms=stat_ms(block("time_to_first_token"), scale=1.0, **pct),
              tpot_ms=stat_ms(block("inter_token_latency"), scale=1.0, **pct),
              itl_ms=stat_ms(block("inter_chunk_latency"), scale=1.0, **pct),
              e2e_ms=stat_ms(block("request_latency"), scale=1.0, **pct),
              output_tokens_s=(doc.get("output_token_throughput") or {}).get("avg"),
              requests_s=(doc.get("request_throughput") or {}).get("avg"),
              ok=int((doc.get("request_count") or {}).get("avg", 0)),
              failed=int((doc.get("error_request_count") or {}).get("avg", 0) or 0),
              output_tokens_total=(doc.get("total_osl") or {}).get("avg"),
              window_s=(doc.get("benchmark_duration") or {}).get("avg"),
              names={"ttft": "time_to_first_token", "tpot": "inter_token_latency",
                     "itl": "inter_chunk_latency (chunk gaps)",
                     "output_tokens_s": "output_token_throughput (client-counted)"})
    row.raw = {"file": str(path), "output_sequence_length_client": osl,
               "usage_completion_tokens": usage,
               "usage_prompt_tokens": doc.get("usage_prompt_tokens"),
               "input_sequence_length": doc.get("input_sequence_length"),
               "error_summary": doc.get("error_summary")}
    return row

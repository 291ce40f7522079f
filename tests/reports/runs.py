"""Constructed runs with known latencies, written as real result files (document + JSONL)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson

from tokenpace.metrics import summarize
from tokenpace.record import RequestRecord
from tokenpace.results import RecordSink

MS = 1_000_000


def make_records(n: int = 600, *, ttft_ms: float = 100.0, itl_ms: float = 10.0, tokens: int = 20,
                 every_ms: float = 50.0, errors: int = 0, seed: int = 0) -> list[RequestRecord]:
    """``n`` requests sent every ``every_ms``; TTFT is ``ttft_ms`` × (1 ± 5% noise), then one token
    per ``itl_ms``. The last ``errors`` requests fail with HTTP 500 before any token."""
    rng = np.random.default_rng(seed)
    records = []
    for i in range(n):
        sent = round(i * every_ms * MS)
        if i >= n - errors:
            records.append(RequestRecord(request_id=f"r{i}", index=i, scheduled_ns=sent, sent_ns=sent,
                                         done_ns=sent + 5 * MS, status="error", http_status=500,
                                         error_kind="http_500", error_message='boom, "quoted"\nline 2'))
            continue
        first = sent + round(ttft_ms * (1 + 0.05 * rng.standard_normal()) * MS)
        chunks = [first + round(k * itl_ms * MS) for k in range(tokens)]
        records.append(RequestRecord(
            request_id=f"r{i}", index=i, scheduled_ns=sent, sent_ns=sent, first_token_ns=first,
            first_content_ns=first, last_token_ns=chunks[-1], done_ns=chunks[-1], chunk_ns=chunks,
            chunk_tokens=[1] * tokens, chunk_tokens_source="chunk_usage", prompt_tokens=64,
            prompt_tokens_source="usage", output_tokens=tokens, output_tokens_source="usage",
            output_tokens_client=tokens, http_status=200, finish_reason="length"))
    return records


def write_run(directory: Path, name: str, records: list[RequestRecord], *, slo: str | None = "chat",
              gpu_hour_usd: float | None = 3.0, kind: str = "bench") -> Path:
    """A result document and its records JSONL, as `tokenpace bench --out` would leave them."""
    directory.mkdir(parents=True, exist_ok=True)
    records_path = directory / f"{name}.records.jsonl"
    with RecordSink(records_path) as sink:
        for record in records:
            sink.write(record)
    doc = {
        "schema_version": 1, "kind": kind, "tool": {"name": "tokenpace", "version": "test"},
        "started_utc": "2026-01-01T00:00:00+00:00", "interrupted": False,
        "config": {"concurrency": 8, "requests": len(records), "slo": slo, "gpu_hour_usd": gpu_hour_usd,
                   "gpus": 1, "api": "chat", "stream": True},
        "target": {"url": "http://127.0.0.1:9/v1", "model": "constructed", "builtin": False},
        "workload": {"input_tokens": "64", "output_tokens": "20"},
        "summary": summarize(records, slo=slo, gpu_hour_usd=gpu_hour_usd),
        "load_generator": {"mode": "closed", "target_concurrency": 8, "mean_in_flight": 7.5,
                           "target_rate_rps": None, "achieved_rate_rps": 20.0,
                           "schedule_lag_ms": {"p50": 0.1, "p99": 0.5, "max": 1.0}, "client_cpu_s": 1.0,
                           "client_cpu_util": 0.05, "valid": True, "invalid_reasons": [], "suggestion": None},
        "records_path": records_path.name,
    }
    path = directory / f"{name}.json"
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    return path

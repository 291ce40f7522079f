"""The report's text sections: outcomes, token-count sources, load-generator validity, engine
summary and the exact configuration."""

from __future__ import annotations

import json
from typing import Any

from tokenpace.reports.html.markup import esc, num, table


def outcomes(summary: dict[str, Any]) -> str:
    c = summary.get("counts") or {}
    rows = [(k, c.get(k, 0)) for k in ("sent", "ok", "error", "timeout", "cancelled", "warmup_excluded")]
    rows += [(f"error kind: {kind}", n) for kind, n in (c.get("errors_by_kind") or {}).items()]
    return table(("outcome", "requests"), rows, "narrow")


def token_sources(summary: dict[str, Any]) -> str:
    tok = summary.get("tokens") or {}
    rows = [(what, src, n) for what, key in (("prompt", "prompt_sources"), ("output", "output_sources"),
                                              ("tokens per chunk", "chunk_token_sources"))
            for src, n in (tok.get(key) or {}).items()]
    mm = tok.get("mismatch") or {}
    mismatched = mm.get("requests_mismatched", 0)
    cls = "bad" if mismatched else "ok"
    line = (f'<p class="slo {cls}">Client vs server output count: mismatch in {mismatched} of '
            f"{mm.get('requests_compared', 0)} requests compared (server total {mm.get('server_total', 0)}, "
            f"client total {mm.get('client_total', 0)}). The server's count is used when present.</p>")
    return table(("count", "source", "requests"), rows, "narrow") + line


def load_generator(lg: dict[str, Any] | None) -> str:
    if not lg:
        return "<p>No load generator: this is a simulation (virtual time) or records without a result document.</p>"
    lag = lg.get("schedule_lag_ms") or {}
    valid = lg.get("valid", True)
    head = ('<p class="slo ok"><b>valid</b>: the load generator kept up</p>' if valid else
            f'<p class="slo bad"><b>INVALID: load generator was the bottleneck</b> '
            f"({esc('; '.join(lg.get('invalid_reasons') or []))}). Suggestion: {esc(lg.get('suggestion'))}</p>")
    rows = [("mode", lg.get("mode")), ("target concurrency", lg.get("target_concurrency")),
            ("mean in flight", num(lg.get("mean_in_flight"))),
            ("target rate (req/s)", lg.get("target_rate_rps") or "—"),
            ("achieved rate (req/s)", num(lg.get("achieved_rate_rps"), 2)),
            ("schedule lag p50 / p99 / max (ms)",
             " / ".join(num(lag.get(k), 2) for k in ("p50", "p99", "max")) if lag else "—"),
            ("client CPU (s)", num(lg.get("client_cpu_s"), 2)),
            ("client CPU (share of one core)",
             "—" if lg.get("client_cpu_util") is None else f"{lg['client_cpu_util']:.0%}")]
    return head + table(("", ""), rows, "narrow")


def engine_summary(engine: dict[str, Any] | None) -> str:
    if not engine:
        return ""
    st, mem = engine.get("stats") or {}, engine.get("memory") or {}
    rows = [(k, _fmt(v)) for k, v in {**mem, **st}.items() if not isinstance(v, (dict, list))]
    return table(("engine figure", "value"), rows, "narrow")


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def workload(doc: dict[str, Any]) -> str:
    """What each request asked for: the length specs, or the dataset or trace they came from, how
    input lengths were counted, the shared prefix and the API shape."""
    w, c, t = doc.get("workload") or {}, doc.get("config") or {}, doc.get("target") or {}
    rows = []
    for source in ("dataset", "trace"):
        if isinstance(w.get(source), dict):
            rows.append((source, w[source].get("path")))
    if w.get("input_tokens"):
        rows.append(("input tokens", w["input_tokens"]))
    if w.get("output_tokens"):
        rows.append(("output tokens", w["output_tokens"]))
    prefix = (w.get("shared_prefix") or {}).get("prefix_tokens") if isinstance(w.get("shared_prefix"), dict) else None
    prefix = prefix or w.get("shared_prefix_tokens")
    if prefix:
        rows.append(("shared prefix tokens", prefix))
    if w.get("input_length_source"):
        rows.append(("input lengths counted by", w["input_length_source"]))
    if not t.get("simulated"):
        streaming = "streaming" if c.get("stream", True) else "not streaming"
        rows.append(("requests", f"{c.get('api', 'chat')} API, {streaming}"))
    if not rows:
        return "<p>The workload is not in this file.</p>"
    return table(("", ""), rows, "config")


def configuration(doc: dict[str, Any]) -> str:
    parts = {key: doc.get(key) for key in ("kind", "schema_version", "tool", "started_utc", "interrupted",
                                          "target", "workload", "config", "preflight")}
    if doc.get("engine"):
        parts["engine.config"] = doc["engine"].get("config")
    text = json.dumps(parts, indent=2, sort_keys=False, default=str)
    return f"<pre>{esc(text)}</pre>"

"""The console summary of a run, rendered from its result document (so bench and report share it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from tokenpace.config import DEFAULT_REQUESTS
from tokenpace.reports.engine_metrics_console import engine_metrics_lines
from tokenpace.reports.validated import band_line

# (summary key, label) in the order a reader wants them. Names follow REFERENCE section 1.
LATENCY_ROWS = (
    ("ttft", "TTFT"),
    ("ttft_from_scheduled", "TTFT sched"),
    ("ttfc", "TTFC"),
    ("tpot", "TPOT"),
    ("itl", "ITL"),
    ("chunk_gap", "chunk gap"),
    ("e2e", "E2E"),
    ("e2e_from_scheduled", "E2E sched"),
)
LEGEND = ("sched: measured from the scheduled send time (includes client lag) · TTFC: time to "
          "first visible content · ITL: per token · chunk gap: raw gap between chunks")
_STYLE = {"excellent": "green", "acceptable": "yellow", "poor": "red"}


def render_run(doc: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    s = doc["summary"]
    console.print(_headline(doc))
    console.print(_latency_table(s))
    for line in _lines(doc):
        console.print(line)
    members = (doc.get("engine") or {}).get("members")
    if members:  # `sim --members`: each figure's spread over the step-noise members
        from tokenpace.reports.sim_members import render_members

        render_members(members, console)


def _headline(doc: dict[str, Any]) -> str:
    t, c = doc.get("target") or {}, doc.get("config") or {}
    if doc.get("kind") == "records" and doc.get("live"):
        return (f"[bold]tokenpace report[/] · {t.get('url')} · live traffic (instrumented client or proxy): "
                "no load generator; window: first request sent to last done")
    if doc.get("kind") == "records":
        return (f"[bold]tokenpace report[/] · {t.get('url')} · records only: the run's "
                "configuration is not in this file")
    lg = doc.get("load_generator") or {}  # a simulation has none: its engine config says
    concurrency = lg.get("target_concurrency") or (c.get("engine") or {}).get("concurrency")
    kind = lg.get("mode") or ("open" if c.get("rate") else "closed")
    mode = {"trace": f"trace replay (time scale {c.get('time_scale', 1)})",
            "conversations": f"multi-turn conversations ({c.get('conversations')})",
            "open": f"open loop {c.get('rate')} req/s ({c.get('arrival')})"}.get(
        kind, f"closed loop, concurrency {concurrency}{_fewer_requests(c, concurrency)}")
    if t.get("simulated"):
        return _sim_headline(doc, t, mode) + _sorted_trace(doc) + _workload(doc)
    mode += _sorted_trace(doc) + _workload(doc)
    where = "built-in simulated server" if t.get("builtin") else t.get("url", "?")
    shape = f"{c.get('api', 'chat')}, {'streaming' if c.get('stream', True) else 'non-streaming'}"
    head = f"[bold]tokenpace {doc.get('kind', 'bench')}[/] · {where} · model {t.get('model')} · {shape} · {mode}"
    if doc.get("interrupted"):
        head += " · [bold red]INTERRUPTED: partial results[/]"
    return head


def _fewer_requests(c: dict[str, Any], concurrency: Any) -> str:
    """A closed loop with fewer requests than workers never holds its concurrency: say so."""
    requests = c.get("requests")
    if requests is None and c.get("duration_s") is None:
        requests = DEFAULT_REQUESTS
    if not (isinstance(concurrency, int) and isinstance(requests, int)):
        return ""
    total = requests + int(c.get("warmup_requests") or 0)
    return f" (at most {total} in flight: {total} requests)" if total < concurrency else ""


def _workload(doc: dict[str, Any]) -> str:
    """What each request asked for: lengths (specs), or where they came from."""
    w = doc.get("workload") or {}
    for source in ("trace", "dataset"):
        if isinstance(w.get(source), dict):
            return f" · lengths from the {source} {Path(str(w[source].get('path'))).name}"
    if not w.get("input_tokens"):
        return ""
    prefix = (w.get("shared_prefix") or {}).get("prefix_tokens") or w.get("shared_prefix_tokens")
    shared = f" + {prefix} shared" if prefix else ""
    return f" · {w['input_tokens']}{shared} input / {w.get('output_tokens')} output tokens"


def _sorted_trace(doc: dict[str, Any]) -> str:
    moved = ((doc.get("workload") or {}).get("trace") or {}).get("sorted_out_of_order")
    if moved:
        return f", trace sorted by timestamp ({moved} {'line was' if moved == 1 else 'lines were'} out of order)"
    c = doc.get("config") or {}
    return ", trace in timestamp order (--sort-trace)" if c.get("trace") and c.get("sort_trace") else ""


def _sim_headline(doc: dict[str, Any], t: dict[str, Any], mode: str) -> str:
    c = doc.get("config") or {}
    if c.get("trace") and not c.get("rate"):
        mode = "open loop, the trace's arrival times"
    cap = (c.get("engine") or {}).get("max_in_flight")
    if cap:
        mode += f", at most {cap} in flight"
    extras = "".join(f" · {name}" for key, name in (("prefix_caching", "prefix caching"),
                                                     ("spec_decode", "speculative decoding")) if t.get(key))
    implied = " (implied by the weights; --kv-dtype to change)" if t.get("kv_dtype_implied") \
        and t.get("kv_cache_dtype") != "bf16" else ""
    preset = f"engine {t['engine_preset']} · " if t.get("engine_preset") else ""
    return (f"[bold]tokenpace {doc.get('kind', 'sim')}[/] · [bold]SIMULATION[/] in virtual time · {preset}"
            f"{t.get('model')} on {t.get('gpu')} · weights {t.get('weights')}, "
            f"KV {t.get('kv_cache_dtype')}{implied} · "
            f"TP {t.get('tp')} · {t.get('policy')}{extras} · {mode}")


def _latency_table(s: dict[str, Any]) -> Table:
    table = Table(title="Latency (ms, ok requests)", title_justify="left", box=None,
                  header_style="bold", pad_edge=False)
    for col in ("metric", "n", "mean", "p50", "p90", "p95", "p99", "p99.9", "p99 95% CI"):
        table.add_column(col, justify="left" if col == "metric" else "right", no_wrap=True)
    for key, label in LATENCY_ROWS:
        st = (s.get("latency_ms") or {}).get(key)
        if not st:
            table.add_row(label, "0", *["—"] * 7)
            continue
        ci = st.get("p99_ci95")
        table.add_row(label, str(st["count"]),
                      *(_ms(st[k]) for k in ("mean", "p50", "p90", "p95", "p99", "p99.9")),
                      f"{_ms(ci[0])}–{_ms(ci[1])}" if ci else "—")
    return table


def _ratings_line(s: dict[str, Any]) -> str | None:
    parts = []
    for key, rating in (s.get("ratings") or {}).items():
        shown = "/".join(f"[{_STYLE.get(v, '')}]{v}[/]" for v in (rating.get("p50"), rating.get("p99")) if v)
        if shown:
            parts.append(f"{key.upper()} {shown}")
    return ("Ratings (p50/p99): " + " · ".join(parts)) if parts else None


def inside_counts(w: dict[str, Any]) -> str:
    """The requests of a measurement window in words. Sent and completed inside it are different
    requests: those already in flight when it began complete inside it too, so completions may
    outnumber sends; saying how many were in flight at each end accounts for every one."""
    said = f"{w['requests_sent']} requests sent inside it, {w['requests_completed']} completed ok inside it"
    if "requests_in_flight_at_start" in w:  # summaries written before these counts lack them
        said += (f"; {w['requests_in_flight_at_start']} already in flight when it began, "
                 f"{w['requests_in_flight_at_end']} still in flight when it ended")
    return said


def _lines(doc: dict[str, Any]) -> list[str]:
    s = doc["summary"]
    out = [f"[dim]{LEGEND}[/]"]
    ratings = _ratings_line(s)
    if ratings:
        out.append(ratings)
    c = s["counts"]
    errors = ", ".join(f"{k} ×{v}" for k, v in sorted((c.get("errors_by_kind") or {}).items()))
    out.append(f"Requests: sent {c['sent']} = ok {c['ok']} + error {c['error']} + timeout {c['timeout']}"
               f" + cancelled {c['cancelled']}" + (f"  ({errors})" if errors else "")
               + (f"  · warmup excluded: {c['warmup_excluded']}" if c.get("warmup_excluded") else ""))
    if c.get("retried_attempts"):
        why = ", ".join(f"{k} ×{v}" for k, v in (c.get("retried_by_kind") or {}).items())
        out.append(f"Retries: {c['retried_attempts']} failed attempts were sent again ({why})")
    for kind, message in (c.get("first_error_by_kind") or {}).items():
        out.append(f"  first {kind}: {_one_line(message)}")
    tp, w = s.get("throughput") or {}, s.get("window") or {}
    steady = str(w.get("definition", "")).startswith("Steady-state")
    inside = (f" ({'steady state' if steady else 'first sent to last done'}; {inside_counts(w)})"
              if "requests_sent" in w else "")
    out.append(f"Throughput over {w.get('duration_s', 0):.2f} s{inside}: {_n(tp.get('output_tokens_s'))} output tok/s · "
               f"{_n(tp.get('total_tokens_s'))} total tok/s · {_n(tp.get('requests_s'), 2)} req/s · "
               f"cached prompt tokens {tp.get('cached_prompt_tokens', 0)} (reported apart)")
    g = s.get("goodput")
    if g:
        verdict = "[green]SLO MET[/]" if g["verdict"]["met"] else "[red]SLO MISSED[/]"
        out.append(f"Goodput ({_slo_text(g['slo'])}): {_n(g['requests_s'], 2)} req/s · "
                   f"{_n(g['output_tokens_s'])} tok/s · {g['fraction']:.1%} of requests good → {verdict}")
    cost = s.get("cost")
    if cost:
        out.append(f"Cost (${cost['gpu_hour_usd']:g}/h × {cost['gpus']} GPU): "
                   f"${_n(cost['usd_per_1m_output_tokens'], 3)} per 1M output tokens · "
                   + (f"${_n(cost['usd_per_1m_good_output_tokens'], 3)} per 1M good tokens"
                      if cost.get("usd_per_1m_good_output_tokens") is not None else "no good tokens"))
    out.extend(_token_cost_lines(s.get("token_cost")))
    tok = s.get("tokens") or {}
    mm = tok.get("mismatch") or {}
    out.append(f"Token counts: output from {_sources(tok.get('output_sources'))}; prompt from "
               f"{_sources(tok.get('prompt_sources'))}; client vs server mismatch in "
               f"{mm.get('requests_mismatched', 0)} of {mm.get('requests_compared', 0)} requests")
    im = tok.get("input_mismatch") or {}
    if im.get("requests_compared"):
        out.append(f"Prompt tokens: server counted {im['server_total']} against {im['client_total']} "
                   f"asked for ({im['requests_mismatched']} of {im['requests_compared']} requests differ, "
                   f"mean {im['mean_server_minus_client']:+.1f} per request; "
                   f"input lengths {(doc.get('workload') or {}).get('input_length_source', '?')})")
    out.extend(_breakdown_lines(s.get("breakdowns") or {}))
    out.extend(_load_lines(doc.get("load_generator")))
    out.extend(_engine_lines(doc.get("engine")))
    out.extend(engine_metrics_lines(doc.get("engine_metrics")))
    return out


def _breakdown_lines(b: dict[str, Any]) -> list[str]:
    out = []
    cache = b.get("ttft_by_cache_ms")
    if cache and (cache["hit_requests"] or cache["miss_requests"]):
        hit, miss = cache["hits"] or {}, cache["misses"] or {}
        out.append(f"Prefix cache: {cache['hit_requests']} hits (TTFT p50 {_ms(hit.get('p50'))} ms) · "
                   f"{cache['miss_requests']} misses (TTFT p50 {_ms(miss.get('p50'))} ms) · "
                   f"{cache['cached_prompt_tokens']} cached prompt tokens reported")
    use = b.get("cache_use")
    if use:
        out.append("Cache use (Anthropic): " + " · ".join(
            f"{n} {name} (TTFT p50 {_ms((e['ttft_ms'] or {}).get('p50'))} ms; {e['cached_prompt_tokens']} read, "
            f"{e['cache_write_prompt_tokens']} written of {e['prompt_tokens']} prompt tokens"
            + (f"; ${e['usd']:.4f}" if "usd" in e else "") + ")"
            for name, e in use.items() if (n := e["requests"])))
    turns = b.get("ttft_by_turn_ms")
    if turns:
        out.append("TTFT p50 by turn: " + " · ".join(
            f"{turn}: {_ms(st['p50'])} ms" for turn, st in turns.items() if st))
    tool = b.get("time_to_first_tool_call_ms")
    if tool:
        out.append(f"Time to first tool call: p50 {_ms(tool['p50'])} ms over {b['tool_call_requests']} requests")
    if b.get("reasoning_tokens"):
        r = b["reasoning_tokens"]
        out.append(f"Reasoning tokens: {r['total']} over {r['requests']} requests (in output tokens)")
    return out


def _token_cost_lines(tc: dict[str, Any] | None) -> list[str]:
    if not tc:
        return []
    m = tc["cache_price_multipliers"]
    saved = f" · {tc['saved_fraction']:.1%} saved by the cache" if tc.get("saved_fraction") is not None else ""
    by = " · ".join(f"{name} ${usd:.4f}" for name, usd in tc["usd_by_cache"].items() if usd)
    return [f"Token cost (${tc['input_usd_per_mtok']:g} in / ${tc['output_usd_per_mtok']:g} out per 1M tokens; "
            f"cache write ×{m['write']:g}, read ×{m['read']:g}): ${tc['usd']:.4f} for {tc['requests']} ok requests "
            f"(${_n(tc['usd_per_request'], 6)} each) against ${tc['usd_without_cache']:.4f} without a cache{saved}"
            + (f" ({by})" if by else "")]


def _load_lines(lg: dict[str, Any] | None) -> list[str]:
    if not lg:
        return []
    lag = lg.get("schedule_lag_ms") or {}
    parts = [f"schedule lag p50 {lag['p50']:.2f} / p99 {lag['p99']:.2f} ms" if lag else None,
             f"achieved {lg['achieved_rate_rps']:.2f} of {lg['target_rate_rps']:g} req/s"
             if lg.get("target_rate_rps") and lg.get("achieved_rate_rps") else None,
             f"mean in flight {lg['mean_in_flight']:.1f}" if lg.get("mean_in_flight") is not None else None,
             f"client CPU {lg['client_cpu_util']:.0%} of one core" if lg.get("client_cpu_util") is not None else None]
    text = "; ".join(p for p in parts if p)
    workers = _worker_lines(lg.get("workers"))
    if workers:
        text = text.replace("client CPU", "busiest worker's CPU")
    if lg.get("valid", True):
        return [f"Load generator: valid · {text}", *workers]
    return [f"[bold red]INVALID: load generator was the bottleneck[/] ({'; '.join(lg['invalid_reasons'])}) · {text}",
            f"  suggestion: {lg['suggestion']}", *workers]


def _worker_lines(w: dict[str, Any] | None) -> list[str]:
    """--workers / --ray: each worker's lag, CPU and fate; with Ray, each node's clock offset."""
    if not w:
        return []
    kind = "Ray actors" if w["backend"] == "ray" else "processes"
    rows = []
    for row in w["per_worker"]:
        lag = row.get("schedule_lag_ms")
        cpu = row.get("client_cpu_util")
        clock = row.get("clock")
        rows.append(f"#{row['worker']} {row['status']}"
                    + (f", lag p99 {lag['p99']:.2f} ms" if lag else "")
                    + (f", CPU {cpu:.0%}" if cpu is not None else "")
                    + (f", clock {clock['wall_offset_ms']:+.2f} ±{clock['uncertainty_ms']:.2f} ms "
                       f"on {clock['host']}" if clock else ""))
    return [f"Workers: {w['count']} {kind} · " + " · ".join(rows)]


def _engine_lines(engine: dict[str, Any] | None) -> list[str]:
    """A simulation's engine: its memory, and what it did (the timeline's summary)."""
    if not engine:
        return []
    m, st = engine.get("memory") or {}, engine.get("stats") or {}
    hit = (f" · prefix-cache hit rate {_pct(st.get('prefix_cache_hit_rate'))}"
           if st.get("prefix_cache_queries_tokens") else "")
    return [*_calibration_lines(engine.get("calibration")), *_validated_lines(engine),
        f"Engine memory per GPU: weights {m.get('weight_bytes_per_gpu', 0) / 2**30:.1f} GiB · KV cache "
        f"{m.get('kv_capacity_tokens', 0):,} tokens ({m.get('kv_blocks', 0):,} blocks, "
        f"{m.get('kv_bytes_per_token_per_gpu', 0) / 1024:g} KiB per token)",
        f"Engine: {st.get('engine_steps', 0):,} steps, busy {_pct(st.get('busy_fraction'))}, mean step "
        f"{_n(st.get('mean_step_ms'), 2)} ms · mean running {_n(st.get('mean_running_seqs'))} "
        f"(decoding {_n(st.get('mean_decode_batch'))}) · waiting mean {_n(st.get('mean_waiting'))} / max "
        f"{st.get('max_waiting', 0)} · {_n(st.get('mean_tokens_per_step'))} tokens per step · KV usage mean "
        f"{_pct(st.get('mean_kv_usage'))} / peak {_pct(st.get('peak_kv_usage'))} · preemptions "
        f"{st.get('preemptions', 0)}{hit}",
    ]


def _validated_lines(engine: dict[str, Any]) -> list[str]:
    """How far this predictor has been off on published measurements (``simulator.error_band``)."""
    band = engine.get("validated_error")
    if not band:
        return []
    name = "calibrated roofline" if engine.get("calibration") else (engine.get("config") or {}).get("step_predictor", "roofline")
    return [f"Predicted by the {name}; {band_line(band)} (its source: the result's engine.validated_error)"]


def _calibration_lines(cal: dict[str, Any] | None) -> list[str]:
    """A calibrated simulation: the file, and whether it stayed within the decode batches it saw."""
    if not cal:
        return []
    line = f"Calibration: {cal.get('path')}"
    if cal.get("extrapolates"):
        return [line, f"  [yellow]{cal['note']}[/]"]
    return [f"{line} · {cal.get('note')}"]


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v:.1%}"


def _slo_text(slo: dict[str, Any]) -> str:
    parts = [f"{k.upper()} ≤ {slo[k + '_ms']:g} ms" for k in ("ttft", "tpot", "e2e") if slo.get(k + "_ms")]
    name = slo.get("name")
    return (f"SLO {name}: " if name else "SLO: ") + (", ".join(parts) or "no latency limit") + \
        f", {slo.get('attainment', 0.9):.0%} attainment"


def _sources(counts: dict[str, int] | None) -> str:
    return ", ".join(f"{k} ({v})" for k, v in sorted((counts or {}).items())) or "—"


def _ms(v: float | None) -> str:
    return "—" if v is None else (f"{v:.1f}" if v < 1000 else f"{v:,.0f}")


def _n(v: float | None, digits: int = 1) -> str:
    return "—" if v is None else f"{v:,.{digits}f}"


def _one_line(text: str) -> str:
    """A server's message as one escaped line: rich markup and line breaks shown, not obeyed."""
    from rich.markup import escape

    return escape(" ".join(str(text).split()))

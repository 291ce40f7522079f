"""Console lines for a run's ``engine_metrics`` section (--scrape-metrics), read from the document
only, so `bench` and `report` print the same."""

from __future__ import annotations

from typing import Any


def engine_metrics_lines(em: dict[str, Any] | None) -> list[str]:
    if not em:
        return []
    sc = em.get("scrapes") or {}
    failed = sc.get("failed", 0)
    head = (f"Engine metrics: {em.get('engine_label') or 'no known engine'} at {em.get('url')}, every "
            f"{em.get('interval_s', 0):g} s · {sc.get('ok', 0)} scrapes"
            + (f", [yellow]{failed} failed[/] ({_kinds(sc.get('failed_by_kind'))})" if failed else ""))
    if not sc.get("ok") or not em.get("engine"):
        return [head + (f": {sc['last_error']}" if sc.get("last_error") else "")]
    out = [head]
    state = _state_line(em.get("peaks") or {}, em.get("totals") or {})
    if state:
        out.append("  " + state)
    out.extend("  " + line for line in _ttft_lines(em.get("vs_client") or {}))
    for finding in em.get("diagnosis") or []:
        out.append(f"  [bold]diagnosis[/]: {finding['message']}")
    return out


def _state_line(peaks: dict[str, Any], totals: dict[str, Any]) -> str:
    parts = []
    if "waiting" in peaks:
        w = peaks["waiting"]
        parts.append(f"queue peak {w['max']:g} waiting (requests waited in {w['queued_fraction']:.0%} of scrapes)")
    if "running" in peaks:
        parts.append(f"running peak {peaks['running']['max']:g}")
    if "kv_usage" in peaks:
        kv = peaks["kv_usage"]
        parts.append(f"KV usage peak {kv['max']:.1%} (mean {kv['mean']:.1%})")
    if totals.get("preemptions") is not None:
        parts.append(f"preemptions {totals['preemptions']:g}")
    rate = totals.get("prefix_cache_hit_rate")
    if rate is None and "prefix_cache_hit_rate" in peaks:
        rate = peaks["prefix_cache_hit_rate"]["mean"]
    if rate is not None:
        parts.append(f"prefix-cache hit rate {rate:.0%}")
    if totals.get("spec_acceptance_rate") is not None:
        parts.append(f"draft acceptance {totals['spec_acceptance_rate']:.0%}")
    return " · ".join(parts)


def _ttft_lines(vs: dict[str, Any]) -> list[str]:
    out = []
    t = vs.get("ttft")
    if t and t.get("client"):
        e, c = t["engine"], t["client"]
        out.append(f"TTFT engine vs client ({e['count']} / {c['count']} requests): engine mean {_ms(e['mean'])} "
                   f"· p50 ≈{_ms(e.get('p50'))} ms; client mean {_ms(c['mean'])} · p50 {_ms(c['p50'])} ms "
                   f"→ {t['mean_diff_ms']:+.1f} ms outside the engine (means)")
    pr = vs.get("per_request")
    if pr and pr.get("ttft_minus_prompt_ms"):
        d = pr["ttft_minus_prompt_ms"]
        out.append(f"Per request ({pr['requests']} with server timings): client TTFT − server prompt time "
                   f"p50 {_ms(d['p50'])} · p99 {_ms(d['p99'])} · max {_ms(d['max'])} ms (includes any wait "
                   "for a free slot)")
    return out


def _kinds(kinds: dict[str, int] | None) -> str:
    return ", ".join(f"{k} ×{v}" for k, v in sorted((kinds or {}).items()))


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v:.1f}"

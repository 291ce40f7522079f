"""A ``Frame`` (live_stats.py) as the person running the load sees it: a rich table for a terminal,
one plain line for a pipe or a CI log, one JSON object for a script.

The rich view is a few lines, compact enough to sit under a sweep's growing step table.
"""

from __future__ import annotations

import orjson
from rich.text import Text

from tokenpace.runner.live_stats import Frame
from tokenpace.runner.loadcheck import CPU_LIMIT, LAG_P99_LIMIT_MS

WARN_FRACTION = 0.8  # a figure this close to its limit turns yellow; past the limit, red
_LABEL, _CELL = 15, 18  # the live view's column widths


def _ms(v: float | None) -> str:
    return "—" if v is None else (f"{v:.0f}" if v >= 10 else f"{v:.1f}")


def _num(v: float | None, digits: int = 1) -> str:
    return "—" if v is None else f"{v:,.{digits}f}"


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v:.0%}"


def _duration(s: float | None) -> str:
    if s is None:
        return "—"
    s = int(round(s))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def _level(value: float | None, limit: float) -> str:
    if value is None:
        return ""
    return "red" if value > limit else "yellow" if value > WARN_FRACTION * limit else ""


def _errors(f: Frame) -> str:
    return ", ".join(f"{kind} {n}" for kind, n in f.errors.items()) or "none"


def _requests(f: Frame) -> str:
    of = f"/{f.total}" if f.total is not None else ""
    return f"done {f.done}{of} · sent {f.sent}{of} · in flight {f.in_flight}"


def _remaining(f: Frame) -> str:
    if f.duration_s is not None:
        return f"{_duration(f.remaining_s)} left of {_duration(f.duration_s)}"
    if f.remaining_requests is None:
        return "—"
    eta = "" if f.remaining_s is None or not f.remaining_requests else f", ~{_duration(f.remaining_s)} at this rate"
    return f"{f.remaining_requests} requests left{eta}"


def _stopping(f: Frame) -> str | None:
    s = f.stopping
    if not s:
        return None
    if s.get("cancelled"):
        return f"cancelling {s['in_flight']} requests in flight"
    if not s["in_flight"]:
        return "stopping: sending stopped; no request in flight"
    return (f"stopping: sending stopped; {s['in_flight']} in flight get {s['grace_left_s']:.0f} s more "
            "(Ctrl-C again cancels them now)")


def render(f: Frame) -> Text:
    """The rich live view of one frame: one styled Text laid out by hand, at most ~80 columns
    (a rich Table measured and laid out its cells in ~20 ms per frame on a busy 2-core machine)."""
    out = Text.assemble(("tokenpace", "bold"), f" · {f.step + ' · ' if f.step else ''}{f.target} · "
                        f"{_duration(f.elapsed_s)} elapsed · {_remaining(f)}")
    out.append("\n" + f"{'requests':<{_LABEL}}", "bold")
    out.append(_requests(f))
    out.append("\n" + f"{'errors':<{_LABEL}}", "bold")
    out.append(_errors(f), "red" if f.errors else "")
    out.append("\n" + " " * _LABEL + f"{f'last {f.recent_s:g} s':<{_CELL}}overall", "dim")
    lag_level = _level(f.lag_ms["p99"], LAG_P99_LIMIT_MS) if f.lag_judged else ""
    lag_recent = _level(f.lag_ms["p99_recent"], LAG_P99_LIMIT_MS) if f.lag_judged else ""
    rows = [
        ("rate", f"{_num(f.rate_recent_rps, 2)} req/s", f"{_num(f.rate_rps, 2)} req/s", "", ""),
        ("out tok/s", _num(f.output_tokens_recent_s, 0), _num(f.output_tokens_s, 0), "", ""),
        ("TTFT p50/p99", f"{_ms(f.ttft_ms['p50_recent'])} / {_ms(f.ttft_ms['p99_recent'])} ms",
         f"{_ms(f.ttft_ms['p50'])} / {_ms(f.ttft_ms['p99'])} ms", "", ""),
        ("TPOT p50/p99", f"{_ms(f.tpot_ms['p50_recent'])} / {_ms(f.tpot_ms['p99_recent'])} ms",
         f"{_ms(f.tpot_ms['p50'])} / {_ms(f.tpot_ms['p99'])} ms", "", ""),
    ]
    if f.slo is not None:
        rows.append(("goodput", _pct(f.goodput_recent_fraction), f"{_pct(f.goodput_fraction)}   SLO {f.slo}",
                     "", ""))
    rows += [
        ("lag p99", f"{_ms(f.lag_ms['p99_recent'])} ms", f"{_ms(f.lag_ms['p99'])} ms"
         + ("" if f.lag_judged else "   (closed loop: not judged)"), lag_recent and "yellow", lag_level),
        ("client CPU", _pct(f.cpu_recent_util), _pct(f.cpu_util),
         _level(f.cpu_recent_util, CPU_LIMIT) and "yellow", _level(f.cpu_util, CPU_LIMIT)),
    ]
    for label, recent, overall, recent_style, overall_style in rows:
        out.append("\n" + f"{label:<{_LABEL}}", "bold")
        out.append(f"{recent:<{_CELL}}", recent_style)
        out.append(overall, overall_style)
    if f.engine is not None:
        out.append("\n" + f"{'engine':<{_LABEL}}", "bold")
        out.append(_engine(f.engine))
    for warning in f.warnings:
        out.append(f"\nthe run is heading for INVALID: {warning}", "bold red")
    stopping = _stopping(f)
    if stopping:
        out.append("\n" + stopping, "bold yellow")
    out.no_wrap, out.overflow = True, "ellipsis"  # wrapping the lines was a third of a frame's cost
    return out


def _engine(e: dict[str, float | None]) -> str:
    if not e:
        return "no scrape yet"
    return (f"waiting {_num(e.get('waiting'), 0)} · running {_num(e.get('running'), 0)} · "
            f"KV {_pct(e.get('kv_usage'))} · prefix hit {_pct(e.get('prefix_cache_hit_rate'))}")


def plain_line(f: Frame) -> str:
    """One line, no escape codes: for a pipe, a file or a CI log."""
    parts = [f"[{_duration(f.elapsed_s)}]"]
    if f.step:
        parts.append(f.step)
    parts += [_requests(f), _remaining(f), f"{_num(f.rate_recent_rps, 2)} req/s",
              f"{_num(f.output_tokens_recent_s, 0)} out tok/s",
              f"TTFT p50/p99 {_ms(f.ttft_ms['p50_recent'])}/{_ms(f.ttft_ms['p99_recent'])} ms",
              f"TPOT p50/p99 {_ms(f.tpot_ms['p50_recent'])}/{_ms(f.tpot_ms['p99_recent'])} ms"]
    if f.slo is not None:
        parts.append(f"goodput {_pct(f.goodput_recent_fraction)}")
    parts.append(f"errors {_errors(f)}")
    parts.append(f"lag p99 {_ms(f.lag_ms['p99'])} ms · CPU {_pct(f.cpu_util)}")
    if f.engine is not None:
        parts.append("engine " + _engine(f.engine))
    line = " · ".join(parts)
    if f.warnings:
        line += " · INVALID AHEAD: " + "; ".join(f.warnings)
    stopping = _stopping(f)
    if stopping:
        line += " · " + stopping
    return line


def json_line(f: Frame) -> str:
    """One JSON object (one line)."""
    return orjson.dumps({"type": "progress", **f.to_dict()}).decode()

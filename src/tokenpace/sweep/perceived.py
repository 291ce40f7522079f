"""Perceived latency, streamed against not streamed: a `--vary stream=on,off` sweep, load by load.

What a user feels is when the first words appear and when the answer is complete. Streamed, the
first words appear at the time to first visible content (TTFC: first_content − sent) and the
answer is complete at E2E; not streamed, nothing appears until the whole answer arrives, so both
are its E2E. A 10 s wait and then the whole answer feels slower than a stream that starts at
200 ms, even when the stream finishes later: the ratio of the two waits before anything shows
says by how much.

Pairs are the combinations that differ only in ``stream``; loads are those both ran validly.
"""

from __future__ import annotations

from typing import Any

from tokenpace.sweep.client_vary import on_off
from tokenpace.sweep.findings import analysed, dig


def perceived_latency(steps: list[dict[str, Any]], vary: list[tuple[str, list[str]]],
                      unit: str) -> list[dict[str, Any]]:
    """One comparison per pair of combinations that differ only in ``stream``: {"streamed",
    "not_streamed" (their labels), "rows": per common load, "sentences"}."""
    if "stream" not in {k for k, _ in vary}:
        return []
    groups: dict[str, list[dict[str, Any]]] = {}
    combos: dict[str, dict[str, str]] = {}
    for e in steps:
        groups.setdefault(e["group"], []).append(e)
        combos[e["group"]] = e.get("vary") or {}
    out = []
    for on_label, on_combo in combos.items():
        if not _is(on_combo.get("stream"), True):
            continue
        rest = {k: v for k, v in on_combo.items() if k != "stream"}
        partner = next((g for g, c in combos.items() if _is(c.get("stream"), False)
                        and {k: v for k, v in c.items() if k != "stream"} == rest), None)
        if partner is None:
            continue
        on = {e["load"]["value"]: e for e in analysed(groups[on_label])}
        off = {e["load"]["value"]: e for e in analysed(groups[partner])}
        rows = [_row(load, on[load]["summary"], off[load]["summary"]) for load in sorted(set(on) & set(off))]
        rows = [r for r in rows if r is not None]
        out.append({"streamed": on_label, "not_streamed": partner, "rows": rows,
                    "sentences": [_sentence(r, unit) for r in rows]})
    return out


def _is(text: str | None, on: bool) -> bool:
    try:
        return text is not None and on_off(text) is on
    except ValueError:
        return False


def _row(load: float, on: dict[str, Any], off: dict[str, Any]) -> dict[str, Any] | None:
    first = dig(on, "latency_ms", "ttfc") or dig(on, "latency_ms", "ttft") or {}
    done_on, done_off = dig(on, "latency_ms", "e2e") or {}, dig(off, "latency_ms", "e2e") or {}
    if first.get("p50") is None or done_on.get("p50") is None or done_off.get("p50") is None:
        return None
    return {"load": load,
            "streamed_first_words_ms": {"p50": first["p50"], "p99": first.get("p99")},
            "streamed_complete_ms": {"p50": done_on["p50"], "p99": done_on.get("p99")},
            "not_streamed_complete_ms": {"p50": done_off["p50"], "p99": done_off.get("p99")},
            "wait_ratio_p50": done_off["p50"] / first["p50"] if first["p50"] > 0 else None}


def _s(ms: float | None) -> str:
    if ms is None:
        return "—"
    return f"{ms:,.0f} ms" if ms < 1000 else f"{ms / 1000:,.1f} s"


def _sentence(r: dict[str, Any], unit: str) -> str:
    first, done, whole = r["streamed_first_words_ms"], r["streamed_complete_ms"], r["not_streamed_complete_ms"]
    ratio = r["wait_ratio_p50"]
    longer = f": users wait {ratio:,.0f}× longer before they see anything" if ratio and ratio >= 1.5 else ""
    return (f"At {r['load']:g} {unit}: streamed, the first words appear after {_s(first['p50'])} "
            f"(1 user in 100 waits over {_s(first['p99'])}) and the answer is complete after {_s(done['p50'])}; "
            f"not streamed, nothing appears for {_s(whole['p50'])} (1 in 100: over {_s(whole['p99'])}), "
            f"then the whole answer at once{longer}.")

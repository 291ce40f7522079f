"""`tokenpace lint`: what in a request log keeps prompts from hitting the provider's prompt cache.

Each request's cacheable prefix (Anthropic: up to its last ``cache_control`` breakpoint; others:
everything before the final user turn) is matched against every earlier request twice, in a radix
tree over its raw units and in one over its normalized units (volatile values such as timestamps,
IDs and e-mails masked, whitespace collapsed, JSON keys and tools sorted). Where the normalized
prefix runs further than the raw one, the content at the raw divergence invalidated the difference:
that many prefix units of that request could have been cached. Findings group these by kind and
place, with the units invalidated, the tokens the provider would then have cached (its minimum and
step applied), the prefill time that saves and its price. Provider rules are checked on the way:
prefixes below the minimum, too many breakpoints, a breakpoint that moves (a request sharing a
prefix with an earlier one reads no earlier breakpoint's prefix), stable content after changing
content, no breakpoint at all. Varying content whose fix would not fill one more cached step (the
provider's minimum and step applied) is not reported.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenpace.advise.gain import PrefillCost
from tokenpace.advise.logs import LoggedRequest
from tokenpace.advise.providers import Provider
from tokenpace.advise.radix import RadixTree
from tokenpace.advise.units import Encoder, build_prompt, prefix_hashes
from tokenpace.advise.volatile import FIXES

DEFAULT_WINDOW_UNITS = 20_000_000  # units of recent prompts the lint compares against (memory bound)
_EXAMPLES = 3
_RULES = ("below_minimum", "too_many_breakpoints")  # reported without a gain in cached tokens


@dataclass
class Finding:
    kind: str
    segment: str
    json_path: str
    requests: int = 0
    invalidated_units: int = 0
    cached_tokens_gained: int = 0
    ttft_saved_s: float = 0.0
    usd_saved: float | None = None
    token_offsets: list[int] = field(default_factory=list)
    char_offset: int | None = None
    examples: list[str] = field(default_factory=list)
    first_where: str = ""

    def add(self, req: LoggedRequest, units: int, gained: int, ttft_s: float, usd: float | None,
            offset: int | None, example: str | None) -> None:
        self.requests += 1
        self.invalidated_units += units
        self.cached_tokens_gained += gained
        self.ttft_saved_s += ttft_s
        if usd is not None:
            self.usd_saved = (self.usd_saved or 0.0) + usd
        if offset is not None and len(self.token_offsets) < 10_000:
            self.token_offsets.append(offset)
        if example is not None and example not in self.examples and len(self.examples) < _EXAMPLES:
            self.examples.append(example)
        if not self.first_where:
            self.first_where = req.where


class Linter:
    def __init__(self, provider: Provider, enc: Encoder, prefill: PrefillCost | None = None, *,
                 window_units: int = DEFAULT_WINDOW_UNITS, gpu_hour_usd: float | None = None) -> None:
        self.provider, self.enc, self.prefill = provider, enc, prefill
        self.gpu_hour_usd = gpu_hour_usd
        self.raw = RadixTree(window_units)
        self.norm = RadixTree(window_units)
        self.findings: dict[tuple[str, str], Finding] = {}
        self.requests = 0
        self.prompt_units = 0
        self.cacheable_units = 0
        self.shared_units = 0  # raw prefix units matched by an earlier request
        self.no_text = 0
        self._writes: set[tuple[int, int]] = set()  # (prefix units, prefix hash) at each breakpoint sent
        self._write_lengths: list[int] = []  # the distinct prefix lengths in _writes, sorted
        self._seen_segments: set[int] = set()
        self._tool_orders: set[tuple[str, ...]] = set()

    def feed(self, req: LoggedRequest) -> None:
        if not req.segments:
            self.no_text += 1
            return
        self.requests += 1
        segs = req.segments
        bps = [i for i, s in enumerate(segs) if s.breakpoint]
        anthropic = self.provider.id == "anthropic"
        cut = req.last_user or len(segs)  # a prompt that is all one user turn is all prefix
        if anthropic and bps:
            cut = bps[-1] + 1
        p = build_prompt(req, self.enc, cut)
        total = p.total
        self.prompt_units += total
        raw_end, norm_end = p.seg_raw[cut], p.seg_norm[cut]
        self.cacheable_units += raw_end
        l_raw = self.raw.match_insert(p.raw[:raw_end])
        l_norm = self.norm.match_insert(p.norm[:norm_end])
        self.shared_units += l_raw
        reach = min(p.raw_pos(l_norm), raw_end)
        if reach > l_raw:
            span = p.cause(l_raw, reach)
            if span is None:  # the same normalized text, sent differently: no span says how
                kind, label, char, start, example = "formatting", segs[0].label, None, l_raw, None
            else:
                kind, label, char = span.kind, segs[span.seg].label, span.char
                start = min(l_raw, span.raw_start)
                if kind in ("tool_order", "json_key_order"):  # which of the two differs from before
                    kind = "json_key_order" if p.tool_names in self._tool_orders else "tool_order"
                example = span.text[:80] if kind not in ("tool_order", "json_key_order") else None
            self._add(kind, label, req, reach - start, total, start, reach, start, char, example)
        prov = self.provider
        if anthropic and prov.max_breakpoints is not None and len(bps) > prov.max_breakpoints:
            self._add("too_many_breakpoints", "cache_control", req, 0, total, 0, 0, None, None,
                      f"{len(bps)} breakpoints")
        if anthropic and not bps and l_raw and prov.cached_tokens(l_raw):
            self._add("no_breakpoint", "cache_control", req, l_raw, total, 0, l_raw, None, None, None)
        prefix = raw_end if anthropic and bps else total
        if anthropic and not bps:
            prefix = 0
        if prefix and prefix < prov.min_cacheable_tokens:
            label = segs[bps[-1]].label if anthropic and bps else "(whole prompt)"
            self._add("below_minimum", label, req, 0, total, 0, 0, None, None, f"{prefix} {self.enc.unit}")
        if anthropic and bps:
            self._breakpoints(req, p, bps, l_raw, total)
        if p.tool_names:
            self._tool_orders.add(p.tool_names)
        self._static_after_dynamic(req, p, cut, total)

    def _breakpoints(self, req: LoggedRequest, p: Any, bps: list[int], l_raw: int, total: int) -> None:
        """A request that shares a cacheable prefix with an earlier one but whose breakpoints read
        nothing: no earlier breakpoint's prefix is a prefix of it (the breakpoint moves)."""
        ends = [p.seg_raw[i + 1] for i in bps]
        hashes = prefix_hashes(p.raw[:max(ends)])
        lengths = self._write_lengths
        hi = bisect.bisect_right(lengths, l_raw)
        read = any((n, int(hashes[n - 1])) in self._writes for n in lengths[max(0, hi - 64):hi] if n)
        read = read or any((n, int(hashes[n - 1])) in self._writes for n in ends if n)
        if not read and self.provider.cached_tokens(l_raw):
            self._add("moving_breakpoint", req.segments[bps[-1]].label, req, l_raw, total, 0, l_raw, None, None, None)
        for n in ends:
            if n and (n, int(hashes[n - 1])) not in self._writes:
                if len(self._writes) > 2_000_000:
                    self._writes.clear()
                    lengths.clear()
                self._writes.add((n, int(hashes[n - 1])))
                i = bisect.bisect_left(lengths, n)
                if i == len(lengths) or lengths[i] != n:
                    lengths.insert(i, n)

    def _static_after_dynamic(self, req: LoggedRequest, p: Any, cut: int, total: int) -> None:
        dynamic = None
        if len(self._seen_segments) > 5_000_000:
            self._seen_segments.clear()
        for i in range(cut):
            seg = req.segments[i]
            d = hash(seg.text)
            seen = d in self._seen_segments
            self._seen_segments.add(d)
            if not seen and dynamic is None:
                dynamic = i
            elif seen and dynamic is not None:
                units = p.seg_raw[i + 1] - p.seg_raw[i]
                start = p.seg_raw[dynamic]
                self._add("static_after_dynamic", seg.label, req, units, total, start, start + units,
                          p.seg_raw[i], 0, None)

    def _add(self, kind: str, label: str, req: LoggedRequest, units: int, total: int,
             cached_before: int, cached_after: int, offset: int | None, char: int | None,
             example: str | None) -> None:
        prov = self.provider
        before, after = prov.cached_tokens(cached_before), prov.cached_tokens(cached_after)
        gained = max(0, after - before)
        ttft = self.prefill.saved_s(total, before, after) if self.prefill and gained else 0.0
        usd = prov.usd_saved(gained)
        if usd is None and self.gpu_hour_usd is not None:
            usd = ttft * self.gpu_hour_usd / 3600.0
        f = self.findings.get((kind, label))
        if f is None:
            f = self.findings[(kind, label)] = Finding(kind, label, _json_path(label), char_offset=char)
        f.add(req, units, gained, ttft, usd, offset, example)

    def finish(self, *, min_requests: int = 2) -> list[dict[str, Any]]:
        out = []
        for f in self.findings.values():
            if f.requests < min_requests or (f.kind not in _RULES and not f.cached_tokens_gained):
                continue  # content that varies but would not fill one more cached step anyway
            offsets = np.array(f.token_offsets) if f.token_offsets else None
            fix = FIXES.get(f.kind, "").format(max=self.provider.max_breakpoints)
            routing = self.provider.routing_prefix_tokens
            if routing and offsets is not None and offsets.min() < routing:
                fix += (f"; it sits in the first {routing} tokens, which {self.provider.id} hashes to route a "
                        "request to a server, so these requests also miss the servers that hold the cache")
            out.append({
                "kind": f.kind, "segment": f.segment, "json_path": f.json_path,
                "char_offset": f.char_offset,
                "token_offset": None if offsets is None else
                {"min": int(offsets.min()), "median": float(np.median(offsets)), "max": int(offsets.max())},
                "requests": f.requests, "invalidated_units": f.invalidated_units,
                "cached_tokens_gained": f.cached_tokens_gained,
                "ttft_saved_ms_mean": 1e3 * f.ttft_saved_s / f.requests if self.prefill else None,
                "ttft_saved_s_total": f.ttft_saved_s if self.prefill else None,
                "usd_saved": f.usd_saved, "examples": f.examples, "first_seen": f.first_where, "fix": fix,
            })
        out.sort(key=lambda d: (-d["cached_tokens_gained"], -d["invalidated_units"], -d["requests"], d["kind"]))
        return out


def _json_path(label: str) -> str:
    return "$" if label in ("(whole prompt)", "cache_control") else "$." + label


def lint(requests: Iterable[LoggedRequest], linter: Linter, *, min_requests: int = 2) -> dict[str, Any]:
    for req in requests:
        linter.feed(req)
    findings = linter.finish(min_requests=min_requests)
    unit = linter.enc.unit
    return {
        "kind": "lint", "unit": unit, "provider": linter.provider.to_dict(),
        "prefill": linter.prefill.describe() if linter.prefill else None,
        "requests": linter.requests, "requests_without_text": linter.no_text,
        "prompt_units": linter.prompt_units, "cacheable_units": linter.cacheable_units,
        "shared_prefix_units": linter.shared_units,
        "findings": findings,
        "totals": {"cached_tokens_gained": sum(f["cached_tokens_gained"] for f in findings),
                   "usd_saved": sum(f["usd_saved"] or 0.0 for f in findings)
                   if any(f["usd_saved"] is not None for f in findings) else None},
    }

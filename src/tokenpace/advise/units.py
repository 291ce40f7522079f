"""A logged prompt as a sequence of units: tokens with a tokenizer, words otherwise (the text cut at
each space, so a doubled space is an empty word and whitespace drift shows; a word's id is a
polynomial hash of its bytes, computed for the whole text at once with numpy), and its normalized
twin for the lint.

Each segment is encoded on its own and the results joined (a chat template's tokens are not
counted), and the encoding of each distinct text is remembered, so a system prompt shared by a
million requests is tokenized once. ``block_hashes`` turns units into chained block hashes: the
hash of block i covers every unit before its end, as vLLM's do, so equal hashes mean equal prefixes.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from tokenpace.advise import volatile
from tokenpace.advise.logs import LoggedRequest

_SPACES = re.compile(r"\s+")
_BATCH_CHARS = 4096  # longer texts gain nothing from a batch: numpy's fixed cost is already small beside them
_MEMO_CHARS = 16_000_000  # characters of distinct texts remembered per memo, then it starts afresh


def _const(name: str) -> int:
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little") | (1 << 63)


PLACEHOLDER = {k: _const(f"<{k}>") for k in volatile.KINDS}


class Encoder:
    """Text → units (uint64 array), remembered per distinct text."""

    def __init__(self, tokenizer: Any = None) -> None:
        self.tokenizer = tokenizer
        self.unit = "tokens" if tokenizer is not None else "words"
        self._memo: dict[str, np.ndarray] = {}
        self._chars = 0

    def count(self, text: str) -> int:
        """len(self(text)), without building the units for words."""
        if self.tokenizer is not None:
            return len(self(text))
        if not text:
            return 0
        n = text.count(" ") + 1 - text.startswith(" ")
        return n - (n > 0 and text.endswith(" "))

    def prefetch(self, texts: list[str]) -> None:
        """Encode the texts not yet remembered in one pass (words only: numpy's fixed cost per
        call is most of the time a short text takes). Word ids do not depend on where a word
        sits, so the words of texts joined by one space are the texts' words one after another,
        once each text's one leading and one trailing space (which make no word) are dropped."""
        if self.tokenizer is not None:
            return
        memo, todo, seen = self._memo, [], set()
        for t in texts:
            if t not in memo and t not in seen:
                core = t[1:] if t.startswith(" ") else t
                core = core[:-1] if core.endswith(" ") else core
                if core and len(core) <= _BATCH_CHARS:  # ("", runs of spaces and long texts: one by one)
                    seen.add(t)
                    todo.append((t, core))
        if len(todo) < 2:
            return
        # a guard word at each end: a core that starts or ends with a space keeps its empty word
        ids = word_units(" ".join(["x", *(core for _, core in todo), "x"]))
        pos = 1
        for t, core in todo:
            n = core.count(" ") + 1
            self._remember(t, ids[pos:pos + n].copy())  # (a view would keep the whole batch alive)
            pos += n

    def _remember(self, text: str, units: np.ndarray) -> None:
        self._chars += len(text)
        if self._chars > _MEMO_CHARS:
            self._memo.clear()
            self._chars = len(text)
        self._memo[text] = units

    def __call__(self, text: str) -> np.ndarray:
        got = self._memo.get(text)
        if got is None:
            if self.tokenizer is not None:
                got = np.asarray(self.tokenizer.encode(text), dtype=np.uint64)
            else:
                got = word_units(text)
            self._remember(text, got)
        return got


@dataclass(slots=True)
class Span:
    """A stretch of the prompt that maps between the raw and the normalized units as a whole."""

    raw_start: int
    raw_len: int
    norm_start: int
    norm_len: int
    kind: str | None  # what normalizing changed here: a volatile kind, tool_order, json_key_order, whitespace
    seg: int  # the segment it is in
    char: int  # its offset in the segment's text
    text: str  # the raw text (for a volatile value, the value)


@dataclass(slots=True)
class Prompt:
    raw: np.ndarray  # up to the cut (build_prompt): the units after it are only counted, in total
    norm: np.ndarray
    spans: list[Span]
    seg_raw: list[int]  # raw unit offset where each segment starts (and the end)
    seg_norm: list[int]
    tool_names: tuple[str, ...] = ()  # in the order sent
    total: int = 0  # all the prompt's units

    def raw_pos(self, norm_pos: int) -> int:
        """The raw unit offset matching a normalized one (exact at span edges)."""
        for s in self.spans:
            if norm_pos < s.norm_start + s.norm_len:
                off = norm_pos - s.norm_start
                if off <= 0:
                    return s.raw_start
                return s.raw_start + (off if s.raw_len == s.norm_len else min(off, s.raw_len))
        return len(self.raw)

    def cause(self, raw_pos: int, reach: int) -> Span | None:
        """The normalized span that explains a raw divergence at ``raw_pos`` when the normalized
        prompt matched up to ``reach``: the first at or after ``raw_pos``, else the last before it
        (the earlier request that matched the raw units may not be the one that matched the rest)."""
        before = None
        for s in self.spans:
            if s.raw_start >= reach:
                break
            if s.kind is None:
                continue
            if s.raw_start + s.raw_len > raw_pos:
                return s
            before = s
        return before


def _canonical(text: str) -> str:
    try:
        return orjson.dumps(orjson.loads(text), option=orjson.OPT_SORT_KEYS).decode()
    except orjson.JSONDecodeError:
        return text


def _masked(text: str, enc: Encoder) -> np.ndarray:
    parts = [np.array([PLACEHOLDER[k]], dtype=np.uint64) if k else enc(_collapse(t))
             for t, k in _split(text)]
    return np.concatenate(parts) if parts else np.empty(0, np.uint64)


class _Memo(dict):
    """A dict of texts that starts afresh once its keys hold ``_MEMO_CHARS`` characters."""

    chars = 0

    def put(self, key: str, value: Any) -> Any:
        self.chars += len(key)
        if self.chars > _MEMO_CHARS:
            self.clear()
            self.chars = len(key)
        self[key] = value
        return value


_SPLITS = _Memo()
_COLLAPSED = _Memo()


def _collapse(text: str) -> str:
    got = _COLLAPSED.get(text)
    return _COLLAPSED.put(text, _SPACES.sub(" ", text)) if got is None else got


def _split(text: str) -> list[tuple[str, str | None]]:
    got = _SPLITS.get(text)
    return _SPLITS.put(text, volatile.split(text)) if got is None else got


def build_prompt(req: LoggedRequest, enc: Encoder, cut: int | None = None) -> Prompt:
    """``cut``: segments from this index on are only counted, not normalized (the final user turn)."""
    raw_parts: list[np.ndarray] = []
    norm_parts: list[np.ndarray] = []
    spans: list[Span] = []
    segs = req.segments
    seg_raw = [0] * (len(segs) + 1)
    seg_norm = [0] * (len(segs) + 1)
    r = n = after = 0

    def add(raw: np.ndarray, norm: np.ndarray, kind: str | None, seg: int, char: int, text: str) -> None:
        nonlocal r, n
        spans.append(Span(r, len(raw), n, len(norm), kind, seg, char, text))
        raw_parts.append(raw)
        norm_parts.append(norm)
        r += len(raw)
        n += len(norm)

    tools = [i for i, s in enumerate(segs) if s.role == "tools"]
    names: list[str] = []
    if tools:  # tool definitions normalize as a block: sorted by name, keys sorted
        canon = [_canonical(segs[i].text) for i in tools]
        names = [_tool_name(c) for c in canon]
        order = sorted(range(len(tools)), key=lambda k: names[k])
        raw = np.concatenate([enc(segs[i].text) for i in tools])
        norm = np.concatenate([_masked(canon[k], enc) for k in order])
        kind = ("tool_order" if order != list(range(len(tools))) else
                "json_key_order" if any(c != segs[i].text for c, i in zip(canon, tools)) else None)
        for i in tools:
            seg_raw[i], seg_norm[i] = r, n
        add(raw, norm, kind, tools[0], 0, "")
    for i, seg in enumerate(segs):
        if seg.role == "tools":
            continue
        seg_raw[i], seg_norm[i] = r + after, n
        if cut is not None and i >= cut:
            after += enc.count(seg.text)
            seg_raw[i + 1] = r + after  # (the loop's next step sets it too, unless this is the last)
            continue
        if seg.is_json:
            canon = _canonical(seg.text)
            add(enc(seg.text), _masked(canon, enc), "json_key_order" if canon != seg.text else None,
                i, 0, seg.text)
            continue
        char = 0
        for text, kind in _split(seg.text):
            if kind:
                add(enc(text), np.array([PLACEHOLDER[kind]], dtype=np.uint64), kind, i, char, text)
            else:
                collapsed = _collapse(text)
                raw = enc(text)
                add(raw, raw if collapsed == text else enc(collapsed),
                    None if collapsed == text else "whitespace", i, char, text)
            char += len(text)
    seg_raw[-1], seg_norm[-1] = r + after, n
    for i in tools:  # a tool ends where the block ends in the normalized order
        seg_norm[i] = seg_norm[tools[0]]
    empty = np.empty(0, np.uint64)
    return Prompt(np.concatenate(raw_parts) if raw_parts else empty,
                  np.concatenate(norm_parts) if norm_parts else empty, spans, seg_raw, seg_norm,
                  tuple(names), r + after)


def raw_units(req: LoggedRequest, enc: Encoder) -> np.ndarray:
    """The prompt's units, each segment encoded whole (the reuse analysis needs no normalizing)."""
    parts = [enc(s.text) for s in req.segments]
    return np.concatenate(parts) if parts else np.empty(0, np.uint64)


def _tool_name(canonical: str) -> str:
    try:
        d = orjson.loads(canonical)
    except orjson.JSONDecodeError:
        return canonical
    if isinstance(d, dict):
        fn = d.get("function")
        name = fn.get("name") if isinstance(fn, dict) else d.get("name")
        if isinstance(name, str):
            return name
    return canonical


_POW: np.ndarray = np.empty(0, np.uint64)
_BASE = np.uint64(0x9E3779B97F4A7C15)


def _powers(n: int) -> np.ndarray:
    global _POW
    if len(_POW) < n:
        size = max(n, 2 * len(_POW), 4096)
        p = np.ones(1, np.uint64)
        with np.errstate(over="ignore"):
            while len(p) < size:  # doubling: p[k:2k] = p[:k] * BASE^k
                p = np.concatenate([p, p * (p[-1] * _BASE)])
        _POW = p
    return _POW[:n]


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 of each unit: a unit's hash spread over all 64 bits (arrays wrap silently)."""
    z = x + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def word_units(text: str) -> np.ndarray:
    """One id per space-separated word (a space at either end of ``text`` makes no empty word).

    A word's id is sum(mix(byte_k) * BASE^k) over its bytes (mod 2^64), XOR its length: one prefix
    sum over the text's bytes, differenced at the word edges and shifted back by BASE^-start, so
    the same word has the same id anywhere. Sums run in int64 (the same bits as uint64, and
    numpy's int64 cumsum is about twice as fast); indices are intp (numpy's fast take path)."""
    raw = text.encode("utf-8")
    n = len(raw)
    if n == 0:
        return np.empty(0, np.uint64)
    b = np.frombuffer(raw, dtype=np.uint8)
    cuts = (b == 32).nonzero()[0]
    k = len(cuts)
    bounds = np.empty(k + 2, np.intp)
    bounds[0], bounds[k + 1] = -1, n
    bounds[1:k + 1] = cuts
    lo = 1 if raw[0] == 32 else 0
    hi = k + 1 - (1 if raw[-1] == 32 and k + 1 > lo else 0)
    starts = bounds[lo:hi] + 1
    ends = bounds[lo + 1:hi + 1]
    h = np.empty(n + 1, np.int64)
    h[0] = 0
    np.cumsum((_BYTE_MIX.take(b.astype(np.intp)) * _powers(n)).view(np.int64), out=h[1:])
    h = h.view(np.uint64)
    ids = (h.take(ends) - h.take(starts)) * _inverse_powers(n).take(starts)
    ids ^= (ends - starts).astype(np.uint64)
    return ids


_BYTE_MIX = _mix(np.arange(256, dtype=np.uint64))
_INV: np.ndarray = np.empty(0, np.uint64)
_INV_BASE = np.uint64(pow(0x9E3779B97F4A7C15, -1, 2**64))


def _inverse_powers(n: int) -> np.ndarray:
    global _INV
    if len(_INV) < n:
        size = max(n, 2 * len(_INV), 4096)
        p = np.ones(1, np.uint64)
        with np.errstate(over="ignore"):
            while len(p) < size:
                p = np.concatenate([p, p * (p[-1] * _INV_BASE)])
        _INV = p
    return _INV[:n]


def _wrapping_cumsum(x: np.ndarray) -> np.ndarray:
    """cumsum of uint64 values mod 2^64, run as int64 (the same bits, twice numpy's uint64 speed)."""
    return np.cumsum(x.view(np.int64)).view(np.uint64)


def prefix_hashes(units: np.ndarray) -> np.ndarray:
    """Element k identifies the prefix units[:k + 1]."""
    return _wrapping_cumsum(_mix(units) * _powers(len(units)))


def block_hashes(units: np.ndarray, block: int, *, spread: bool = False) -> np.ndarray:
    """One hash per full block, each identifying the whole prefix up to the block's end.
    ``spread``: the units are already hashes spread over 64 bits (word ids), not token ids."""
    full = len(units) // block * block
    if full == 0:
        return np.empty(0, np.uint64)
    u = units[:full] if spread else _mix(units[:full])
    return _wrapping_cumsum(u * _powers(full))[block - 1::block].copy()  # (contiguous: a view would keep it all)

"""Request datasets from files: ShareGPT, OpenAI-style JSONL, and Mooncake-style traces.

Formats, recognised per file (JSON document) or per line (JSONL):

- ShareGPT (a JSON list, or one conversation per JSONL line): ``{"conversations": [{"from":
  "human", "value": ...}, {"from": "gpt", "value": ...}, ...]}``. The first human turn is the
  prompt; the length of the reply after it is the expected output length.
- OpenAI-style JSONL: ``{"messages": [{"role": ..., "content": ...}, ...]}`` or ``{"prompt":
  "..."}``, each with an optional ``output_tokens`` (or ``max_tokens``, ``max_completion_tokens``).
- Mooncake-style trace JSONL: ``{"timestamp": ms, "input_length": n, "output_length": n,
  "hash_ids": [...]}``: no text; each hash id names one 512-token block of prompt content, so
  requests whose ids agree on their first k blocks share a k-block prefix.

`sample` names the small synthetic samples shipped in the package (`--dataset sample`: ShareGPT;
`--trace sample`: a trace), made by `scripts/make_sample_datasets.py` from our own word lists.

A bad line (not JSON, missing or ill-typed fields) is reported as ``file:line`` (``file:entry N``
inside a JSON document). ``skip_bad=False`` stops at the first with a UsageError; ``skip_bad=True``
skips it and counts it in ``Dataset.skipped``.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tokenpace.errors import UsageError

_DATA = Path(__file__).with_name("data")
SAMPLES = {"--dataset": _DATA / "sample_sharegpt.json", "--trace": _DATA / "sample_trace.jsonl"}
TRACE_BLOCK_TOKENS = 512  # the block size behind Mooncake's hash_ids
_HUMAN = ("human", "user")
_ASSISTANT = ("gpt", "assistant", "chatgpt", "bard", "model")
_OUTPUT_KEYS = ("output_tokens", "max_tokens", "max_completion_tokens")


@dataclass(frozen=True)
class DatasetEntry:
    where: str  # "12" (line) or "entry 12" (JSON document), for messages
    kind: str  # "sharegpt", "messages", "prompt", "trace"
    prompt: str | tuple[dict[str, Any], ...] = ""  # text or chat messages; "" for a trace
    output_tokens: int | None = None  # given in the file
    expected_output: str | None = None  # ShareGPT: the reply, whose length is the output length
    input_tokens: int | None = None  # traces only: the prompt length (no text)
    timestamp_ms: float | None = None  # traces only
    hash_ids: tuple[int, ...] = ()  # traces only


@dataclass
class Dataset:
    path: str
    entries: list[DatasetEntry]
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (where, why)
    out_of_order: int = 0  # traces put in time order (--sort-trace): entries earlier than the one before

    @property
    def format(self) -> str:
        kinds = Counter(e.kind for e in self.entries)
        return "+".join(k for k, _ in kinds.most_common())

    @property
    def is_trace(self) -> bool:
        return bool(self.entries) and all(e.kind == "trace" for e in self.entries)


def load_dataset(path: str | Path, *, skip_bad: bool = False, flag: str = "--dataset") -> Dataset:
    """Read every entry of a dataset file (see the module doc for the formats)."""
    if str(path) == "sample" and flag in SAMPLES:
        path = SAMPLES[flag]
    skipped: list[tuple[str, str]] = []

    def bad(where: str, why: str) -> None:
        if not skip_bad:
            raise UsageError(f"{flag}: {path}:{where}: {why} (--skip-bad-lines skips such lines)")
        skipped.append((where, why))

    entries: list[DatasetEntry] = []
    try:
        # JSONL is read line by line: a bad first line of a huge file is reported at once.
        with open(path, "rb") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                if not entries and not skipped and line.lstrip()[:1] == b"[":
                    _add_document(entries, line + fh.read(), path, flag, bad)  # a ShareGPT list
                    break
                try:
                    item = orjson.loads(line)
                except orjson.JSONDecodeError:
                    bad(str(lineno), "not valid JSON")
                    continue
                _add(entries, str(lineno), item, bad)
    except OSError as exc:
        raise UsageError(f"{flag}: cannot read {path}: {exc.strerror or exc}") from None
    if not entries:
        why = f" ({len(skipped)} bad lines skipped)" if skipped else ""
        raise UsageError(f"{flag}: {path} holds no usable request{why}")
    return Dataset(str(path), entries, skipped)


def in_time_order(trace: Dataset, *, sort: bool, flag: str = "--trace") -> Dataset:
    """A trace is replayed in file order, each request at its timestamp: one earlier than the line
    before would go out late and pass for load generator lag. Refuse the first such line
    (file:line), or with ``sort`` put the entries in time order (stable) and count how many moved."""
    entries = trace.entries
    late = [(before, e) for before, e in zip(entries, entries[1:])
            if (e.timestamp_ms or 0.0) < (before.timestamp_ms or 0.0)]
    if not late:
        return trace
    if not sort:
        before, e = late[0]
        raise UsageError(f"{flag}: {trace.path}:{e.where}: timestamp {e.timestamp_ms:g} ms is earlier "
                         f"than {before.timestamp_ms:g} ms on line {before.where}; the trace must be "
                         "in time order (--sort-trace sorts it)")
    return Dataset(trace.path, sorted(entries, key=lambda e: e.timestamp_ms or 0.0), trace.skipped,
                   out_of_order=len(late))


def _add_document(entries: list[DatasetEntry], data: bytes, path: Any, flag: str, bad) -> None:
    try:
        items = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{flag}: {path} is not valid JSON: {exc}") from None
    for i, item in enumerate(items, 1):
        _add(entries, f"entry {i}", item, bad)


def _add(entries: list[DatasetEntry], where: str, item: Any, bad) -> None:
    try:
        entries.append(parse_entry(where, item))
    except ValueError as exc:
        bad(where, str(exc))


def parse_entry(where: str, item: Any) -> DatasetEntry:
    """One entry from one decoded JSON object; ValueError saying what is wrong."""
    if not isinstance(item, dict):
        raise ValueError("expected a JSON object")
    if "conversations" in item:
        return _sharegpt(where, item["conversations"])
    if "input_length" in item or "timestamp" in item:
        return _trace(where, item)
    output = _output_tokens(item)
    if "messages" in item:
        return DatasetEntry(where, "messages", prompt=_messages(item["messages"]), output_tokens=output)
    if "prompt" in item:
        prompt = item["prompt"]
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("'prompt' must be a non-empty string")
        return DatasetEntry(where, "prompt", prompt=prompt, output_tokens=output)
    raise ValueError("expected 'conversations', 'messages', 'prompt' or a trace's 'input_length'")


def _sharegpt(where: str, turns: Any) -> DatasetEntry:
    if not isinstance(turns, list):
        raise ValueError("'conversations' must be a list")
    for i, turn in enumerate(turns):
        if not (isinstance(turn, dict) and isinstance(turn.get("value"), str)):
            raise ValueError(f"conversation turn {i + 1} needs 'from' and a string 'value'")
        if turn.get("from") in _HUMAN and turn["value"].strip():
            reply = next((t["value"] for t in turns[i + 1:]
                          if isinstance(t, dict) and t.get("from") in _ASSISTANT
                          and isinstance(t.get("value"), str)), None)
            return DatasetEntry(where, "sharegpt", prompt=turn["value"], expected_output=reply)
    raise ValueError("conversation has no non-empty human turn")


def _messages(messages: Any) -> tuple[dict[str, Any], ...]:
    if not isinstance(messages, list) or not messages:
        raise ValueError("'messages' must be a non-empty list")
    for i, m in enumerate(messages):
        if not (isinstance(m, dict) and isinstance(m.get("role"), str) and "content" in m):
            raise ValueError(f"message {i + 1} needs a string 'role' and a 'content'")
        if not isinstance(m["content"], (str, list)):
            raise ValueError(f"message {i + 1}: 'content' must be a string or a list of parts")
    return tuple(messages)


def _output_tokens(item: dict[str, Any]) -> int | None:
    for key in _OUTPUT_KEYS:
        if item.get(key) is not None:
            return _whole(item[key], key)
    return None


def _trace(where: str, item: dict[str, Any]) -> DatasetEntry:
    ts = item.get("timestamp")
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts) or ts < 0:
        raise ValueError("'timestamp' must be a number of milliseconds >= 0")
    hash_ids = item.get("hash_ids", [])
    if not isinstance(hash_ids, list) or not all(isinstance(h, int) and not isinstance(h, bool)
                                                 for h in hash_ids):
        raise ValueError("'hash_ids' must be a list of integers")
    return DatasetEntry(where, "trace", input_tokens=_whole(item.get("input_length"), "input_length"),
                        output_tokens=_whole(item.get("output_length"), "output_length"),
                        timestamp_ms=float(ts), hash_ids=tuple(hash_ids))


def _whole(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value \
            or value < 1 or value != int(value):
        raise ValueError(f"'{key}' must be a whole number >= 1, not {value!r}")
    return int(value)


def messages_text(prompt: str | tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> str:
    """A prompt as one text (for counting, and for the completions API): `role: content` lines."""
    if isinstance(prompt, str):
        return prompt
    parts = []
    for m in prompt:
        content = m.get("content")
        if isinstance(content, list):  # multimodal parts: keep the text ones
            content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        parts.append(f"{m.get('role')}: {content or ''}")
    return "\n\n".join(parts)

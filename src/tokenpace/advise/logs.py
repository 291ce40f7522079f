"""Request logs, read one line at a time: OpenAI chat/completions and Anthropic messages request
bodies (bare, or wrapped as ``{"request": body, "response": {...}}`` with the response's usage),
tokenpace proxy and instrumentation records that carry a ``prompt_hash_chain`` (hashchain.py) in
place of the text, and tokenpace datasets (ShareGPT lines, ``messages``/``prompt`` lines, trace
lines with ``hash_ids``).

Each line becomes a ``LoggedRequest`` whose prompt is a list of ``Segment``s in the order a
provider builds its cache prefix: tools, system, messages. A line that is not JSON or not a request
is a ``UsageError`` naming ``file:line`` (exit 2), unless ``skip_bad`` counts it instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from tokenpace.errors import UsageError
from tokenpace.workload.datasets import TRACE_BLOCK_TOKENS

SAMPLING_KEYS = ("model", "temperature", "top_p", "top_k", "max_tokens", "max_completion_tokens",
                 "seed", "n", "stop", "stop_sequences", "presence_penalty", "frequency_penalty",
                 "response_format", "tool_choice", "logit_bias")
_TIME_KEYS = ("timestamp", "ts", "time", "created_at", "start_time")


@dataclass(slots=True)
class Segment:
    label: str  # where it sits: "tools[2]", "system", "messages[3].content[1]"
    role: str  # tools, system, user, assistant, tool
    text: str
    breakpoint: bool = False  # carries cache_control (Anthropic)
    is_json: bool = False  # a tool definition or tool call: JSON whose key order can drift


@dataclass(slots=True)
class LoggedRequest:
    index: int
    where: str  # "file:line"
    kind: str  # chat, anthropic, completions, sharegpt, trace, hash-chain
    model: str | None = None
    segments: list[Segment] = field(default_factory=list)
    params: bytes = b""  # the sampling parameters, canonical JSON: part of a response-cache key
    prompt_tokens: int | None = None  # from usage (all prompt tokens, cached included), or a chain's units
    reported_prompt_tokens: int | None = None  # the provider's count, when the log has one
    cached_tokens: int | None = None  # from usage: read from the provider's cache
    output_tokens: int | None = None
    timestamp: float | None = None  # seconds, when the log has one
    block_hashes: tuple[int, ...] | None = None  # no text: a trace's hash_ids or a hash chain
    block_units: int = 0  # units per block of block_hashes
    unit: str = "tokens"  # unit of block_hashes

    @property
    def breakpoints(self) -> int:
        return sum(s.breakpoint for s in self.segments)

    @property
    def last_user(self) -> int:
        """Index of the first segment of the final user turn (the part meant to change)."""
        i = len(self.segments)
        while i > 0 and self.segments[i - 1].role == "user":
            i -= 1
        return i if i < len(self.segments) else len(self.segments)


@dataclass
class LogStats:
    path: str
    lines: int = 0
    requests: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    out_of_order: int = 0
    kinds: dict[str, int] = field(default_factory=dict)


def read_log(path: str, *, skip_bad: bool = False, stats: LogStats | None = None,
             flag: str = "log") -> Iterator[LoggedRequest]:
    """Yield each request of the JSONL file ``path`` in file order (streamed, never loaded whole)."""
    stats = stats if stats is not None else LogStats(path)
    last_ts = None
    try:
        fh = open(path, "rb", buffering=1 << 20)  # (lines of ~10 KB: the default 8 KB buffer takes 4x longer)
    except OSError as exc:
        raise UsageError(f"{flag}: cannot read {path}: {exc.strerror or exc}") from None
    with fh:
        for lineno, line in enumerate(fh, 1):
            stats.lines = lineno
            if len(line) < 8 and not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                item = orjson.loads(line)
                req = parse_record(item, stats.requests, where)
            except (orjson.JSONDecodeError, ValueError, TypeError, AttributeError) as exc:
                why = "not valid JSON" if isinstance(exc, orjson.JSONDecodeError) else str(exc)
                if not skip_bad:
                    raise UsageError(f"{flag}: {where}: {why} (--skip-bad-lines skips such lines)") from None
                stats.skipped.append((where, why))
                continue
            if req.timestamp is not None:
                if last_ts is not None and req.timestamp < last_ts:
                    stats.out_of_order += 1
                last_ts = req.timestamp
            stats.requests += 1
            stats.kinds[req.kind] = stats.kinds.get(req.kind, 0) + 1
            yield req
    if stats.requests == 0:
        why = f" ({len(stats.skipped)} bad lines skipped)" if stats.skipped else ""
        raise UsageError(f"{flag}: {path} holds no request{why}")


def parse_record(item: Any, index: int, where: str) -> LoggedRequest:
    if not isinstance(item, dict):
        raise ValueError("a line must be a JSON object")
    body = item.get("request", item.get("body", item))
    if not isinstance(body, dict):
        raise ValueError("'request' must be a JSON object")
    response = item.get("response") if isinstance(item.get("response"), dict) else {}
    req = LoggedRequest(index, where, "chat")
    req.timestamp = _timestamp(item)
    if item.get("prompt_hash_chain") is not None:  # (a record written without one has null here)
        from tokenpace.advise.hashchain import read_chain

        req.kind, req.model = "hash-chain", item.get("model")
        req.block_hashes, req.block_units, req.unit, req.prompt_tokens = read_chain(item["prompt_hash_chain"])
        # a proxy or instrumentation record: the provider's counts are fields of the record itself
        req.reported_prompt_tokens = _int(item.get("prompt_tokens"), "prompt_tokens")
        req.cached_tokens = _int(item.get("cached_prompt_tokens"), "cached_prompt_tokens")
        req.output_tokens = _int(item.get("output_tokens"), "output_tokens")
    elif "hash_ids" in body:
        ids = body["hash_ids"]
        if not isinstance(ids, list) or not all(isinstance(h, int) for h in ids):
            raise ValueError("'hash_ids' must be a list of integers")
        req.kind, req.block_hashes, req.block_units = "trace", tuple(ids), TRACE_BLOCK_TOKENS
        req.prompt_tokens = _int(body.get("input_length"), "input_length")
        req.output_tokens = _int(body.get("output_length"), "output_length")
        if isinstance(body.get("timestamp"), (int, float)):
            req.timestamp = body["timestamp"] / 1000.0
    elif "conversations" in body:
        req.kind = "sharegpt"
        turns = body["conversations"]
        if not isinstance(turns, list):
            raise ValueError("'conversations' must be a list")
        first = next((t for t in turns if isinstance(t, dict) and t.get("from") in ("human", "user")), None)
        if first is None or not isinstance(first.get("value"), str):
            raise ValueError("no human turn with a text 'value' in 'conversations'")
        req.segments = [Segment("conversations[0]", "user", first["value"])]
    elif "messages" in body:
        _chat(req, body)
    elif "prompt" in body:
        req.kind = "completions"
        prompt = body["prompt"]
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        if not isinstance(prompt, str):
            raise ValueError("'prompt' must be a string")
        req.segments = [Segment("prompt", "user", prompt)]
    else:
        raise ValueError("not a request: expected 'messages', 'prompt', 'conversations', 'hash_ids' "
                         "or 'prompt_hash_chain'")
    req.model = req.model or (body.get("model") if isinstance(body.get("model"), str) else None)
    params = {k: body[k] for k in SAMPLING_KEYS if k in body}
    req.params = orjson.dumps(params, option=orjson.OPT_SORT_KEYS)
    usage = response.get("usage", item.get("usage"))
    if isinstance(usage, dict):
        _usage(req, usage)
    return req


def _chat(req: LoggedRequest, body: dict[str, Any]) -> None:
    messages = body["messages"]
    if not isinstance(messages, list):
        raise ValueError("'messages' must be a list")
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise ValueError("'tools' must be a list")
    anthropic = "system" in body or any(isinstance(t, dict) and "input_schema" in t for t in tools) \
        or "anthropic_version" in body
    req.kind = "anthropic" if anthropic else "chat"
    segs = req.segments
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise ValueError(f"tools[{i}] must be an object")
        bp = "cache_control" in tool
        clean = {k: v for k, v in tool.items() if k != "cache_control"}
        segs.append(Segment(f"tools[{i}]", "tools", orjson.dumps(clean).decode(), bp, True))
    system = body.get("system")
    if isinstance(system, str):
        segs.append(Segment("system", "system", system))
    elif isinstance(system, list):
        for j, block in enumerate(system):
            _block(segs, f"system[{j}]", "system", block)
    elif system is not None:
        raise ValueError("'system' must be a string or a list of blocks")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ValueError(f"messages[{i}] must be an object with a 'role'")
        role = m["role"]
        content = m.get("content")
        if isinstance(content, str):
            segs.append(Segment(f"messages[{i}].content", role, content))
        elif isinstance(content, list):
            for j, block in enumerate(content):
                _block(segs, f"messages[{i}].content[{j}]", role, block)
        elif content is not None:
            raise ValueError(f"messages[{i}].content must be a string or a list")
        if m.get("tool_calls"):
            segs.append(Segment(f"messages[{i}].tool_calls", role, orjson.dumps(m["tool_calls"]).decode(),
                                False, True))


def _block(segs: list[Segment], label: str, role: str, block: Any) -> None:
    if isinstance(block, str):
        segs.append(Segment(label, role, block))
        return
    if not isinstance(block, dict):
        raise ValueError(f"{label} must be a string or an object")
    bp = "cache_control" in block
    if isinstance(block.get("text"), str):
        segs.append(Segment(label, role, block["text"], bp))
    elif block.get("type") == "tool_result":
        inner = block.get("content")
        text = inner if isinstance(inner, str) else orjson.dumps(inner).decode()
        segs.append(Segment(label, role, text, bp))
    else:  # tool_use, images, documents: their JSON stands for their tokens
        clean = {k: v for k, v in block.items() if k != "cache_control"}
        segs.append(Segment(label, role, orjson.dumps(clean).decode(), bp, True))


def _usage(req: LoggedRequest, u: dict[str, Any]) -> None:
    if "input_tokens" in u:  # Anthropic: input_tokens excludes cached and cache-written tokens
        read = _int(u.get("cache_read_input_tokens") or 0, "cache_read_input_tokens")
        write = _int(u.get("cache_creation_input_tokens") or 0, "cache_creation_input_tokens")
        req.prompt_tokens = req.reported_prompt_tokens = _int(u["input_tokens"], "input_tokens") + read + write
        req.cached_tokens = read
        req.output_tokens = _int(u.get("output_tokens"), "output_tokens")
    elif "prompt_tokens" in u:  # OpenAI, vLLM: prompt_tokens includes cached_tokens
        req.prompt_tokens = req.reported_prompt_tokens = _int(u["prompt_tokens"], "prompt_tokens")
        details = u.get("prompt_tokens_details") or {}
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        req.cached_tokens = _int(cached, "cached_tokens")
        req.output_tokens = _int(u.get("completion_tokens"), "completion_tokens")


def _int(v: Any, name: str) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(f"'{name}' must be a whole number >= 0, got {v!r}")
    return v


def _timestamp(item: dict[str, Any]) -> float | None:
    for key in _TIME_KEYS:
        v = item.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v) / (1000.0 if v > 1e11 else 1.0)  # milliseconds since the epoch
        if isinstance(v, str):
            try:
                return datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
            except ValueError:
                raise ValueError(f"'{key}' is not a number or an ISO 8601 time: {v!r}") from None
    return None

"""Fault injection for the built-in server: ``--faults SPEC`` makes chosen requests misbehave, so a
client's timeouts, error classification and accounting can be tested against a real server.

Grammar (``,`` separates entries; spaces around entries are ignored)::

    SPEC  := ENTRY ("," ENTRY)*
    ENTRY := KIND "=" WHEN [":" PARAM]
    WHEN  := FRACTION                 a fraction in (0, 1] of requests, e.g. 0.05
           | "every:" N               requests N, 2N, 3N, ...
           | "at:" N (";" N)*         exactly these requests, e.g. at:3;7;9 (quote it in a shell)
    PARAM := SECONDS | TOKENS         3s, 500ms or a bare number of seconds; a whole number of tokens

    --faults 'reset-mid=0.05,stall-first=0.02:3s,http-429=every:10:2,malformed-sse=at:3;7'

Requests are numbered 1, 2, 3, ... in the order the server receives them (POSTs to the two
generation routes; a request the server rejects as invalid still takes its number). A request gets
at most one fault: the first entry that selects it. Fractions are drawn from ``--seed`` and the
request number only, so the same seed faults the same requests in every run; the fraction entries
take disjoint slices of one draw per request, so each hits its fraction of requests and together
they may add up to at most 1.

Kinds (CLI spelling; PARAM and its default in brackets). Kinds marked *stream* apply to streamed
requests only; a non-streamed request is never selected for them.

- ``http-429``, ``http-500``, ``http-503``, ``http-529`` [Retry-After seconds, 1]: that status at
  once, with the format's error body (OpenAI's; Anthropic's on ``/v1/messages``: ``529`` is its
  ``overloaded_error``) and a ``Retry-After`` header.
- ``reset-before-headers``: the TCP connection is reset (RST) before any response byte.
- ``reset-mid`` [tokens, half of max_tokens] *stream*: the connection is reset once that many tokens
  were sent (0: right after the headers; max_tokens or more: after the last token, before the usage
  chunk and ``[DONE]``).
- ``stall-first`` (alias ``stall``) [seconds, 5] *stream*: a pause before the first token (after the
  headers and the role chunk), as a slow prefill; the engine is not held meanwhile.
- ``stall-mid`` [seconds, 5] *stream*: a pause after half the tokens (at least one); the tokens due
  meanwhile then arrive at once, as after a network stall.
- ``malformed-sse`` [tokens, half] *stream*: a line that is not SSE framing (``dta: {``: an unknown
  field, which a lenient SSE parser silently skips) after that many tokens; the stream then goes on.
- ``invalid-json`` [tokens, half] *stream*: a ``data:`` line whose JSON is cut short, after that
  many tokens; the stream then goes on.
- ``overloaded`` [tokens, half] *stream*: after that many tokens, an error event in the stream's
  format (Anthropic: ``event: error`` with ``overloaded_error``; chat and completions: ``data:
  {"error": {"type": "overloaded_error", ...}}``; Responses: an ``error`` event with that code), then
  the stream ends.
- ``no-done`` *stream*: no ``data: [DONE]`` (Anthropic: no ``message_stop``; Responses: no
  ``response.incomplete``, which carries the usage); the stream ends normally otherwise.
- ``no-usage`` *stream*: no usage at all, even when the request asks for it (Anthropic: none in
  ``message_delta``).
- ``empty-choices`` *stream*: every token chunk becomes ``"choices": []`` with no usage (Anthropic:
  a ``ping``; Responses: a ``response.in_progress``): a stream that carries no token, then its end.
- ``slow-headers`` [seconds, 5]: a pause before the response headers.
- ``wrong-content-type`` *stream*: the stream is served as ``text/plain``.
- ``endless`` [seconds between keep-alives, 1] *stream*: after the headers, ``: keep-alive``
  comments forever and no token, until the client gives up.

Each fault is logged in the send log (``{"kind": "fault", "fault": KIND, "param": P,
"request_number": N, ...}``, where P is the effective seconds or tokens) and counted in /metrics as
``tokenpace_faults_injected_total{kind="..."}``.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
import socket
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client.core import CounterMetricFamily, Metric

from .wire import error_body


@dataclass(frozen=True)
class FaultKind:
    name: str
    param: str | None  # "seconds", "tokens" or None (takes no PARAM)
    default: float | None  # for "tokens": None means half of max_tokens
    stream_only: bool


KINDS: dict[str, FaultKind] = {k.name: k for k in (
    FaultKind("http-429", "seconds", 1.0, False),
    FaultKind("http-500", "seconds", 1.0, False),
    FaultKind("http-503", "seconds", 1.0, False),
    FaultKind("http-529", "seconds", 1.0, False),
    FaultKind("reset-before-headers", None, None, False),
    FaultKind("reset-mid", "tokens", None, True),
    FaultKind("stall-first", "seconds", 5.0, True),
    FaultKind("stall-mid", "seconds", 5.0, True),
    FaultKind("malformed-sse", "tokens", None, True),
    FaultKind("invalid-json", "tokens", None, True),
    FaultKind("overloaded", "tokens", None, True),
    FaultKind("no-done", None, None, True),
    FaultKind("no-usage", None, None, True),
    FaultKind("empty-choices", None, None, True),
    FaultKind("slow-headers", "seconds", 5.0, False),
    FaultKind("wrong-content-type", None, None, True),
    FaultKind("endless", "seconds", 1.0, True),
)}  # fmt: skip
ALIASES = {"stall": "stall-first"}  # the spelling

_HTTP_ERRORS = {
    "http-429": (429, "RateLimitError", "Rate limit reached (injected fault)"),
    "http-500": (500, "InternalServerError", "Internal server error (injected fault)"),
    "http-503": (503, "ServiceUnavailableError", "Service unavailable (injected fault)"),
    "http-529": (529, "overloaded_error", "Overloaded (injected fault)"),
}
_MAX_SECONDS = 86_400.0
_MAX_COUNT = 1_000_000_000
# Plain ASCII decimals only (float() would also take "1_0", "inf" and "nan"); lengths bounded.
_DECIMAL = re.compile(r"(?:[0-9]{1,12}(?:\.[0-9]{0,12})?|\.[0-9]{1,12})")
_WHOLE = re.compile(r"[0-9]{1,10}")
_SECONDS = re.compile(r"((?:[0-9]{1,12}(?:\.[0-9]{0,12})?|\.[0-9]{1,12}))(ms|s)?")

MALFORMED_SSE_LINE = b"dta: {\n\n"  # not SSE framing: an unknown field name
INVALID_JSON_EVENT = b'data: {"choices":[{"index":0,"delta":{"content":"cut\n\n'
KEEP_ALIVE = b": keep-alive\n\n"


@dataclass(frozen=True)
class FaultRule:
    """One entry of a spec: which requests (``fraction``, ``every`` or ``at``) get which fault."""

    kind: str
    fraction: float | None = None
    every: int | None = None
    at: frozenset[int] = frozenset()
    param: float | None = None  # None: the kind's default

    def selects(self, number: int) -> bool:
        """For schedule rules: is request ``number`` selected? (Fractions are drawn by the injector.)"""
        if self.every is not None:
            return number % self.every == 0
        return number in self.at


def parse_faults(spec: str) -> tuple[FaultRule, ...]:
    """Parse a ``--faults`` spec. Raises ValueError with a one-line message."""
    if not spec.strip():
        raise ValueError("--faults: empty spec; expected e.g. reset-mid=0.05,http-429=every:10")
    entries = [entry.strip() for entry in spec.split(",")]
    if not all(entries):
        raise ValueError(f"--faults: an empty entry in {spec!r} (a stray comma?)")
    rules = tuple(_parse_entry(entry) for entry in entries)
    total = math.fsum(rule.fraction for rule in rules if rule.fraction is not None)
    if total > 1 + 1e-9:
        raise ValueError(f"--faults: the fractions add up to {total:g}; at most 1")
    return rules


def _parse_entry(entry: str) -> FaultRule:
    name, eq, rest = entry.partition("=")
    name = name.strip()
    kind = KINDS.get(ALIASES.get(name, name))
    if kind is None:
        raise ValueError(f"--faults: unknown fault {name!r}; known: {', '.join(KINDS)}")
    if not eq:
        raise ValueError(f"--faults: {entry!r} needs =WHEN, e.g. {kind.name}=0.05 or {kind.name}=every:10")
    parts = rest.split(":")
    n_when = 2 if parts[0].strip() in ("every", "at") else 1
    when, params = parts[:n_when], parts[n_when:]
    if len(when) < n_when or len(params) > 1:
        raise ValueError(f"--faults: cannot read {entry!r}; expected KIND=WHEN[:PARAM]")
    rule = _parse_when(kind.name, [w.strip() for w in when], entry)
    if not params:
        return rule
    param = params[0].strip()
    if kind.param is None:
        raise ValueError(f"--faults: {kind.name} takes no parameter, in {entry!r}")
    value = _parse_seconds(param, kind.name, allow_zero=kind.name in _HTTP_ERRORS) if kind.param == "seconds" \
        else _parse_tokens(param, kind.name)  # fmt: skip
    return FaultRule(rule.kind, rule.fraction, rule.every, rule.at, value)


def _parse_when(kind: str, when: list[str], entry: str) -> FaultRule:
    if len(when) == 1:
        text = when[0]
        if not _DECIMAL.fullmatch(text) or not 0 < float(text) <= 1:
            raise ValueError(f"--faults: WHEN must be a fraction in (0, 1], every:N or at:N;N, not {text!r} "
                             f"in {entry!r}")  # fmt: skip
        return FaultRule(kind, fraction=float(text))
    form, value = when
    numbers = value.split(";") if form == "at" else [value]
    if not all(_WHOLE.fullmatch(n.strip()) and 1 <= int(n) <= _MAX_COUNT for n in numbers):
        example = "every:10" if form == "every" else "at:3;7;9"
        raise ValueError(f"--faults: {form}: needs request numbers >= 1 (e.g. {example}), not {value!r} "
                         f"in {entry!r}")  # fmt: skip
    if form == "every":
        return FaultRule(kind, every=int(value))
    return FaultRule(kind, at=frozenset(int(n) for n in numbers))


def _parse_seconds(text: str, kind: str, *, allow_zero: bool) -> float:
    match = _SECONDS.fullmatch(text)
    if match:
        seconds = float(match[1]) / (1000 if match[2] == "ms" else 1)
        if (seconds > 0 or (allow_zero and seconds == 0)) and seconds <= _MAX_SECONDS:
            return seconds
    bound = ">= 0" if allow_zero else "> 0"
    raise ValueError(f"--faults: {kind} needs seconds {bound} and <= {_MAX_SECONDS:g} (e.g. 3s, 500ms or 2), "
                     f"not {text!r}")  # fmt: skip


def _parse_tokens(text: str, kind: str) -> int:
    if _WHOLE.fullmatch(text) and int(text) <= _MAX_COUNT:
        return int(text)
    raise ValueError(f"--faults: {kind} needs a whole number of tokens, not {text!r}")


class FaultInjector:
    """Numbers a server's requests, picks each one's fault and counts what it injected.

    Also a prometheus_client collector: register it to expose ``tokenpace_faults_injected_total``.
    """

    def __init__(self, rules: tuple[FaultRule, ...], seed: int | None) -> None:
        self.rules = rules
        self.seed = random.SystemRandom().getrandbits(32) if seed is None else seed
        self.received = 0
        self.injected = {rule.kind: 0 for rule in rules}

    def number_request(self) -> int:
        """Call when a generation request arrives (before any await): its 1-based number."""
        self.received += 1
        return self.received

    def pick(self, number: int, *, stream: bool) -> FaultRule | None:
        """The rule that selects request ``number``, if any (pure: same seed, same answer)."""
        draw = None
        low = 0.0  # fraction rules take consecutive slices of one draw in [0, 1)
        for rule in self.rules:
            applies = stream or not KINDS[rule.kind].stream_only
            if rule.fraction is None:
                if applies and rule.selects(number):
                    return rule
                continue
            if draw is None:
                draw = random.Random(f"{self.seed}/{number}").random()
            if applies and low <= draw < low + rule.fraction:
                return rule
            low += rule.fraction
        return None

    def select(self, number: int, params: Any, request_id: str, send_log: Any) -> Fault | None:
        """The fault of request ``number``, if any: counted, logged (when there is a send log), and
        applied to the request's parsed ``params`` (``stream``, ``max_tokens``, usage options)."""
        rule = self.pick(number, stream=params.stream)
        if rule is None:
            return None
        fault = Fault(rule, params.max_tokens)
        fault.adjust(params)
        self.injected[rule.kind] += 1
        if send_log is not None:
            send_log.add_fault(request_id, rule.kind, fault.param, number, time.monotonic_ns())
        return fault

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily("tokenpace_faults_injected", "Faults injected (--faults), by kind.",
                                     labels=["kind"])  # fmt: skip
        for kind, count in self.injected.items():
            family.add_metric([kind], count)
        yield family


class Fault:
    """What one selected fault does to one response. The server calls these hooks:

    ``adjust(params)`` once after parsing (the injector does it); ``before_headers(request, id)``
    before anything is sent (a response returned replaces the normal one); for streams ``content_type()``, ``at_tokens(n, ...)``
    before the first token (n = 0) and after every token chunk, ``token_chunk(...)`` for each token
    chunk, and ``skips(kind)`` for the closing usage and done events.
    """

    __slots__ = ("kind", "param", "threshold", "fired")

    def __init__(self, rule: FaultRule, max_tokens: int) -> None:
        self.kind = rule.kind
        spec = KINDS[rule.kind]
        param = rule.param if rule.param is not None else spec.default
        if spec.param == "tokens":  # past the last token: after it, before usage and [DONE]
            param = max_tokens // 2 if param is None else min(int(param), max_tokens)
        self.param = param  # seconds or tokens, as logged
        # Tokens sent before the mid-stream action; None: the kind has no mid-stream action.
        self.threshold: int | None = {
            "reset-mid": param, "malformed-sse": param, "invalid-json": param, "overloaded": param,
            "stall-first": 0, "endless": 0, "stall-mid": max(1, max_tokens // 2),
        }.get(rule.kind)  # fmt: skip
        self.fired = self.threshold is None

    def adjust(self, params: Any) -> None:
        """Change what the request asked for (``include_usage``, ``continuous_usage``)."""
        if self.kind in ("no-usage", "empty-choices"):
            params.include_usage = params.continuous_usage = False

    async def before_headers(self, request: web.Request, request_id: str,
                             fmt: Any = None) -> web.StreamResponse | None:
        if self.kind in _HTTP_ERRORS:
            status, error_type, message = _HTTP_ERRORS[self.kind]
            headers = {"X-Request-ID": request_id, "Retry-After": f"{self.param:g}"}
            body = (fmt.error_body if fmt is not None else error_body)(status, error_type, message)
            return web.Response(status=status, body=body,
                                content_type="application/json", headers=headers)  # fmt: skip
        if self.kind == "reset-before-headers":
            reset_connection(request)
            return web.Response()  # never sent: the connection is gone
        if self.kind == "slow-headers":
            await asyncio.sleep(self.param)
        return None

    def content_type(self, default: str) -> str:
        return "text/plain" if self.kind == "wrong-content-type" else default

    async def at_tokens(self, tokens_sent: int, request: web.Request, resp: web.StreamResponse,
                        framer: Any = None) -> None:
        """Act once ``tokens_sent`` reaches the threshold. Raises ConnectionResetError after a reset
        (and after an ``overloaded`` error event, which ends the stream)."""
        if self.fired or tokens_sent < self.threshold:
            return
        self.fired = True
        kind = self.kind
        if kind in ("stall-first", "stall-mid"):
            await asyncio.sleep(self.param)
        elif kind == "reset-mid":
            reset_connection(request)
            raise ConnectionResetError("injected fault: reset-mid")
        elif kind == "malformed-sse":
            await resp.write(MALFORMED_SSE_LINE)
        elif kind == "invalid-json":
            await resp.write(INVALID_JSON_EVENT)
        elif kind == "overloaded":
            await resp.write(framer.error_event("overloaded_error", "Overloaded (injected fault)"))
            await resp.write_eof()
            raise ConnectionResetError("injected fault: overloaded")
        elif kind == "endless":
            while True:  # ends when the client goes away (ConnectionError) or the server stops
                await resp.write(KEEP_ALIVE)
                await asyncio.sleep(self.param)

    def token_chunk(self, data: bytes, tokens: int, framer: Any) -> tuple[bytes, int, str]:
        """(bytes to write, tokens, send-log kind) for one token chunk."""
        if self.kind == "empty-choices":
            return framer.empty(), 0, "empty"
        return data, tokens, "token"

    def skips(self, event_kind: str) -> bool:
        return self.kind == "no-done" and event_kind == "done"


def reset_connection(request: web.Request) -> None:
    """Abort the connection with a TCP RST (SO_LINGER 0), as a crashed proxy or server would."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()

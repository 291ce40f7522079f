"""What a measuring proxy is told: where to listen, where to send, what to record."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tokenpace.instrumentation.sink import DEFAULT_BACKUPS, DEFAULT_MAX_BYTES


@dataclass(frozen=True)
class ProxyConfig:
    upstream: str  # the upstream's base URL with its API prefix, e.g. http://127.0.0.1:8000/v1
    host: str = "127.0.0.1"  # loopback unless told otherwise
    port: int = 9000  # 0: any free port
    slo: str | None = None  # goodput in /metrics and --watch is judged against it
    records_path: str | None = None  # rotating JSONL sink of the per-request records
    records_max_bytes: int = DEFAULT_MAX_BYTES
    records_backups: int = DEFAULT_BACKUPS
    window_s: float = 60.0  # the sliding window of goodput and the live view
    upstream_timeout_s: float = 600.0  # one request's whole life upstream
    starts_per_turn: int = 4  # a burst of new requests: upstream requests started per loop turn (0: all at once)
    accepts_per_turn: int = 8  # a burst of new connections: accepted per loop turn (0: the event loop's own accept, all waiting)
    # "auto": Python's automatic collector (after a gc.freeze() at start); the lower p99 on an idle
    # machine (RESULTS 24i). "quiet": no automatic garbage collection while serving; full collections
    # when no request is in flight; young ones if many objects pile up, and after one a full one by
    # gc_full_every_s (runner/run_gc.py).
    gc: str = "auto"
    gc_full_every_s: float = 300.0
    gc_check_s: float = 1.0  # how often "quiet" looks for a quiet moment
    # "tap": a stream's reads written to the client from the upstream connection's data callback
    # (proxy/tap.py), no task woken per read; "loop": a task awaits each read and writes it.
    relay: str = "tap"
    # --prompt-hashes: a salted hash chain of each prompt's blocks in its record (never the text).
    hash_salt: bytes | None = None  # None: no chain
    hash_block: int = 16  # units per block
    tokenizer: Any = None  # a tokenpace Tokenizer: blocks of tokens; None: blocks of words

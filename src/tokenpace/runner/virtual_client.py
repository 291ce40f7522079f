"""What bench's client would have recorded for a simulated request: its timeouts, and the cut at
the end of the grace period.

Applied to a finished simulation's records, as bench's client applies them to a live stream (the
limits are measured from ``sent``, as in ``tokenpace.client.openai``):

- ``ttft_timeout_s``: no token by then;
- ``idle_timeout_s``: the longest silence between chunks (before the first token only when there
  is no TTFT limit; a real server's role chunk arrives at once, so that silence starts at ``sent``);
- ``timeout_s``: not complete by then;
- ``cancel_at_ns``: still in flight when the grace period ended (status ``cancelled``).

The earliest limit passed wins; the record keeps the chunks delivered until then. Exact for the
grace cut (everything in flight ends at that one instant, after which nothing is sent). For
timeouts an approximation: the simulated engine kept serving a request the client gave up on,
where a real one would abort it and free its place a little earlier for the others.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from tokenpace.config import BenchConfig
from tokenpace.record import RequestRecord

NS = 1_000_000_000


@dataclass(frozen=True)
class ClientLimits:
    timeout_s: float | None = 600.0
    ttft_timeout_s: float | None = None
    idle_timeout_s: float | None = None

    @classmethod
    def of(cls, config: BenchConfig) -> ClientLimits:
        return cls(config.timeout_s, config.ttft_timeout_s, config.idle_timeout_s)

    @property
    def unset(self) -> bool:
        """No limit given: ``apply_client_limits`` cuts a record only at a ``cancel_at_ns``."""
        return self.timeout_s is None and self.ttft_timeout_s is None and self.idle_timeout_s is None


def apply_client_limits(r: RequestRecord, limits: ClientLimits, cancel_at_ns: int | None = None) -> None:
    if r.done_ns is None or r.sent_ns is None or r.status != "ok":
        return
    expiry = _first_expiry(r, limits)
    if cancel_at_ns is not None and cancel_at_ns < r.done_ns and (expiry is None or cancel_at_ns < expiry[0]):
        _cut(r, cancel_at_ns, "cancelled", None, None)
    elif expiry is not None:
        _cut(r, *expiry)


def _first_expiry(r: RequestRecord, limits: ClientLimits) -> tuple[int, str, str, str] | None:
    sent, done, found = r.sent_ns, r.done_ns, []
    total = None if limits.timeout_s is None else sent + round(limits.timeout_s * NS)
    if total is not None and total < done:
        found.append((total, "timeout", "total_timeout", f"no complete response within timeout_s={limits.timeout_s:g}"))
    first = r.first_token_ns if r.first_token_ns is not None else done
    if limits.ttft_timeout_s is not None:
        at = sent + round(limits.ttft_timeout_s * NS)
        if at < first:
            found.append((at, "timeout", "ttft_timeout", f"no token within ttft_timeout_s={limits.ttft_timeout_s:g}"))
    if limits.idle_timeout_s is not None:
        idle = round(limits.idle_timeout_s * NS)
        reads = ([] if limits.ttft_timeout_s is not None else [sent]) + list(r.chunk_ns)
        for a, b in zip(reads, reads[1:]):
            if b - a > idle:
                found.append((a + idle, "timeout", "idle_timeout",
                              f"nothing received for idle_timeout_s={limits.idle_timeout_s:g}"))
                break
    # Ties: the TTFT and idle limits win over the total one, as in the client's watchdog.
    return min(found, key=lambda f: (f[0], f[2] == "total_timeout")) if found else None


def _cut(r: RequestRecord, at_ns: int, status: str, kind: str | None, message: str | None) -> None:
    keep = bisect_right(r.chunk_ns, at_ns)
    r.chunk_ns, r.chunk_tokens = r.chunk_ns[:keep], r.chunk_tokens[:keep]
    if keep == 0:
        r.first_token_ns = r.first_content_ns = r.last_token_ns = None
    else:
        r.last_token_ns = r.chunk_ns[-1]
    r.output_tokens = sum(r.chunk_tokens)
    r.done_ns, r.status, r.error_kind, r.error_message = at_ns, status, kind, message  # type: ignore[assignment]
    r.finish_reason = None

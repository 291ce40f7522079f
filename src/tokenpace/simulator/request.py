"""What the simulator is asked to serve: one ``SimRequest`` per request, in issue order."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SimRequest:
    """One request as the engine sees it: token counts, when it arrives, which prefix it shares.

    ``arrival_s``: virtual arrival time (open loop); None in a closed loop, where a request is issued
    when an earlier one completes. Shared prefixes, for prefix caching, come one of two ways:
    ``prefix_group`` + ``prefix_tokens`` (every request of the group starts with the same
    ``prefix_tokens`` tokens), or ``prompt_block_hashes``: one content id per leading full KV block
    (requests whose ids agree on the first n blocks share those n blocks). The rest of a prompt is
    unique to the request.

    Conversations: ``session`` and ``turn`` (1-based) make a request one turn of a multi-turn
    session. Turn 1 arrives at its ``arrival_s`` (the session's start); turn k+1 has no
    ``arrival_s`` and is issued ``think_time_s`` after turn k completed (or failed), as bench's
    sessions do. A session is one growing token stream: turn k's prompt and reply are the start of
    turn k+1's prompt (history first), so with prefix caching turn k+1 finds turn k's prompt and
    reply blocks cached (the reply's full blocks are published as they are computed). Its block
    hashes come from the session and the block's position in that stream, so a session request
    carries no ``prefix_group`` or ``prompt_block_hashes`` of its own.
    """

    prompt_tokens: int
    output_tokens: int
    arrival_s: float | None = None
    prefix_group: str | int | None = None
    prefix_tokens: int = 0
    prompt_block_hashes: tuple[int, ...] | None = None
    session: int | None = None
    turn: int | None = None
    think_time_s: float = 0.0

    def __post_init__(self) -> None:
        if self.prompt_tokens < 1 or self.output_tokens < 1:
            raise ValueError("a request needs at least 1 prompt token and 1 output token")
        if self.arrival_s is not None and self.arrival_s < 0:
            raise ValueError("arrival_s must be >= 0")
        if not 0 <= self.prefix_tokens <= self.prompt_tokens:
            raise ValueError("prefix_tokens must lie in [0, prompt_tokens]")
        if self.think_time_s < 0:
            raise ValueError("think_time_s must be >= 0")
        if (self.session is None) != (self.turn is None):
            raise ValueError("a conversation turn needs both session and turn")
        if self.session is not None:
            if self.turn < 1:
                raise ValueError("turn counts from 1")
            if self.prefix_group is not None or self.prompt_block_hashes is not None:
                raise ValueError("a session request shares its history by itself: no prefix_group "
                                 "or prompt_block_hashes")
            if (self.turn == 1) != (self.arrival_s is not None):
                raise ValueError("a session's turn 1 needs arrival_s (the session's start), and "
                                 "later turns none (they follow the previous turn)")

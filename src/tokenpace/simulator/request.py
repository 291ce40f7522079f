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
    """

    prompt_tokens: int
    output_tokens: int
    arrival_s: float | None = None
    prefix_group: str | int | None = None
    prefix_tokens: int = 0
    prompt_block_hashes: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.prompt_tokens < 1 or self.output_tokens < 1:
            raise ValueError("a request needs at least 1 prompt token and 1 output token")
        if self.arrival_s is not None and self.arrival_s < 0:
            raise ValueError("arrival_s must be >= 0")
        if not 0 <= self.prefix_tokens <= self.prompt_tokens:
            raise ValueError("prefix_tokens must lie in [0, prompt_tokens]")

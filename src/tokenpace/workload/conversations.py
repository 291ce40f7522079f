"""Multi-turn conversations: sessions whose history grows each turn, with think time between turns.

`--conversations sessions=20,turns=6,think-time=exp:3s`. Turn k of a session sends the whole
history (every earlier user message and assistant reply, in order) and then a new user message:
history first, new message last, so each turn's prompt starts with the previous turn's prompt and
a prefix cache can reuse it. An assistant reply in the history is the reply the runner actually
received when it passes one to `next_turn`, else synthetic text of the previous turn's output
length. New user messages take their lengths from `--input-tokens`, replies from
`--output-tokens`.

Scheduling belongs to the runner: a session's turn k+1 is sent `think_time_s` after turn k's reply
completed (a failed turn still counts as completed: its reply is then the synthetic text). Turn 1
of each session is sent at `start_offset_s` (0 in a closed loop; the arrival process with
`--rate`, one arrival per session).

Think time: `3s` (fixed), `exp:3s` (exponential, mean 3 s), `uniform:1s..5s`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenpace.errors import UsageError
from tokenpace.workload.arrivals import arrival_offsets
from tokenpace.workload.datasets import messages_text
from tokenpace.workload.lengths import LengthSpec
from tokenpace.workload.prompts import PromptMaker
from tokenpace.workload.specparse import parse_kv, seconds, whole

FLAG = "--conversations"


@dataclass(frozen=True)
class ThinkTime:
    kind: str  # "fixed", "exp", "uniform"
    low_s: float
    high_s: float = 0.0  # uniform's upper bound

    @property
    def mean_s(self) -> float:
        return (self.low_s + self.high_s) / 2 if self.kind == "uniform" else self.low_s

    def sample(self, rng: np.random.Generator) -> float:
        if self.kind == "exp":
            return float(rng.exponential(self.low_s)) if self.low_s > 0 else 0.0
        if self.kind == "uniform":
            return float(rng.uniform(self.low_s, self.high_s))
        return self.low_s


def parse_think_time(text: str, flag: str = FLAG) -> ThinkTime:
    kind, colon, rest = text.strip().partition(":")
    if not colon:
        return ThinkTime("fixed", seconds(kind, flag))
    kind = kind.lower()
    if kind == "exp":
        return ThinkTime("exp", seconds(rest, flag))
    if kind == "uniform":
        lo, dots, hi = rest.partition("..")
        if not dots:
            raise UsageError(f"{flag}: uniform think time is like uniform:1s..5s, not {text!r}")
        low, high = seconds(lo, flag), seconds(hi, flag)
        if high < low:
            raise UsageError(f"{flag}: think time upper bound {hi!r} is below {lo!r}")
        return ThinkTime("uniform", low, high)
    raise UsageError(f"{flag}: think-time is 3s, exp:3s or uniform:1s..5s, not {text!r}")


@dataclass(frozen=True)
class ConversationSpec:
    sessions: int
    turns: int
    think_time: ThinkTime = ThinkTime("fixed", 0.0)

    @property
    def total_requests(self) -> int:
        return self.sessions * self.turns


def parse_conversations(text: str) -> ConversationSpec:
    pairs = parse_kv(text, FLAG, ("sessions", "turns", "think-time"))
    think = parse_think_time(pairs["think-time"]) if "think-time" in pairs else ThinkTime("fixed", 0.0)
    return ConversationSpec(sessions=whole(pairs, "sessions", FLAG), turns=whole(pairs, "turns", FLAG),
                            think_time=think)


@dataclass(frozen=True)
class ConversationTurn:
    """One request of a session: what to send, and how long to wait before sending it."""

    session: int
    turn: int  # 1-based
    messages: list[dict[str, Any]]
    input_tokens: int  # the whole history plus the new message (contents only)
    new_input_tokens: int  # the new user message
    output_tokens: int  # max_tokens
    think_time_s: float  # after the previous turn completed; 0 for turn 1
    extra_body: dict[str, Any] | None = None  # reasoning/tools fields, as plan items carry

    def prompt(self, api: str = "chat") -> str | list[dict[str, Any]]:
        """What to pass to the client: the messages, or one text for the completions API."""
        return messages_text(self.messages) if api == "completions" else self.messages


@dataclass
class Conversation:
    """A session's turns, planned up front (seeded); `next_turn` appends the history."""

    session: int
    start_offset_s: float
    user_texts: list[str]
    user_tokens: list[int]
    output_tokens: list[int]
    synthetic_replies: list[str]
    think_times_s: list[float]
    maker: PromptMaker
    extra_body: dict[str, Any] | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    history_tokens: int = 0
    turn: int = 0  # turns issued so far

    @property
    def turns(self) -> int:
        return len(self.user_texts)

    @property
    def done(self) -> bool:
        return self.turn >= self.turns

    def next_turn(self, previous_reply_text: str | None = None) -> ConversationTurn:
        """The next request. `previous_reply_text`: the reply received to the previous turn, if
        the runner kept it; otherwise the synthetic reply of the planned length is used."""
        if self.done:
            raise IndexError(f"session {self.session} has no turn after {self.turns}")
        k = self.turn
        if k > 0:
            reply = previous_reply_text or self.synthetic_replies[k - 1]
            self.history.append({"role": "assistant", "content": reply})
            self.history_tokens += (self.output_tokens[k - 1] if reply is self.synthetic_replies[k - 1]
                                    else self.maker.count(reply))
        self.history.append({"role": "user", "content": self.user_texts[k]})
        self.history_tokens += self.user_tokens[k]
        self.turn += 1
        return ConversationTurn(session=self.session, turn=k + 1,
                                messages=[dict(m) for m in self.history],
                                input_tokens=self.history_tokens, new_input_tokens=self.user_tokens[k],
                                output_tokens=self.output_tokens[k], think_time_s=self.think_times_s[k],
                                extra_body=self.extra_body)


def build_conversations(spec: ConversationSpec, input_tokens: LengthSpec, output_tokens: LengthSpec,
                        *, seed: int = 0, maker: PromptMaker | None = None, rate: float | None = None,
                        arrival: str = "poisson", burstiness: float = 1.0,
                        extra_body: dict[str, Any] | None = None) -> list[Conversation]:
    """Every session of the spec, deterministic for a seed. `extra_body`: e.g.
    `tokenpace.workload.extras.extra_body(reasoning_effort=..., tools=...)`."""
    maker = maker or PromptMaker()
    lengths_rng, text_rng, think_rng, arrivals_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence([seed, 0xC0]).spawn(4))
    starts = (arrival_offsets(rate, arrival, arrivals_rng, burstiness=burstiness) if rate else None)
    sessions = []
    for s in range(spec.sessions):
        ins = input_tokens.sample(lengths_rng, spec.turns).tolist()
        outs = output_tokens.sample(lengths_rng, spec.turns).tolist()
        thinks = [0.0] + [spec.think_time.sample(think_rng) for _ in range(spec.turns - 1)]
        sessions.append(Conversation(
            session=s, start_offset_s=next(starts) if starts is not None else 0.0,
            user_texts=[maker.text(text_rng, n) for n in ins], user_tokens=ins, output_tokens=outs,
            synthetic_replies=[maker.text(text_rng, n) for n in outs], think_times_s=thinks,
            maker=maker, extra_body=extra_body))
    return sessions

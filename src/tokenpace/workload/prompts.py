"""Synthetic prompts: of an exact token length with a tokenizer, of an approximate one without.

The approximation (no tokenizer): a prompt of N tokens is N words drawn from a vocabulary of common English words
that are single tokens (with their leading space) in the widely used BPE tokenizers (Llama 3,
GPT-4's cl100k, Qwen). A chat template adds its own tokens on the server, so the server's count is
always recorded beside the requested length, and reports mark input lengths as approximate.

Exact (`exact_prompt`, with a tokenizer from `tokenpace.workload.tokenizer`): random common words
are encoded, cut to N tokens, decoded, and the text is adjusted at its end until re-encoding it
gives exactly N tokens (a cut can merge differently once decoded, so the check is not optional).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from tokenpace.workload.tokenizer import Tokenizer

APPROXIMATION = "words: 1 token per common English word (no tokenizer given)"

VOCABULARY: tuple[str, ...] = tuple(
    """the time people year way day man thing woman life child world school state family student
    group country problem hand part place case week company system program question work number
    night point home water room mother area money story fact month lot right study book eye job
    word business issue side kind head house service friend father power hour game line end member
    law car city community name team minute idea body information back parent face level office
    door health person art war history party result change morning reason research girl moment air
    teacher force education plan light music river garden table window street market paper field
    road voice color heart dog bird tree fire stone wind rain snow sun moon sea ship train bread
    """.split()
)


def synthetic_prompt(rng: np.random.Generator, tokens: int) -> str:
    """A prompt of about `tokens` tokens: random common words, different for every draw."""
    idx = rng.integers(0, len(VOCABULARY), size=max(int(tokens), 1))
    return " ".join(VOCABULARY[i] for i in idx)


def exact_prompt(tokenizer: Tokenizer, tokens: int, rng: np.random.Generator) -> str:
    """Random common words re-encoding to exactly `tokens` tokens (ValueError if impossible)."""
    # Words are rarely more than 2 tokens: this many always give enough to cut from.
    return fit_text(tokenizer, synthetic_prompt(rng, tokens + 8), tokens, rng)


def fit_text(tokenizer: Tokenizer, text: str, tokens: int, rng: np.random.Generator) -> str:
    """`text` changed at its end only (so shared prefixes stay shared) to exactly `tokens` tokens."""
    n = max(int(tokens), 1)
    ids = tokenizer.encode(text)
    while len(ids) < n:  # too short: append words
        text = f"{text} {synthetic_prompt(rng, n - len(ids) + 8)}" if text else synthetic_prompt(rng, n + 8)
        ids = tokenizer.encode(text)
    text = tokenizer.decode(ids[:n])
    for _ in range(256):
        ids = tokenizer.encode(text)
        if len(ids) == n:
            return text
        if len(ids) > n:  # the cut merged differently once decoded: cut below n, then pad up
            text = tokenizer.decode(ids[: max(2 * n - len(ids), 1)])
        else:
            text = _pad(tokenizer, text, n, rng)
    raise ValueError(f"could not build a text of exactly {n} tokens with {tokenizer.source}")


_ONE_CHAR = (".", ",", "a", "e", "s", "1")


def _pad(tokenizer: Tokenizer, text: str, target: int, rng: np.random.Generator) -> str:
    """`text` plus one word (failing that, one character) that keeps it at most `target` tokens."""
    words = [VOCABULARY[int(i)] for i in rng.integers(0, len(VOCABULARY), size=8)]
    for candidate in [f"{text} {w}" for w in words] + [text + c for c in _ONE_CHAR]:
        if tokenizer.count(candidate) <= target:
            return candidate
    raise ValueError(f"could not pad a text to exactly {target} tokens with {tokenizer.source}")


class PromptMaker:
    """Text of N tokens and token counts: exact with a tokenizer, in words (approximate) without."""

    def __init__(self, tokenizer: Tokenizer | None = None):
        self.tokenizer = tokenizer

    @property
    def exact(self) -> bool:
        return self.tokenizer is not None

    @property
    def source(self) -> str:
        if self.tokenizer is None:
            return f"approximate ({APPROXIMATION})"
        return f"exact ({self.tokenizer.source}; text only, the chat template adds more)"

    def text(self, rng: np.random.Generator, tokens: int) -> str:
        if self.tokenizer is None:
            return synthetic_prompt(rng, tokens)
        return exact_prompt(self.tokenizer, tokens, rng)

    def fit(self, text: str, tokens: int, rng: np.random.Generator) -> str:
        """`text` cut or padded at its end to `tokens` tokens (words without a tokenizer)."""
        if self.tokenizer is not None:
            return fit_text(self.tokenizer, text, tokens, rng)
        words = text.split()
        if len(words) < tokens:
            words.extend(synthetic_prompt(rng, tokens - len(words)).split())
        return " ".join(words[:tokens])

    def count(self, text: str) -> int:
        return self.tokenizer.count(text) if self.tokenizer is not None else len(text.split())

    def units(self, text: str) -> list:
        """The sequence a prefix cache would see: token ids, or words without a tokenizer."""
        return self.tokenizer.encode(text) if self.tokenizer is not None else text.split()

"""Synthetic prompts of an approximate token length, with no tokenizer.

The approximation: a prompt of N tokens is N words drawn from a vocabulary of common English words
that are single tokens (with their leading space) in the widely used BPE tokenizers (Llama 3,
GPT-4's cl100k, Qwen). A chat template adds its own tokens on the server, so the server's count is
always recorded beside the requested length, and reports mark input lengths as approximate. A later
workload layer adds exact-length prompts from a real tokenizer file.
"""

from __future__ import annotations

import numpy as np

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

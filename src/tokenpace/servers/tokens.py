"""The built-in server's token counting: a deterministic approximation, not a real tokenizer.

Counting rule: a token is a whitespace-separated word. tokenpace's synthetic prompts are made of
common English words, which real BPE tokenizers mostly map to one token each, so this is close for
them and exact for the server's own output; it needs no tokenizer download.

- Completions: the prompt string's words. A prompt given as token ids (a list of ints) counts one
  token per id.
- Chat: the words of every message's ``content`` (a string, or the ``text`` of its text parts;
  image or audio parts count nothing). Nothing is added for the chat template (role markers, BOS):
  real servers add a few tokens there, which is exactly the kind of mismatch the client reports.
- Output: token i of a response is the word ``OUTPUT_VOCAB[i % len(OUTPUT_VOCAB)]`` with a leading
  space, so the generated text re-counts to exactly ``completion_tokens`` words.
"""

from __future__ import annotations

import hashlib

from typing import Any

import orjson

OUTPUT_VOCAB: tuple[str, ...] = (
    "the", "model", "writes", "a", "short", "answer", "about", "time", "and", "tokens",
    "with", "some", "plain", "words", "for", "you",
)  # fmt: skip
_OUTPUT_WORDS = tuple(" " + word for word in OUTPUT_VOCAB)
_OUTPUT_WORDS_JSON = tuple(orjson.dumps(word) for word in _OUTPUT_WORDS)  # the one-token chunks


_SLICE_CHARS = 1 << 20


def count_text_tokens(text: str) -> int:
    if len(text) <= _SLICE_CHARS:
        return len(text.split())
    # A huge prompt is counted a slice at a time, so that it never becomes millions of strings at once.
    count = 0
    for start in range(0, len(text), _SLICE_CHARS):
        piece = text[start : start + _SLICE_CHARS]
        count += len(piece.split())
        if start and not piece[0].isspace() and not text[start - 1].isspace():
            count -= 1  # one word across the cut, counted on both sides
    return count


def count_completion_prompt_tokens(prompt: Any) -> int:
    """Tokens of a /v1/completions ``prompt``: a string, token ids, or a one-element list of either.

    Raises ValueError for anything else (batched prompts are not supported).
    """
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return count_text_tokens(prompt)
    if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
        return len(prompt)
    raise ValueError("'prompt' must be a string or a list of token ids (batched prompts are not supported)")


def count_chat_prompt_tokens(messages: Any) -> int:
    """Tokens of a /v1/chat/completions ``messages`` list (content only, no template).

    Raises ValueError when ``messages`` is not a non-empty list of message objects.
    """
    if not isinstance(messages, list) or not messages:
        raise ValueError("'messages' must be a non-empty list")
    total = 0
    for message in messages:
        if not isinstance(message, dict):
            raise ValueError("each message must be an object")
        content = message.get("content")
        if isinstance(content, str):
            total += count_text_tokens(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    total += count_text_tokens(part["text"])
    return total


def output_text(start_token: int, n_tokens: int) -> str:
    """Text of output tokens ``start_token`` .. ``start_token + n_tokens - 1``."""
    n_words = len(_OUTPUT_WORDS)
    return "".join(_OUTPUT_WORDS[i % n_words] for i in range(start_token, start_token + n_tokens))


def output_text_json(start_token: int, n_tokens: int) -> bytes:
    """``output_text`` as a JSON string; one-token chunks (the common case) are pre-encoded."""
    if n_tokens == 1:
        return _OUTPUT_WORDS_JSON[start_token % len(_OUTPUT_WORDS_JSON)]
    return orjson.dumps(output_text(start_token, n_tokens))


def text_block_ids(text: str, block_tokens: int) -> tuple[int, ...]:
    """One content id per full block of ``block_tokens`` prompt tokens (words, as counted here),
    for the engine simulator's prefix cache: equal ids mean equal block contents. Digested with
    blake2b, so ids are the same in every process. Every request format gives the same text for
    the same prompt (``formats.py``), so a prefix is a hit whichever API carried it."""
    words = text.split()
    full = len(words) // block_tokens * block_tokens
    return tuple(int.from_bytes(hashlib.blake2b(" ".join(words[i:i + block_tokens]).encode(),
                                                digest_size=8).digest(), "big")
                 for i in range(0, full, block_tokens))

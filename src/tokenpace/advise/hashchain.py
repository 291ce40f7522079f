"""A salted hash chain of a prompt's blocks: what a proxy or instrumentation record keeps instead of
the prompt's text, so that prefix reuse can be measured later without storing what users wrote.

Field format (``"prompt_hash_chain"`` in a record)::

    {"v": 1, "unit": "tokens" | "words", "block": 16, "units": 1234, "salt_id": "9f86d081",
     "hashes": ["5d41402abc4b2a76", ...]}

``hashes[i]`` is the first 8 bytes (16 hex digits) of BLAKE2b(key=salt, hashes[i-1] ‖ units of
block i), units as 8-byte little-endian integers: the prompt's units as `workload reuse` counts them
(units.py: token ids with a tokenizer, else word ids, each segment in the provider's prefix order);
only full blocks are hashed, as an engine caches only full KV blocks. A proxy calls
``body_hash_chain(request_body, salt)`` and stores the result as the record's ``prompt_hash_chain``. Without
the salt the hashes cannot be tested against guessed prompts; ``salt_id`` (a digest of the salt)
tells which records can be compared: only chains made with the same salt and block size share
hashes.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

VERSION = 1


def salt_id(salt: bytes) -> str:
    return hashlib.sha256(b"tokenpace-salt-id:" + salt).hexdigest()[:8]


def body_hash_chain(body: dict[str, Any], salt: bytes, *, block: int = 16,
                    tokenizer: Any = None) -> dict[str, Any]:
    """The ``prompt_hash_chain`` field for an OpenAI or Anthropic request body (ValueError if it is
    not one). ``tokenizer``: a tokenpace Tokenizer for token blocks; words otherwise."""
    from tokenpace.advise.logs import parse_record
    from tokenpace.advise.units import Encoder, raw_units

    return chain_of_units(raw_units(parse_record(body, 0, "body"), Encoder(tokenizer)), salt, block=block,
                          unit="tokens" if tokenizer is not None else "words")


def prompt_hash_chain(text: str, salt: bytes, *, block: int = 16, tokenizer: Any = None) -> dict[str, Any]:
    """The field for a prompt given as one text."""
    from tokenpace.advise.units import Encoder

    return chain_of_units(Encoder(tokenizer)(text), salt, block=block,
                          unit="tokens" if tokenizer is not None else "words")


def chain_of_units(units: np.ndarray, salt: bytes, *, block: int, unit: str) -> dict[str, Any]:
    if block < 1:
        raise ValueError("block must be >= 1")
    if not salt:
        raise ValueError("the salt must not be empty")
    data = np.asarray(units).astype("<u8").tobytes()
    keyed = hashlib.blake2b(key=salt[:64], digest_size=8)  # copied per block: keying once is half the cost
    step = block * 8
    hashes, prev = [], b""
    for start in range(0, (len(units) // block) * step, step):
        h = keyed.copy()
        h.update(prev)
        h.update(data[start:start + step])
        prev = h.digest()
        hashes.append(prev.hex())
    return {"v": VERSION, "unit": unit, "block": block, "units": int(len(units)), "salt_id": salt_id(salt), "hashes": hashes}


class PromptHasher:
    """``body_hash_chain`` for a long-lived process (the proxy, an instrumented client): one salt,
    block size and tokenizer, and one encoder whose memory of texts already encoded is shared by
    every request (a system prompt sent a million times is split into units once).

    ``hasher(body)`` gives the field, or None for a body that is not an OpenAI or Anthropic
    request (a record then has no chain; it never fails the request)."""

    def __init__(self, salt: bytes | str, *, block: int = 16, tokenizer: Any = None) -> None:
        from tokenpace.advise.units import Encoder

        salt = salt.encode() if isinstance(salt, str) else bytes(salt)
        if not salt:
            raise ValueError("the salt must not be empty")
        if block < 1:
            raise ValueError("block must be >= 1")
        self.salt, self.block = salt, block
        self.unit = "tokens" if tokenizer is not None else "words"
        self._encoder = Encoder(tokenizer)

    def __call__(self, body: Any) -> dict[str, Any] | None:
        from tokenpace.advise.logs import parse_record
        from tokenpace.advise.units import raw_units

        try:
            units = raw_units(parse_record(body, 0, "body"), self._encoder)
        except Exception:  # noqa: BLE001 - a body we cannot read (or a tokenizer's failure) gets no chain, never a failed request
            return None
        return chain_of_units(units, self.salt, block=self.block, unit=self.unit)


def read_chain(field: Any) -> tuple[tuple[int, ...], int, str, int | None]:
    """(block hashes as ints, units per block, unit, prompt units when given) from a record's
    field; ValueError if malformed."""
    if not isinstance(field, dict) or field.get("v") != VERSION:
        raise ValueError(f"'prompt_hash_chain' must be an object with \"v\": {VERSION}")
    block, unit, hashes = field.get("block"), field.get("unit"), field.get("hashes")
    if not isinstance(block, int) or block < 1 or unit not in ("tokens", "words"):
        raise ValueError("'prompt_hash_chain' needs 'block' >= 1 and 'unit' tokens or words")
    if not isinstance(hashes, list):
        raise ValueError("'prompt_hash_chain.hashes' must be a list")
    units = field.get("units")
    if units is not None and (not isinstance(units, int) or units < len(hashes) * block):
        raise ValueError("'prompt_hash_chain.units' must be a whole number covering its blocks")
    try:
        return tuple(int(h, 16) for h in hashes), block, unit, units
    except (TypeError, ValueError):
        raise ValueError("'prompt_hash_chain.hashes' must be hex strings") from None

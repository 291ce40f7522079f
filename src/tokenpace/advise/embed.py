"""Near duplicates by embedding: a model2vec static embedding model read from a local folder
(``workload dedupe --embeddings DIR``), cosine similarity of the normalized vectors.

model2vec (optional extra ``embed``: numpy, tokenizers and safetensors, no torch) embeds a text as
the mean of its tokens' vectors, so a request costs a tokenizer call and a table look-up. Only a
folder is read (model.safetensors, tokenizer.json, config.json, as model2vec saves one): a name
that is not a folder is refused, never looked up on a model hub, so nothing is downloaded.

Each new request is compared with the most recent ``window`` earlier requests of its cache key
(one matrix-vector product); the best cosine is its similarity.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from tokenpace.errors import UsageError

INSTALL = "pip install 'tokenpace[embed]'"
DEFAULT_WINDOW = 65_536  # earlier requests per cache key compared against (memory: window x dim floats)


def load_embedding_model(path: str) -> Any:
    """A model2vec ``StaticModel`` from the folder ``path`` (UsageError, exit 2, otherwise)."""
    if not os.path.isdir(path):
        raise UsageError(f"--embeddings: {path} is not a folder (give a local model2vec model folder: "
                         "model.safetensors, tokenizer.json, config.json; nothing is downloaded)")
    try:
        from model2vec import StaticModel
    except ImportError:
        raise UsageError(f"--embeddings needs model2vec: {INSTALL}") from None
    try:
        # an existing folder is read as it is: model2vec only goes to a hub for a path that does not exist
        return StaticModel.from_pretrained(os.path.abspath(path))
    except Exception as exc:  # a missing or broken file: safetensors and tokenizers raise their own types
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"--embeddings: {path} is not a model2vec model folder: {why}") from None


class EmbeddingIndex:
    """Per cache key, the normalized vectors of the most recent ``window`` requests."""

    def __init__(self, model: Any, window: int = DEFAULT_WINDOW, source: str = "") -> None:
        self.model, self.window, self.source = model, window, source
        self._keys: dict[int, tuple[np.ndarray, list[int]]] = {}  # key -> (ring of vectors, [count])

    def vector(self, text: str) -> np.ndarray:
        v = np.asarray(self.model.encode([text], show_progress_bar=False), dtype=np.float32)[0]
        norm = float(np.linalg.norm(v))
        return v / norm if norm > 0 else v  # no known token: a zero vector, similar to nothing

    def best(self, key: int, v: np.ndarray) -> tuple[float, int]:
        """(best cosine with an earlier request of ``key``, its slot in this key's ring) or (0, -1)."""
        got = self._keys.get(key)
        if got is None:
            return 0.0, -1
        ring, (count,) = got
        sims = ring[:min(count, self.window)] @ v
        if not len(sims):
            return 0.0, -1
        j = int(np.argmax(sims))
        return float(sims[j]), j

    def add(self, key: int, v: np.ndarray) -> int:
        """Remember ``v`` under ``key``; returns its slot."""
        got = self._keys.get(key)
        if got is None:
            got = self._keys[key] = (np.zeros((min(16, self.window), len(v)), np.float32), [0])
        ring, state = got
        slot = state[0] % self.window
        if slot >= len(ring):  # grow by doubling up to the window
            bigger = np.zeros((min(2 * len(ring), self.window), len(v)), np.float32)
            bigger[:len(ring)] = ring
            ring = bigger
            self._keys[key] = (ring, state)
        ring[slot] = v
        state[0] += 1
        return slot

    def describe(self) -> str:
        dim = self.model.dim if hasattr(self.model, "dim") else "?"
        return (f"cosine of the normalized model2vec embeddings ({self.source}, {dim} dimensions) of the "
                f"normalized final user turn, against the {self.window:,} most recent requests of the same key")

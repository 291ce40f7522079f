"""`tokenpace workload dedupe`: what a response cache would serve, from a request log.

The cache key is the sampling parameters (model, temperature, top_p, max_tokens, seed, ...) plus
everything before the final user turn, exactly; the final user turn is compared after normalizing
(lower case, punctuation dropped, whitespace collapsed). A request is an exact hit when an earlier
request had the same key and the same normalized text, and a near hit at threshold t when an
earlier one with the same key has similarity >= t. Similarity is the Jaccard similarity of the sets
of character 5-grams, estimated by MinHash (128 permutations, standard error sqrt(J(1-J)/128),
0.027 at 0.9), with candidates found by LSH (32 bands of 4: at similarity 0.6 a pair is a
candidate with probability 0.99, at 0.5 0.87, so points below 0.6 are lower bounds). With an
embedding model (``embeddings``, embed.py) the similarity is instead the cosine of the normalized
model2vec vectors of the normalized final user turn; the curve, examples and savings are the same.

MinHash is implemented here with numpy (one vectorized pass per request) rather than taken from a
library: it is 20 lines, and datasketch, the well-kept one, updates its signature one shingle at a
time in Python, which is slower here and would be a new dependency.
"""

from __future__ import annotations

import re
import zlib
from collections import deque
from collections.abc import Iterable
from typing import Any

import numpy as np

from tokenpace.advise.embed import EmbeddingIndex
from tokenpace.advise.logs import LoggedRequest
from tokenpace.advise.units import Encoder

THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0)
NGRAM = 5
PERMS = 128
BANDS = 32
_PRIME = np.uint64(4294967311)  # > 2^32: (a·x + b) mod p stays in 64 bits for 32-bit x and a
_BUCKET_KEEP = 32  # candidates kept per LSH bucket (the most recent)
_PUNCT = re.compile(r"[^\w\s]")
_SPACE = re.compile(r"\s+")
_EXAMPLES = 3


def normalize(text: str) -> str:
    return _SPACE.sub(" ", _PUNCT.sub("", text.lower())).strip()


def shingles(text: str, n: int = NGRAM) -> set[str]:
    return {text[i:i + n] for i in range(max(1, len(text) - n + 1))}


def jaccard(a: str, b: str) -> float:
    sa, sb = shingles(a), shingles(b)
    return len(sa & sb) / len(sa | sb) if sa or sb else 1.0


class MinHasher:
    def __init__(self, perms: int = PERMS, seed: int = 20) -> None:
        rng = np.random.default_rng(seed)
        self.a = rng.integers(1, 2**32 - 1, size=perms, dtype=np.uint64)
        self.b = rng.integers(0, 2**32 - 1, size=perms, dtype=np.uint64)

    def signature(self, text: str) -> np.ndarray:
        x = np.fromiter((zlib.crc32(s.encode()) for s in shingles(text)), dtype=np.uint64)
        return ((np.outer(x, self.a) + self.b) % _PRIME).min(axis=0).astype(np.uint32)


class Dedupe:
    def __init__(self, enc: Encoder, similarity: float = 0.9, *, input_price: float | None = None,
                 output_price: float | None = None, embeddings: EmbeddingIndex | None = None) -> None:
        self.enc, self.similarity = enc, similarity
        self.embeddings = embeddings
        self._embedded_texts: dict[tuple[int, int], str] = {}  # (key, ring slot) -> text, for examples
        self.input_price, self.output_price = input_price, output_price
        self.hasher = MinHasher()
        self.rows = PERMS // BANDS
        self.exact: set[int] = set()
        self.buckets: dict[tuple[int, int, bytes], deque[int]] = {}
        self.sigs: list[np.ndarray] = []
        self.texts: list[str] = []
        self.requests = self.no_text = 0
        self.best: list[float] = []  # per request: best similarity to an earlier request (0: none)
        self.prompt_tokens: list[int] = []
        self.output_tokens: list[int | None] = []
        self.examples: dict[float, list[dict[str, Any]]] = {t: [] for t in THRESHOLDS}

    def feed(self, req: LoggedRequest) -> None:
        if not req.segments:
            self.no_text += 1
            return
        self.requests += 1
        cut = req.last_user
        context = hash((req.params, tuple(s.text for s in req.segments[:cut])))
        question = normalize(" ".join(s.text for s in req.segments[cut:]))
        prompt = req.prompt_tokens if req.prompt_tokens is not None else \
            sum(len(self.enc(s.text)) for s in req.segments)
        self.prompt_tokens.append(prompt)
        self.output_tokens.append(req.output_tokens)
        key = hash((context, question))
        if key in self.exact:
            self.best.append(1.0)
            return
        self.exact.add(key)
        if self.embeddings is not None:
            self._feed_embedding(req, context, question)
            return
        sig = self.hasher.signature(question)
        best, match = 0.0, -1
        bands = [(context, i, sig[i * self.rows:(i + 1) * self.rows].tobytes()) for i in range(BANDS)]
        seen: set[int] = set()
        for band in bands:
            for j in self.buckets.get(band, ()):
                if j not in seen:
                    seen.add(j)
                    s = float(np.mean(self.sigs[j] == sig))
                    if s > best:
                        best, match = s, j
        best = min(best, 0.999)  # not an exact duplicate after normalizing, so below 1
        self.best.append(best)
        idx = len(self.sigs)
        self.sigs.append(sig)
        self.texts.append(question[:200])
        for band in bands:
            self.buckets.setdefault(band, deque(maxlen=_BUCKET_KEEP)).append(idx)
        if match >= 0:
            self._example(req, question, self.texts[match], best)

    def _feed_embedding(self, req: LoggedRequest, context: int, question: str) -> None:
        index = self.embeddings
        v = index.vector(question)
        best, slot = index.best(context, v)
        earlier = self._embedded_texts.get((context, slot)) if slot >= 0 else None
        best = min(max(best, 0.0), 0.999)  # not an exact duplicate after normalizing, so below 1
        self.best.append(best)
        self._embedded_texts[(context, index.add(context, v))] = question[:200]
        if earlier is not None:
            self._example(req, question, earlier, best)

    def _example(self, req: LoggedRequest, question: str, earlier: str, best: float) -> None:
        bin_ = max((t for t in THRESHOLDS if t <= best), default=None)
        if bin_ is not None and len(self.examples[bin_]) < _EXAMPLES:
            self.examples[bin_].append({"request": req.where, "text": question[:200], "earlier": earlier,
                                        "similarity_estimated" if self.embeddings is None else "cosine":
                                        round(best, 3),
                                        "jaccard_exact": round(jaccard(question[:200], earlier), 3)})

    def report(self) -> dict[str, Any]:
        best = np.array(self.best) if self.best else np.zeros(0)
        prompt = np.array(self.prompt_tokens, dtype=np.int64)
        known_out = np.array([o is not None for o in self.output_tokens], dtype=bool)
        out_tok = np.array([o or 0 for o in self.output_tokens], dtype=np.int64)
        curve = []
        for t in THRESHOLDS:
            hit = best >= t
            curve.append({"threshold": t, "hits": int(hit.sum()),
                          "hit_rate": float(hit.mean()) if len(hit) else 0.0,
                          "examples": self.examples[t]})
        hit = best >= self.similarity
        exact = best >= 1.0
        saved_prompt, saved_out = int(prompt[hit].sum()), int(out_tok[hit & known_out].sum())
        usd = None
        if self.input_price is not None:
            usd = saved_prompt * self.input_price / 1e6 + (
                saved_out * self.output_price / 1e6 if self.output_price is not None else 0.0)
        return {
            "kind": "dedupe", "unit": "tokens" if any(o is not None for o in self.output_tokens)
            or self.enc.tokenizer is not None else "words",
            "similarity": {"measure": self.embeddings.describe() if self.embeddings is not None else
                           f"Jaccard of character {NGRAM}-grams of the normalized final user "
                           f"turn, MinHash estimate ({PERMS} permutations, LSH {BANDS}x{self.rows})",
                           "method": "embeddings" if self.embeddings is not None else "minhash",
                           "threshold": self.similarity},
            "key": "sampling parameters + everything before the final user turn (exact)",
            "requests": self.requests, "requests_without_text": self.no_text,
            "exact": {"hits": int(exact.sum()), "hit_rate": float(exact.mean()) if len(exact) else 0.0},
            "near": {"hits": int(hit.sum()), "hit_rate": float(hit.mean()) if len(hit) else 0.0},
            "curve": curve,
            "saved": {"prompt_units": saved_prompt, "output_tokens": saved_out,
                      "output_tokens_known_for": int((hit & known_out).sum()), "hit_requests": int(hit.sum()),
                      "usd": usd},
        }


def dedupe(requests: Iterable[LoggedRequest], analysis: Dedupe) -> dict[str, Any]:
    for req in requests:
        analysis.feed(req)
    return analysis.report()

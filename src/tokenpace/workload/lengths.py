"""Token-length specs: a fixed number or a seeded, truncated distribution.

Syntax (documented in the README):

    512                                   fixed
    uniform:min=128,max=1024              uniform integers in [min, max]
    normal:mean=200,std=80,min=1          normal, rounded, truncated to [min, max]
    lognormal:mean=800,sigma=0.6,max=8000 lognormal whose *mean* is `mean` tokens; sigma of the log
    empirical:file=lengths.txt,max=4096   drawn with replacement from the lengths in a file

Bounds: `min` defaults to 1 and `max` to 1,000,000. Truncation redraws out-of-bound samples (up
to a few rounds) and clips what is left, so the shape inside the bounds is kept. An empirical
distribution is truncated exactly: values outside [min, max] are dropped before drawing.

Empirical files: one whole number per line (blank lines and `#` comments ignored), or a JSON list
of whole numbers. A bad value is reported as `file:line`.
"""

from __future__ import annotations

import math
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tokenpace.errors import UsageError

_KINDS = {
    "uniform": ({"min", "max"}, {"min", "max"}),
    "normal": ({"mean", "std"}, {"mean", "std", "min", "max"}),
    "lognormal": ({"mean", "sigma"}, {"mean", "sigma", "min", "max"}),
    "empirical": ({"file"}, {"file", "min", "max"}),
}
_MAX_DEFAULT = 1_000_000
MAX_TOKENS = 100_000_000  # no prompt or output is longer; larger numbers are typos (and overflow)


@dataclass(frozen=True)
class LengthSpec:
    kind: str  # "fixed", "uniform", "normal", "lognormal", "empirical"
    params: tuple[tuple[str, float], ...]
    text: str
    values: tuple[int, ...] = ()  # empirical: the lengths read from the file, already in bounds

    @property
    def fixed(self) -> int | None:
        return int(self._p("value")) if self.kind == "fixed" else None

    @property
    def mean(self) -> float:
        if self.kind == "fixed":
            return self._p("value")
        if self.kind == "uniform":
            return (self._p("min") + self._p("max")) / 2
        if self.kind == "empirical":
            return float(np.mean(self.values))
        return self._p("mean")

    def _p(self, name: str, default: float | None = None) -> float:
        for key, value in self.params:
            if key == name:
                return value
        if default is None:
            raise KeyError(name)
        return default

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Draw n integer lengths (int64), deterministic for a given rng state."""
        if self.kind == "fixed":
            return np.full(n, int(self._p("value")), dtype=np.int64)
        lo, hi = self._p("min", 1), self._p("max", _MAX_DEFAULT)
        if self.kind == "uniform":
            return rng.integers(int(lo), int(hi) + 1, size=n, dtype=np.int64)
        if self.kind == "empirical":
            return rng.choice(np.asarray(self.values, dtype=np.int64), size=n, replace=True)
        out = np.rint(self._draw(rng, n))
        for _ in range(8):  # redraw out-of-bound samples so truncation keeps the shape
            bad = (out < lo) | (out > hi)
            if not bad.any():
                break
            out[bad] = np.rint(self._draw(rng, int(bad.sum())))
        return np.clip(out, lo, hi).astype(np.int64)

    def _draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "normal":
            return rng.normal(self._p("mean"), self._p("std"), size=n)
        sigma = self._p("sigma")
        mu = math.log(self._p("mean")) - sigma * sigma / 2  # so that E[X] = mean
        return rng.lognormal(mu, sigma, size=n)


def parse_length(text: str, *, flag: str = "length") -> LengthSpec:
    """Parse a length spec; raise UsageError naming the bad part."""
    raw = str(text).strip()
    if not raw:
        raise UsageError(f"{flag}: empty length spec")
    if ":" not in raw:
        value = _number(raw, flag, "value")
        if value < 1 or value != int(value):
            raise UsageError(f"{flag}: a fixed length must be a whole number >= 1, not {raw!r}")
        return LengthSpec("fixed", (("value", value),), raw)
    kind, _, rest = raw.partition(":")
    kind = kind.strip().lower()
    if kind not in _KINDS:
        raise UsageError(f"{flag}: unknown distribution {kind!r}; use a number, or one of "
                         f"{', '.join(sorted(_KINDS))}")
    required, allowed = _KINDS[kind]
    params: dict[str, float] = {}
    path: str | None = None
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = part.partition("=")
        key = key.strip().lower()
        if not eq:
            raise UsageError(f"{flag}: expected key=value, got {part!r}")
        if key not in allowed:
            raise UsageError(f"{flag}: {kind} takes {', '.join(sorted(allowed))}; unknown {key!r}")
        if key == "file":
            path = value.strip()
            continue
        params[key] = _number(value.strip(), flag, key)
    missing = required - params.keys() - ({"file"} if path else set())
    if missing:
        raise UsageError(f"{flag}: {kind} needs {', '.join(sorted(missing))}")
    _check(kind, params, flag)
    if kind == "empirical":
        lo, hi = params.get("min", 1), params.get("max", _MAX_DEFAULT)
        values = tuple(v for v in read_lengths_file(path, flag=flag) if lo <= v <= hi)
        if not values:
            raise UsageError(f"{flag}: no length in {path} lies within [{lo:g}, {hi:g}]")
        return LengthSpec(kind, tuple(sorted(params.items())), raw, values)
    return LengthSpec(kind, tuple(sorted(params.items())), raw)


def read_lengths_file(path: str, *, flag: str = "length") -> list[int]:
    """Whole numbers >= 1: one per line (blank lines, `#` comments ignored) or a JSON list."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{flag}: cannot read {path}: {exc}") from None
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{flag}: {path}:{exc.lineno}: not a valid JSON list: {exc.msg}") from None
        numbered = [(f"item {i + 1}", v) for i, v in enumerate(items)]
    else:
        numbered = []
        for lineno, line in enumerate(text.splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if line:
                numbered.append((str(lineno), line))
    values = []
    for where, item in numbered:
        try:
            value = float(item) if not isinstance(item, bool) else math.nan
        except (TypeError, ValueError):
            value = math.nan
        if not (math.isfinite(value) and value >= 1 and value == int(value)):
            raise UsageError(f"{flag}: {path}:{where}: expected a whole number >= 1, not {item!r}")
        values.append(int(value))
    if not values:
        raise UsageError(f"{flag}: {path} holds no lengths")
    return values


def _check(kind: str, p: dict[str, float], flag: str) -> None:
    lo, hi = p.get("min", 1), p.get("max", _MAX_DEFAULT)
    if lo < 1:
        raise UsageError(f"{flag}: min must be >= 1")
    if hi < lo:
        raise UsageError(f"{flag}: max ({hi:g}) is below min ({lo:g})")
    if kind == "normal" and p["std"] < 0:
        raise UsageError(f"{flag}: std must be >= 0")
    if kind == "lognormal" and (p["mean"] <= 0 or p["sigma"] < 0):
        raise UsageError(f"{flag}: lognormal needs mean > 0 and sigma >= 0")


def _number(text: str, flag: str, key: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{flag}: {key} must be a number, not {text!r}") from None
    if not math.isfinite(value):
        raise UsageError(f"{flag}: {key} must be finite, not {text!r}")
    if abs(value) > MAX_TOKENS:
        raise UsageError(f"{flag}: {key} must be at most {MAX_TOKENS:,} tokens, not {text!r}")
    return value

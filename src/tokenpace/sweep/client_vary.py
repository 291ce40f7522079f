"""`--vary` keys a client decides, so they work against any endpoint (measured or simulated):
how each request is asked for, not how the engine serves it.

- ``stream=on,off``: streamed or whole responses (measured sweeps only: the simulator has no
  notion of a response arriving whole), the what-if behind the perceived-latency comparison
  (``sweep.perceived``);
- ``api=chat,completions``: /chat/completions or /completions (measured sweeps only);
- ``output-tokens=128,512``: the output length spec (exactly that many tokens: EOS ignored); specs
  with commas of their own are separated by ';' (``output-tokens=uniform:min=8,max=64;512``);
- ``max-tokens=256,1024``: the cap on output tokens with EOS honoured, so the model may stop
  sooner, as production traffic does (``ignore_eos`` off).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tokenpace.config import APIS, BenchConfig
from tokenpace.errors import UsageError
from tokenpace.workload.lengths import parse_length


def on_off(text: str) -> bool:
    value = text.strip().lower()
    if value in ("on", "true", "yes", "1"):
        return True
    if value in ("off", "false", "no", "0"):
        return False
    raise ValueError("expected on or off")


def _api(text: str) -> str:
    if text not in APIS:
        raise ValueError(f"known APIs: {', '.join(APIS)}")
    return text


def _length(text: str) -> str:
    parse_length(text, flag="--vary output-tokens")  # a bad spec fails here, before any step runs
    return text


def _max_tokens(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError("must be >= 1")
    return value


# --vary KEY → (BenchConfig changes from the value, whether a simulated sweep can vary it)
CLIENT_KEYS: dict[str, tuple[Any, bool]] = {
    "stream": (lambda t: {"stream": on_off(t)}, False),
    "api": (lambda t: {"api": _api(t)}, False),
    "output-tokens": (lambda t: {"output_tokens": _length(t), "ignore_eos": True}, True),
    "max-tokens": (lambda t: {"output_tokens": str(_max_tokens(t)), "ignore_eos": False}, True),
}


def check_client_key(key: str, *, simulated: bool) -> None:
    if simulated and not CLIENT_KEYS[key][1]:
        raise UsageError(f"--vary {key} is measured against an endpoint: it needs --url or the built-in "
                         "server, not --sim")


def apply_client(base: BenchConfig, combo: dict[str, str]) -> BenchConfig:
    """``base`` with the combination's client keys applied (engine keys are left to the engine);
    a bad value is a UsageError."""
    changes: dict[str, Any] = {}
    for key, text in combo.items():
        if key not in CLIENT_KEYS:
            continue
        try:
            changes.update(CLIENT_KEYS[key][0](text))
        except (ValueError, TypeError, UsageError) as exc:
            raise UsageError(f"--vary {key}={text}: {exc}") from None
    return dataclasses.replace(base, **changes) if changes else base

"""What every tool is asked to do, and the one row each tool's own result is mapped onto."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Every peer process runs with these: a tool that tries a model hub fails at once instead of
# reaching it (and we give each tool a local tokenizer folder, so none has a reason to try).
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               "HF_HUB_DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1",
               "TOKENIZERS_PARALLELISM": "false", "NO_PROXY": "127.0.0.1,localhost",
               "no_proxy": "127.0.0.1,localhost"}


@dataclass(frozen=True)
class Workload:
    """One bounded, fixed-shape load: closed loop, streaming /v1/completions, exact lengths."""

    concurrency: int = 4
    requests: int = 40
    input_tokens: int = 128
    output_tokens: int = 32
    seed: int = 42
    timeout_s: int = 300          # per tool run, enforced by us on top of each tool's own bounds


@dataclass(frozen=True)
class Target:
    url: str                      # http://127.0.0.1:PORT/v1
    model: str
    tokenizer_dir: Path           # a Hugging Face tokenizer folder built offline

    @property
    def base(self) -> str:        # http://127.0.0.1:PORT (without /v1)
        return self.url.removesuffix("/").removesuffix("/v1")


@dataclass
class Stat:
    mean: float | None = None
    p50: float | None = None
    p99: float | None = None

    def cells(self) -> list[str]:
        return [_fmt(self.mean), _fmt(self.p50), _fmt(self.p99)]


@dataclass
class Row:
    """One tool's result, each figure under the tool's own definition (``names`` says which)."""

    tool: str
    version: str
    command: str = ""
    ttft_ms: Stat = field(default_factory=Stat)
    tpot_ms: Stat = field(default_factory=Stat)
    itl_ms: Stat = field(default_factory=Stat)
    e2e_ms: Stat = field(default_factory=Stat)
    output_tokens_s: float | None = None
    requests_s: float | None = None
    ok: int | None = None
    failed: int | None = None
    output_tokens_total: float | None = None
    window_s: float | None = None
    names: dict[str, str] = field(default_factory=dict)   # our figure -> the tool's field
    notes: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)     # the parsed figures, for the JSON

    def as_dict(self) -> dict[str, Any]:
        from dataclasses import asdict
        return asdict(self)


def _fmt(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def stat_ms(block: dict[str, Any] | None, *, scale: float, mean="mean", p50="p50",
            p99="p99") -> Stat:
    """A Stat in ms from a tool's summary block (``scale`` turns its unit into ms)."""
    if not block:
        return Stat()

    def get(key: str) -> float | None:
        value = block.get(key)
        return None if value is None else float(value) * scale
    return Stat(get(mean), get(p50), get(p99))


def peer_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    for key in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        env.pop(key, None)
    env.update(OFFLINE_ENV)
    env.update(extra or {})
    return env


def shell_line(argv: list[str], env_keys: dict[str, str] | None = None) -> str:
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env_keys or {}).items())
    return (prefix + " " if prefix else "") + shlex.join(argv)

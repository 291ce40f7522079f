"""A measuring reverse proxy for OpenAI-compatible APIs: streams relayed read by read, each
request recorded as a ``RequestRecord`` (JSONL, /metrics, a live console view)."""

from __future__ import annotations

from .app import ProxyState, create_app
from .config import ProxyConfig
from .serve import run_proxy, running_proxy, serve_until_stopped

__all__ = ["ProxyConfig", "ProxyState", "create_app", "run_proxy", "running_proxy", "serve_until_stopped"]

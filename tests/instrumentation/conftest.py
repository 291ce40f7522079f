"""Real servers for the instrumentation tests: the built-in server (and its fault-injecting twin)
as processes on loopback, shared by a module's tests."""

from __future__ import annotations

import pytest

from tokenpace.servers import BuiltinServerConfig, start_server_process

openai = pytest.importorskip("openai")


@pytest.fixture(scope="module")
def fault_url():
    # Requests 1, 2, 3: reset after 2 tokens, 429, a 0.3 s stall before the first token.
    server = start_server_process(BuiltinServerConfig(
        decode_base_s=0.002, prefill_base_s=0.001, faults="reset-mid=at:1:2,http-429=at:2,stall-first=at:3:0.3"))
    try:
        yield server.url
    finally:
        server.stop()

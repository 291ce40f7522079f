"""End-to-end fixtures: the built-in server as a real process on loopback, with its send log."""

from __future__ import annotations

import pytest

from tokenpace.servers import BuiltinServerConfig, start_server_process


@pytest.fixture
def logged_server(tmp_path):
    """A built-in server process writing its per-chunk send log; yields (server, log_path).

    Stop the server (``server.stop()``, which flushes the log) before reading the whole log."""
    log = tmp_path / "sends.jsonl"
    server = start_server_process(BuiltinServerConfig(send_log_path=str(log)))
    try:
        yield server, log
    finally:
        server.stop()

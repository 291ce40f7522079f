"""Fixtures for the built-in server's tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def send_log_path(tmp_path):
    return tmp_path / "sends.jsonl"

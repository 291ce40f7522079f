"""The built-in server's tests import tokenpace from the source tree when it is not installed."""

from __future__ import annotations

import sys
from pathlib import Path

try:
    import tokenpace.servers  # noqa: F401
except ImportError:  # not installed: test the source tree
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

import pytest


@pytest.fixture
def send_log_path(tmp_path):
    return tmp_path / "sends.jsonl"

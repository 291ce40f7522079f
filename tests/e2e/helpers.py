"""Helpers for the end-to-end tests."""

from __future__ import annotations

import os
import subprocess
import sys


def run_cli(*args: str, timeout_s: float = 120, cwd=None) -> subprocess.CompletedProcess:
    """Run the real `tokenpace` command line in a subprocess."""
    env = dict(os.environ, COLUMNS="120")
    return subprocess.run([sys.executable, "-m", "tokenpace", *args], capture_output=True,
                          text=True, timeout=timeout_s, cwd=cwd, env=env)

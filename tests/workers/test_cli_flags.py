"""`--workers` and `--max-clock-offset` on the command line: bad values are one line and exit 2."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tokenpace.errors import ExitCode


def run_cli(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tokenpace", *args], capture_output=True, text=True,
                          timeout=timeout_s, env=dict(os.environ, COLUMNS="120"))


@pytest.mark.parametrize(("args", "message"), [
    (("--workers", "0"), "must be a whole number >= 1 or auto, not '0'"),
    (("--workers", "two"), "must be a whole number >= 1 or auto, not 'two'"),
    (("--workers", "4", "--concurrency", "2"), "--workers 4 is more than --concurrency 2"),
    (("--max-clock-offset", "0"), "--max-clock-offset must be a number of milliseconds > 0"),
])
def test_bad_scale_out_flags_are_refused_before_any_traffic(args, message):
    proc = run_cli("bench", "--requests", "2", "--quiet", *args, timeout_s=60)
    assert proc.returncode == ExitCode.USAGE
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr

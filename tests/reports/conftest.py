"""Constructed runs shared by the report tests (see runs.py)."""

from __future__ import annotations

import os

import pytest

from .chromium import find_chromium
from .runs import make_records, write_run


@pytest.fixture(scope="session")
def constructed_runs(tmp_path_factory):
    """base; same (same distribution, other seed); slow (TTFT +30%); errors (10% of requests fail)."""
    d = tmp_path_factory.mktemp("runs")
    return {
        "base": write_run(d, "base", make_records(seed=0)),
        "same": write_run(d, "same", make_records(seed=1)),
        "slow": write_run(d, "slow", make_records(ttft_ms=130.0, seed=2)),
        "errors": write_run(d, "errors", make_records(errors=60, seed=3)),
    }


@pytest.fixture(scope="session")
def chromium():
    """Chromium's path; skips when none is installed, fails instead with TOKENPACE_REQUIRE_BROWSER=1
    (set by .ci/run)."""
    binary = find_chromium()
    if binary is None:
        if os.environ.get("TOKENPACE_REQUIRE_BROWSER") == "1":
            pytest.fail("TOKENPACE_REQUIRE_BROWSER=1 but no chromium is installed "
                        "(apt-get install chromium chromium-driver)")
        pytest.skip("no chromium installed (set TOKENPACE_REQUIRE_BROWSER=1 to fail instead)")
    return binary


SCREENSHOTS: list[str] = []  # filled by the browser tests, listed at the end of the run


def pytest_terminal_summary(terminalreporter):
    if SCREENSHOTS:
        terminalreporter.write_sep("-", "report screenshots (test artifacts)")
        for line in SCREENSHOTS:
            terminalreporter.write_line(line)

"""The one rule for how a run ended (bench, sim, each sweep step) and the exit code it gives."""

from __future__ import annotations

import pytest

from tokenpace.errors import ExitCode
from tokenpace.record import RequestRecord
from tokenpace.results import RunResult, run_status
from tokenpace.metrics import summarize

MS = 1_000_000


def _summary(statuses: list[str]) -> dict:
    records = [RequestRecord(request_id=f"r{i}", index=i, sent_ns=i * MS, first_token_ns=i * MS + 5 * MS,
                             last_token_ns=i * MS + 9 * MS, done_ns=i * MS + 9 * MS,
                             chunk_ns=[i * MS + 5 * MS, i * MS + 9 * MS], chunk_tokens=[1, 1],
                             status=s, error_kind=None if s == "ok" else "http_500")
               for i, s in enumerate(statuses)]
    return summarize(records)


@pytest.mark.parametrize("statuses, interrupted, load, status, code", [
    (["ok", "ok"], False, None, "ok", ExitCode.OK),
    (["ok", "error"], False, {"valid": True}, "ok", ExitCode.OK),
    (["error", "error"], False, None, "failed", ExitCode.RUN_FAILED),
    ([], False, None, "failed", ExitCode.RUN_FAILED),
    (["ok"], False, {"valid": False, "invalid_reasons": ["schedule lag p99 12 ms > 10 ms"]},
     "invalid", ExitCode.INVALID_RUN),
    (["error"], False, {"valid": False, "invalid_reasons": ["x"]}, "failed", ExitCode.RUN_FAILED),
    (["error"], True, None, "interrupted", ExitCode.INTERRUPTED),
])
def test_status_and_exit_code(statuses, interrupted, load, status, code):
    got = run_status(_summary(statuses), interrupted=interrupted, load=load)
    assert (got.status, got.exit_code) == (status, code)
    assert (got.reason is None) == (status == "ok")


def test_reasons_name_what_failed():
    assert run_status(_summary(["error", "error"])).reason == "every request failed (http_500 2)"
    assert run_status(_summary([])).reason == "no request was measured"
    invalid = run_status(_summary(["ok"]), load={"valid": False, "invalid_reasons": ["a", "b"]})
    assert invalid.reason == "load generator was the bottleneck: a; b"


def test_a_run_result_applies_the_rule_to_itself(tmp_path):
    result = RunResult(config=None, target={}, records=[], summary=_summary(["error"]),
                       result_path=tmp_path / "r.json", records_path=tmp_path / "r.records.jsonl")
    assert result.status.exit_code == ExitCode.RUN_FAILED

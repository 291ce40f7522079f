"""The issue's promise: `tokenpace report calls.jsonl` works on what the instrumented client wrote,
and `compare` sets it beside a load test."""

from __future__ import annotations

import builtins
import subprocess
import sys

import openai
import pytest

import tokenpace
from tokenpace.errors import UsageError

MODEL = "tokenpace-sim"


def cli(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "tokenpace", *args], capture_output=True, text=True, timeout=120)
    # The console wraps at its width, and a long temporary path moves where: phrases are checked
    # with every run of whitespace as one space.
    done.stdout = " ".join(done.stdout.split())
    return done


def test_report_and_compare_read_instrumentation_records(server_url, tmp_path):
    calls = tmp_path / "calls.jsonl"
    client = tokenpace.instrument(openai.OpenAI(base_url=server_url, api_key="k", max_retries=0),
                                  slo="chat", records=str(calls), prometheus=False)
    for _ in range(6):
        list(client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}],
                                            max_tokens=8, stream=True))
    report = cli("report", str(calls), "--slo", "chat")
    assert report.returncode == 0, report.stderr
    assert "live traffic" in report.stdout and "Requests: sent 6 = ok 6" in report.stdout
    assert "Load generator" not in report.stdout
    assert "output from usage (6)" in report.stdout  # the injected include_usage paid off
    bench = cli("bench", "--url", server_url, "--requests", "6", "--concurrency", "2", "--output-tokens", "8",
                "--out", str(tmp_path / "night.json"))
    assert bench.returncode == 0, bench.stderr
    compare = cli("compare", str(tmp_path / "night.json"), str(calls))
    assert compare.returncode == 0, compare.stderr
    assert "run 1: " in compare.stdout and "live traffic" in compare.stdout


def test_otel_without_the_sdk_says_how_to_install_it(monkeypatch):
    real_import = builtins.__import__

    def no_otel(name, *args, **kwargs):
        if name.startswith("opentelemetry"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_otel)
    with pytest.raises(UsageError, match=r"pip install 'tokenpace\[otel\]'"):
        tokenpace.instrument(object.__new__(_FakeClient), otel=True, prometheus=False)


class _FakeClient:
    chat = completions = None

"""`tokenpace bench --api anthropic|responses` against `tokenpace serve` (both the real command
line): the cache breakpoint's writes and reads, their cost, and every report reading those runs."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
from contextlib import contextmanager

import pytest

from .helpers import run_cli
from tokenpace.errors import ExitCode

WORKLOAD = ("--shared-prefix", "groups=1,prefix-tokens=512,per-group=6", "--requests", "6", "--concurrency", "1",
            "--input-tokens", "24", "--output-tokens", "6", "--quiet")


@contextmanager
def serve(*args: str):
    """`tokenpace serve --port 0 ARGS` in a subprocess; yields its /v1 URL (from its first line)."""
    proc = subprocess.Popen([sys.executable, "-m", "tokenpace", "serve", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:\d+/v1", line)
        assert match, line + proc.stderr.read() if proc.poll() is not None else line
        yield match.group(0)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_anthropic_bench_against_serve_with_a_prefix_breakpoint_and_prices(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-never-saved")
    with serve("--sim", "--prefix-caching", "--api-formats", "chat,anthropic") as url:
        bench = run_cli("bench", "--api", "anthropic", "--url", url, *WORKLOAD, "--cache-breakpoint", "prefix",
                        "--no-ignore-eos", "--input-usd-per-mtok", "3", "--output-usd-per-mtok", "15",
                        "--out", "a.json", cwd=tmp_path)
        assert bench.returncode == ExitCode.OK, bench.stderr
        chat = run_cli("bench", "--api", "chat", "--url", url, *WORKLOAD, "--out", "c.json", cwd=tmp_path)
        assert chat.returncode == ExitCode.OK, chat.stderr
        missing = run_cli("bench", "--api", "responses", "--url", url, *WORKLOAD, "--out", "r.json", cwd=tmp_path)
    # Served formats only: /v1/responses was left out, and preflight says so in one line.
    assert missing.returncode == ExitCode.TARGET and "HTTP 404" in missing.stderr
    assert "sk-ant-never-saved" not in (tmp_path / "a.json").read_text()
    records = [json.loads(line) for line in (tmp_path / "a.records.jsonl").read_text().splitlines()]
    records.sort(key=lambda r: r["index"])
    assert {r["api"] for r in records} == {"anthropic"}
    # The first request writes the 512-token prefix to the cache; the other five read it.
    assert [(r["cached_prompt_tokens"], r["cache_write_prompt_tokens"]) for r in records] == \
        [(0, 512)] + [(512, 0)] * 5
    summary = json.loads((tmp_path / "a.json").read_text())["summary"]
    use = summary["breakdowns"]["cache_use"]
    assert (use["writes"]["requests"], use["reads"]["requests"], use["misses"]["requests"]) == (1, 5, 0)
    cost = summary["token_cost"]
    # 1 write: 24 + 512 x 1.25 input-priced tokens; 5 reads: 24 + 512 x 0.1 each; 36 output tokens.
    assert cost["usd"] == pytest.approx(((24 + 640) + 5 * (24 + 51.2)) * 3e-6 + 36 * 15e-6)
    assert cost["usd_without_cache"] == pytest.approx(6 * 536 * 3e-6 + 36 * 15e-6)
    assert "Cache use (Anthropic): 1 writes" in bench.stdout and "Token cost ($3 in / $15 out" in bench.stdout

    # Every reader of a run takes these records unchanged.
    report = run_cli("report", "a.json", "--slo", "chat", "--html", "a.html", cwd=tmp_path)
    assert report.returncode == ExitCode.OK, report.stderr
    assert "Cache use (Anthropic)" in report.stdout and (tmp_path / "a.html").stat().st_size > 10_000
    # Priced again at other prices, with OpenAI-style multipliers: 6 x 536 prompt tokens at $1/M, the
    # 2,560 read at half price, 36 output tokens at $5/M.
    repriced = run_cli("report", "a.json", "--input-usd-per-mtok", "1", "--output-usd-per-mtok", "5",
                       "--cache-price-multipliers", "write=1,read=0.5", cwd=tmp_path)
    assert repriced.returncode == ExitCode.OK, repriced.stderr
    usd = ((6 * 536 - 2560) + 2560 * 0.5) * 1e-6 + 36 * 5e-6
    assert f"${usd:.4f} for 6 ok requests" in repriced.stdout, repriced.stdout
    half = run_cli("report", "a.json", "--input-usd-per-mtok", "1", cwd=tmp_path)
    assert half.returncode == ExitCode.USAGE and "together" in half.stderr
    export = run_cli("export", "a.json", "--csv", "a.csv", cwd=tmp_path)
    assert export.returncode == ExitCode.OK, export.stderr
    with open(tmp_path / "a.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [row["cache_write_prompt_tokens"] for row in rows if row["index"] == "0"] == ["512"]
    compare = run_cli("compare", "c.json", "a.json", cwd=tmp_path)
    assert compare.returncode == ExitCode.OK, compare.stderr
    # The chat run sent the same prompts (same seed) after the Anthropic run: the server's prefix cache
    # holds them whichever API carried them, so every one of its 536-token prompts hits 33 full blocks.
    chat_records = [json.loads(line) for line in (tmp_path / "c.records.jsonl").read_text().splitlines()]
    assert [r["cached_prompt_tokens"] for r in chat_records] == [528] * 6
    assert {r["cache_write_prompt_tokens"] for r in chat_records} == {None}


@pytest.mark.parametrize("args, needle", [
    (["--api", "chat", "--cache-breakpoint", "prefix"], "--cache-breakpoint places Anthropic cache_control"),
    (["--input-usd-per-mtok", "3"], "give --input-usd-per-mtok and --output-usd-per-mtok together"),
    (["--cache-price-multipliers", "write=2"], "--cache-price-multipliers: give both"),
    (["--api", "grpc"], "invalid choice"),
])
def test_bad_api_and_price_input_is_one_line_and_exit_2(args, needle):
    proc = run_cli("bench", *args)
    assert proc.returncode == ExitCode.USAGE, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr


def test_serve_refuses_an_unknown_api_format_in_one_line():
    proc = run_cli("serve", "--api-formats", "chat,grpc")
    assert proc.returncode == ExitCode.USAGE, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "'grpc'" in proc.stderr


def test_anthropic_key_comes_from_its_own_variable(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    proc = subprocess.run([sys.executable, "-m", "tokenpace", "bench", "--api", "anthropic", "--requests", "2",
                           "--input-tokens", "8", "--output-tokens", "2", "--quiet", "--out", "x.json"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert proc.returncode == ExitCode.OK, proc.stderr
    config = json.loads((tmp_path / "x.json").read_text())["config"]
    assert (config["api"], config["api_key_env"]) == ("anthropic", "ANTHROPIC_API_KEY")

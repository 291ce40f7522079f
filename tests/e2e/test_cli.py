"""The real command line: results on disk, one-line errors, documented exit codes, signals."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from .helpers import run_cli
from tokenpace import read_records
from tokenpace.errors import ExitCode


def _closed_port() -> int:
    with socket.socket() as s:  # bind then close: nothing listens there afterwards
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_bench_without_target_runs_builtin_server_and_saves_results(tmp_path):
    out = tmp_path / "run.json"
    proc = run_cli("bench", "--requests", "20", "--concurrency", "4", "--output-tokens", "8",
                   "--slo", "chat", "--gpu-hour-usd", "3", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "TTFT" in proc.stdout and "Goodput" in proc.stdout and "per 1M output tokens" in proc.stdout
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == 1 and doc["kind"] == "bench"
    assert doc["target"]["builtin"] is True
    assert doc["summary"]["counts"]["ok"] == 20
    assert doc["summary"]["goodput"]["slo"]["name"] == "chat"
    records = read_records(out.parent / doc["records_path"])
    assert len(records) == 20
    assert "OPENAI_API_KEY" not in json.dumps(doc["config"]).replace('"api_key_env": "OPENAI_API_KEY"', "")


def test_api_key_is_never_saved(tmp_path, monkeypatch):
    monkeypatch.setenv("TP_SECRET_KEY", "sk-very-secret-123")
    out = tmp_path / "run.json"
    proc = run_cli("bench", "--requests", "3", "--output-tokens", "4", "--api-key-env", "TP_SECRET_KEY",
                   "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    for path in tmp_path.rglob("*"):  # the columnar parts in run.columns/ too
        if path.is_file():
            assert b"sk-very-secret-123" not in path.read_bytes()
    assert "sk-very-secret-123" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("args, needle", [
    (["--concurrency", "0"], "--concurrency must be > 0"),
    (["--input-tokens", "lognormal:mean=800"], "needs sigma"),
    (["--output-tokens", "zipf:a=2"], "unknown distribution"),
    (["--slo", "ttft=fast"], "ttft"),
    (["--requests", "5", "--duration", "5"], "not both"),
    (["--warmup", "soon"], "--warmup"),
    (["--extra-body", "{not json"], "--extra-body"),
    (["--url", "ftp://x"], "--url"),
    (["--rate", "abc"], "invalid float value"),
    (["--duration", "1e308"], "--duration must be at most 2592000 seconds (30 days), not 1e+308"),
    (["--requests", "2", "--timeout", "1e300"], "--timeout must be at most"),
    (["--duration", "5", "--warmup", "1e308s"], "--warmup must be at most"),
    (["--seed", "-1"], "--seed: must be a whole number from 0 to 2**64-1, not '-1'"),
    (["--seed", str(2**64)], "--seed: must be a whole number from 0 to 2**64-1"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle):
    proc = run_cli("bench", *args)
    assert proc.returncode == ExitCode.USAGE, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("command", ["bench", "sweep"])
@pytest.mark.parametrize("with_key", [False, True])  # with a key set, this crashed (exit 1)
def test_a_url_with_a_password_is_refused_in_one_line_that_does_not_show_it(command, with_key, tmp_path,
                                                                             monkeypatch):
    if with_key:
        monkeypatch.setenv("TP_SECRET_KEY", "k")
    load = ["--requests", "2"] if command == "bench" else ["--concurrency", "1,2", "--requests-per-step", "2"]
    proc = run_cli(command, "--url", f"http://alice:hunter2@127.0.0.1:{_closed_port()}/v1", *load,
                   "--api-key-env", "TP_SECRET_KEY", "--out", str(tmp_path / "r.json"), cwd=tmp_path)
    assert proc.returncode == ExitCode.USAGE, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "user name or password in the URL is not supported" in lines[0]
    assert "hunter2" not in proc.stdout + proc.stderr and "alice" not in proc.stderr
    assert list(tmp_path.iterdir()) == []  # nothing saved


def test_serve_help_states_the_port_it_listens_on_by_default():
    proc = run_cli("serve", "--help")
    assert proc.returncode == 0
    port_help = next(line for line in proc.stdout.splitlines() if line.strip().startswith("--port PORT"))
    assert "(default 8000)" in port_help and "any free port (default)" not in port_help


@pytest.mark.parametrize("seed", ["-1", str(2**64), "x"])
def test_serve_refuses_a_seed_numpy_cannot_take(seed):
    proc = run_cli("serve", "--seed", seed, "--port", "0")
    assert proc.returncode == ExitCode.USAGE
    assert len(proc.stderr.strip().splitlines()) <= 2 and "0 to 2**64-1" in proc.stderr  # usage line + error


def test_traceback_flag_shows_the_trace():
    proc = run_cli("--traceback", "bench", "--input-tokens", "uniform:min=5")
    assert proc.returncode == ExitCode.USAGE
    assert "Traceback" in proc.stderr and "needs max" in proc.stderr


def test_unreachable_target_exits_3():
    proc = run_cli("bench", "--url", f"http://127.0.0.1:{_closed_port()}/v1", "--requests", "2")
    assert proc.returncode == ExitCode.TARGET, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "failed" in proc.stderr


def test_unknown_model_lists_what_the_server_offers(logged_server):
    url = logged_server[0].url
    proc = run_cli("bench", "--url", url, "--model", "gpt-nope", "--requests", "2")
    assert proc.returncode == ExitCode.TARGET
    assert "model 'gpt-nope' not found; the server offers: tokenpace-sim" in proc.stderr


def test_overloaded_client_marks_the_run_invalid_and_exits_5(tmp_path):
    # Far more requests per second than one client core can send: the schedule slips.
    out = tmp_path / "over.json"
    proc = run_cli("bench", "--rate", "4000", "--arrival", "constant", "--duration", "1.5",
                   "--output-tokens", "2", "--input-tokens", "8", "--grace", "2", "--out", str(out))
    assert proc.returncode == ExitCode.INVALID_RUN, proc.stderr
    assert "INVALID: load generator was the bottleneck" in proc.stdout
    lg = json.loads(out.read_text())["load_generator"]
    assert lg["valid"] is False and lg["invalid_reasons"] and lg["suggestion"]
    assert lg["schedule_lag_ms"]["p99"] > 10


@pytest.mark.parametrize("name, content, needle", [
    ("missing.json", None, "no such file"),
    ("garbage.json", "{not json", "is not valid JSON"),
    ("other.json", '{"hello": 1}', "not a tokenpace result file"),
    ("future.json", '{"schema_version": 99}', "reads up to 1: upgrade tokenpace"),
    ("torn.jsonl", '{"request_id": "a"\n', "no readable record"),
    ("cal.json", '{"schema_version": 1, "kind": "calibration"}',
     "is a calibration file, not a run: use it with `tokenpace sim --calibration"),
    ("folder", "<dir>", "folder is a directory: give a result .json or a records .jsonl"),
    ("folder.jsonl", "<dir>", "is a directory"),
])
def test_report_bad_files_are_one_line_errors(tmp_path, name, content, needle):
    path = tmp_path / name
    if content == "<dir>":
        path.mkdir()
    elif content is not None:
        path.write_text(content)
    proc = run_cli("report", str(path))
    assert proc.returncode == ExitCode.USAGE, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and needle in proc.stderr, proc.stderr


def test_report_rejudges_a_saved_run_against_another_slo(tmp_path):
    out = tmp_path / "run.json"
    assert run_cli("bench", "--requests", "10", "--output-tokens", "8", "--slo", "batch",
                   "--out", str(out)).returncode == 0
    proc = run_cli("report", str(out), "--slo", "ttft=1ms", "--gpu-hour-usd", "2")
    assert proc.returncode == 0, proc.stderr
    assert "TTFT ≤ 1 ms" in proc.stdout and "SLO MISSED" in proc.stdout
    assert "no good tokens" in proc.stdout
    assert "$2/h" in proc.stdout


def test_every_measured_request_failing_exits_4(tmp_path):
    from tokenpace.servers import BuiltinServerConfig, start_server_process

    # Request 1 is the preflight (spared); requests 2-5 are the measured ones, all answered 500.
    with start_server_process(BuiltinServerConfig(faults="http-500=at:2;3;4;5")) as server:
        out = tmp_path / "fail.json"
        proc = run_cli("bench", "--url", server.url, "--requests", "4", "--concurrency", "1",
                       "--output-tokens", "4", "--out", str(out))
    assert proc.returncode == ExitCode.RUN_FAILED, proc.stderr
    c = json.loads(out.read_text())["summary"]["counts"]
    assert c["sent"] == 4 and c["error"] == 4 and c["errors_by_kind"] == {"http_500": 4}


@pytest.mark.parametrize("args", [
    ("bench", "--requests", "3", "--output-tokens", "2", "--quiet"),
    ("--help",),
    ("workload", "inspect", "--requests", "20"),
], ids=["bench", "help", "inspect"])
def test_a_reader_that_went_away_is_not_an_error(tmp_path, args):
    proc = subprocess.Popen([sys.executable, "-m", "tokenpace", *args], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # as `| head -0`: every write finds the pipe closed
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == ExitCode.OK, stderr
    assert stderr == b""


def test_an_error_line_into_a_closed_pipe_keeps_its_exit_code():
    proc = subprocess.Popen([sys.executable, "-m", "tokenpace", "bench", "--url",
                             f"http://127.0.0.1:{_closed_port()}/v1", "--requests", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    proc.stdout.close()  # as `2>&1 | head -0`
    assert proc.wait(timeout=120) == ExitCode.TARGET


def test_piped_output_is_not_wrapped_and_the_header_says_what_was_sent(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # a pipe, as in `| tee log`
    proc = subprocess.run([sys.executable, "-m", "tokenpace", "bench", "--requests", "3",
                           "--output-tokens", "2", "--quiet", "--api-key-env", "TP_UNSET_16B",
                           "--out", str(tmp_path / "run.json")],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == ExitCode.OK, proc.stderr
    lines = proc.stdout.splitlines()
    # one header line: the load as it was (the default 16 workers, but only 3 requests: 3) and the workload
    assert lines[0].startswith("tokenpace bench · built-in simulated server")
    assert lines[0].endswith("closed loop, concurrency 3 · 512 input / 2 output tokens")
    assert any(line.startswith("sched: measured") and line.endswith("raw gap between chunks")
               for line in lines)  # the legend, unwrapped
    assert proc.stderr.splitlines() == [
        "tokenpace: warning: --api-key-env TP_UNSET_16B: that variable is not set or empty; "
        "sending requests without an API key"]


def test_help_lists_every_command_without_loading_numpy_or_aiohttp():
    script = ("import sys\nfrom tokenpace.cli.main import main\ntry:\n    main(['--help'])\n"
              "except SystemExit:\n    pass\n"
              "print('loaded:', sorted(m for m in ('numpy', 'aiohttp') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "loaded: []"
    for name in ("bench", "serve", "sim", "sweep", "calibrate"):
        assert f"    {name} " in proc.stdout


def test_help_lines_are_the_commands_own():
    from tokenpace.cli.main import COMMANDS, build_parser

    full = build_parser()
    listed = {a.dest: a.help for a in full._subparsers._group_actions[0]._choices_actions}
    assert listed == {name: help_line for name, (_, help_line) in COMMANDS.items()}


def test_the_summary_shows_retries_and_the_first_server_message_of_each_kind(tmp_path):
    from tokenpace.servers import BuiltinServerConfig, start_server_process

    # Request 1 is the preflight; the first measured request fails with 500, then 503 and 500
    # again on its two retries (server requests 2, 3, 4); the second succeeds.
    with start_server_process(BuiltinServerConfig(faults="http-500=at:2;4,http-503=at:3")) as server:
        proc = run_cli("bench", "--url", server.url, "--requests", "2", "--concurrency", "1",
                       "--retries", "2", "--retry-backoff", "0.05", "--output-tokens", "2",
                       "--quiet", "--out", str(tmp_path / "run.json"))
    assert proc.returncode == ExitCode.OK, proc.stderr
    text = " ".join(proc.stdout.split())  # the lines as read, whatever the width
    assert "sent 2 = ok 1 + error 1 + timeout 0 + cancelled 0 (http_500 ×1)" in text
    assert "Retries: 2 failed attempts were sent again (http_500 ×1, http_503 ×1)" in text
    assert text.index("first http_500: ") < text.index("first http_503: ")
    doc = json.loads((tmp_path / "run.json").read_text())
    assert set(doc["summary"]["counts"]["first_error_by_kind"]) == {"http_500", "http_503"}

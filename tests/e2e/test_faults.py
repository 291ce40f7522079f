"""bench against the fault-injecting built-in server, one real server process per fault kind:
classification, the accounting identity, records on disk, and bounded time."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from .helpers import run_cli
from tokenpace import BenchConfig, read_records, run_bench
from tokenpace.errors import ExitCode
from tokenpace.servers import BuiltinServerConfig, read_send_log, start_server_process

REQUESTS = 12
OUTPUT_TOKENS = 8  # mid-stream faults act after half: 4 tokens
LIMITS = dict(connect_timeout_s=2.0, ttft_timeout_s=0.8, idle_timeout_s=0.5, timeout_s=10.0)
STALL_S = 3.0  # the stall faults (":3s") hold the stream this long: a request ended by its limit ends sooner

# Every even-numbered request is faulted: 6 of the 12 measured ones, whether or not the run's
# preflight request (sent first, alone) takes number 1.
# kind, PARAM, status, error_kind, tokens kept, the limit that ends it (timeouts)
CASES = [
    ("http-429", ":1", "error", "http_429", 0, None),
    ("http-500", "", "error", "http_500", 0, None),
    ("http-503", ":0.5", "error", "http_503", 0, None),
    ("reset-before-headers", "", "error", "reset_before_headers", 0, None),
    ("reset-mid", "", "error", "reset_mid_stream", 4, None),
    ("stall-first", ":3s", "timeout", "ttft_timeout", 0, "ttft_timeout_s"),
    ("stall-mid", ":3s", "timeout", "idle_timeout", 4, "idle_timeout_s"),
    ("malformed-sse", "", "error", "malformed_sse", 4, None),
    ("invalid-json", "", "error", "invalid_json", 4, None),
    ("no-done", "", "ok", None, OUTPUT_TOKENS, None),
    ("no-usage", "", "ok", None, OUTPUT_TOKENS, None),
    ("empty-choices", "", "error", "empty_response", 0, None),
    ("slow-headers", ":3s", "timeout", "ttft_timeout", 0, "ttft_timeout_s"),
    ("wrong-content-type", "", "error", "wrong_content_type", 0, None),
    ("endless", ":0.2", "timeout", "ttft_timeout", 0, "ttft_timeout_s"),
]


@pytest.fixture(scope="module")
def fault_servers(tmp_path_factory):
    """One server process per fault kind, started side by side (a start is mostly imports)."""
    logs = {fault: tmp_path_factory.mktemp(fault) / "sends.jsonl" for fault, *_ in CASES}

    def start(case):
        fault, param = case[:2]
        config = BuiltinServerConfig(faults=f"{fault}=every:2{param}", send_log_path=str(logs[fault]))
        return fault, start_server_process(config, startup_timeout_s=90)  # 15 at once on a busy machine

    with ThreadPoolExecutor(len(CASES)) as pool:
        futures = [pool.submit(start, case) for case in CASES]
    servers = {}
    try:
        for future in futures:
            fault, server = future.result()
            servers[fault] = (server, logs[fault])
        yield servers
    finally:
        for future in futures:
            if future.exception() is None:
                future.result()[1].stop()


@pytest.mark.slow
@pytest.mark.parametrize("fault, param, status, kind, tokens, limit", CASES, ids=[c[0] for c in CASES])
def test_bench_classifies_and_accounts_for_each_fault(fault_servers, tmp_path, fault, param, status, kind, tokens,
                                                      limit):  # fmt: skip
    server, log = fault_servers[fault]
    try:
        started = time.monotonic()
        result = run_bench(BenchConfig(url=server.url, requests=REQUESTS, concurrency=4, input_tokens="32",
                                       output_tokens=str(OUTPUT_TOKENS), grace_s=1.0, progress=False,
                                       out=str(tmp_path / "run.json"), **LIMITS))  # fmt: skip
        wall_s = time.monotonic() - started
    finally:
        server.stop()  # flushes the send log

    counts = result.summary["counts"]
    assert counts["sent"] == REQUESTS
    assert counts["sent"] == counts["ok"] + counts["error"] + counts["timeout"] + counts["cancelled"]
    assert len(read_records(result.records_path)) == counts["sent"]
    faulted = [r for r in result.records if (r.status, r.error_kind) == (status, kind)]
    if status == "ok":
        assert counts["ok"] == REQUESTS and len(faulted) == REQUESTS
    else:
        assert counts["ok"] == REQUESTS - 6 and counts[status] == 6
        assert counts["errors_by_kind"] == {kind: 6}
    for r in faulted:
        assert len(r.chunk_ns) == tokens  # what arrived before the failure is kept
        assert r.done_ns >= (r.last_token_ns or r.sent_ns)
        if limit is not None:  # ended by its limit, counted from sent (TTFT) or the last bytes (idle)
            since = r.last_token_ns if limit == "idle_timeout_s" else r.sent_ns
            # ... not by what would have ended it otherwise: the stall's end, or the total timeout
            # (an endless stream). Upper bounds of the limit + 0.5 s were timing on a busy machine.
            otherwise_s = STALL_S if param == f":{STALL_S:g}s" else LIMITS["timeout_s"]
            assert LIMITS[limit] <= (r.done_ns - since) / 1e9 < otherwise_s
    # Bounded: 12 requests on 4 workers, 3 each at most; had any waited for its total timeout (or
    # the run for its --timeout grace at the end), this would pass 3 x 10 s.
    assert wall_s < 3 * LIMITS["timeout_s"], wall_s
    assert sum(line["kind"] == "fault" for line in read_send_log(log)) == 6


def test_timeout_flags_reach_the_config():
    from tokenpace.cli.bench_cmd import config_from_args
    from tokenpace.cli.main import build_parser

    args = build_parser().parse_args(["bench", "--connect-timeout", "2", "--ttft-timeout", "0.5",
                                      "--idle-timeout", "1.5"])  # fmt: skip
    config = config_from_args(args)
    assert (config.connect_timeout_s, config.ttft_timeout_s, config.idle_timeout_s) == (2.0, 0.5, 1.5)


@pytest.mark.parametrize("argv, needle", [
    (["bench", "--idle-timeout", "0"], "--idle-timeout must be > 0"),
    (["bench", "--ttft-timeout", "nan"], "--ttft-timeout must be a finite number"),
    (["serve", "--faults", "reset-mid=every:0"], "--faults: every: needs request numbers >= 1"),
])  # fmt: skip
def test_bad_timeouts_and_fault_specs_are_one_line_and_exit_2(argv, needle):
    proc = run_cli(*argv, timeout_s=60)
    assert proc.returncode == ExitCode.USAGE, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr

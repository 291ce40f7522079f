"""The server as its own process (what the benchmark runner uses): starts, serves, stops cleanly."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import aiohttp
import pytest
from servers_helpers import FAST, chat_body, post_stream, run

from tokenpace.errors import TargetError
from tokenpace.servers import BuiltinServerConfig, read_send_log, start_server_process
from tokenpace.servers.process import _SRC_DIR


def test_process_serves_and_stops_cleanly(send_log_path):
    config = BuiltinServerConfig(**FAST, send_log_path=str(send_log_path), send_log_flush_s=60)
    with start_server_process(config, cpus=[0]) as server:
        assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/v1")
        assert os.sched_getaffinity(server.pid) == {0}

        async def go():
            async with aiohttp.ClientSession() as s:
                headers = {"X-Request-ID": "p1"}
                return await post_stream(s, server.url + "/chat/completions", chat_body(4), headers=headers)

        headers, events = run(go())
        assert headers["X-Request-ID"] == "p1" and events[-1] == "[DONE]"
        assert server.stop() == 0  # SIGTERM: a clean exit (stop() kills after 5 s: code -9)
    assert server.process.poll() == 0
    kinds = [e["kind"] for e in read_send_log(send_log_path)]  # flushed at shutdown, not by the timer
    assert kinds == ["received", "role", "token", "token", "token", "token", "done"]


def test_process_that_cannot_listen_raises_target_error():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # The exit is noticed, not waited out: a start-up timeout would say "did not come up".
        with pytest.raises(TargetError, match="exited with code 2"):
            start_server_process(BuiltinServerConfig(port=port))


def test_module_cli_help_and_bad_flag_exit_codes():
    env = {**os.environ, "PYTHONPATH": _SRC_DIR}
    help_run = subprocess.run([sys.executable, "-m", "tokenpace.servers", "--help"], env=env, capture_output=True,
                              text=True, timeout=30)  # fmt: skip
    assert help_run.returncode == 0
    for flag in ("--port PORT", "--decode-base-ms MS", "--tokens-per-chunk K", "--send-log PATH"):
        assert flag in help_run.stdout
    bad = subprocess.run([sys.executable, "-m", "tokenpace.servers", "--tokens-per-chunk", "0"], env=env,
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    assert bad.returncode == 2 and "tokens_per_chunk" in bad.stderr


def test_server_exits_when_its_parent_dies():
    script = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from tokenpace.servers import start_server_process\n"
        "server = start_server_process()\n"
        "print(server.pid, flush=True)\n"
        "import time; time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script, _SRC_DIR], stdout=subprocess.PIPE, text=True)
    try:
        child_pid = int(parent.stdout.readline())
    finally:
        parent.kill()  # no chance to stop its server
        parent.wait()
        parent.stdout.close()
    deadline = time.monotonic() + 5
    while _alive(child_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child_pid)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False

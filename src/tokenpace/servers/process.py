"""The built-in server in a separate process, so its CPU work never delays the client's timestamps.

``start_server_process`` runs ``python -m tokenpace.servers --port 0 ...``, reads the URL the child
prints as its first stdout line, checks ``/health``, and returns a handle whose ``stop()`` ends the
child (SIGTERM, which flushes its send log; SIGKILL if it does not exit in time). The child runs in
its own session, so a Ctrl-C meant for the benchmark does not kill the server before the benchmark
has recorded its partial results, and it exits by itself if its parent disappears.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from ..errors import TargetError
from .args import config_to_argv
from .config import BuiltinServerConfig

_SRC_DIR = str(Path(__file__).resolve().parents[2])  # makes the child import this same tokenpace


class ServerProcess:
    """A running built-in server process. Use as a context manager, or call ``stop()``."""

    def __init__(self, process: subprocess.Popen, url: str) -> None:
        self.process = process
        self.url = url  # base URL, http://127.0.0.1:PORT/v1

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, timeout_s: float = 5.0) -> int:
        """Stop the server and return its exit code (0 after a clean shutdown)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout:
            self.process.stdout.close()
        return self.process.returncode

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def start_server_process(
    config: BuiltinServerConfig | None = None,
    *,
    startup_timeout_s: float = 30.0,
    cpus: Iterable[int] | None = None,
    use_uvloop: bool = True,
    python: str | None = None,
) -> ServerProcess:
    """Start a server process and return once ``/health`` answers.

    ``config.port`` 0 (the default) lets the child pick a free port. ``cpus`` pins the child.
    Raises TargetError when the server does not come up within ``startup_timeout_s``.
    """
    config = config or BuiltinServerConfig()
    if config.send_log_path:  # the child's working directory may differ from ours
        config = replace(config, send_log_path=str(Path(config.send_log_path).resolve()))
    argv = [python or sys.executable, "-m", "tokenpace.servers", *config_to_argv(config), "--quiet"]
    argv += ["--parent-pid", str(os.getpid())]
    if cpus is not None:
        argv += ["--cpu", ",".join(map(str, cpus))]
    if not use_uvloop:
        argv.append("--no-uvloop")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_SRC_DIR, env.get("PYTHONPATH")) if p)
    process = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env, start_new_session=True
    )
    handle = ServerProcess(process, url="")
    deadline = time.monotonic() + startup_timeout_s
    try:
        handle.url = _read_url(process, deadline)
        _wait_healthy(handle.url, deadline)
    except BaseException:
        handle.stop(timeout_s=1.0)
        raise
    return handle


def _read_url(process: subprocess.Popen, deadline: float) -> str:
    line = b""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TargetError("built-in server did not print its URL in time")
            if not selector.select(remaining):
                continue
            data = os.read(process.stdout.fileno(), 4096)
            if not data:
                code = process.wait()
                raise TargetError(f"built-in server exited with code {code} before it started")
            line += data
    url = line.split(b"\n", 1)[0].decode().strip()
    if not url.startswith("http://"):
        raise TargetError(f"built-in server printed {url!r}, not its URL")
    return url


def _wait_healthy(url: str, deadline: float) -> None:
    health_url = url.removesuffix("/v1") + "/health"
    while True:
        try:
            with urllib.request.urlopen(health_url, timeout=1.0) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TargetError(f"built-in server at {url} did not answer {health_url} in time")
        time.sleep(0.05)

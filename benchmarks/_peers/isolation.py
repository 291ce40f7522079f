"""Keeping runs apart: CPU pinning, a stand-in for the model hub, stopping a tool's processes."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator


def cpus() -> set[int]:
    try:
        return os.sched_getaffinity(0)
    except AttributeError:
        return set()


@contextlib.contextmanager
def affinity(cpu: int | None) -> Iterator[None]:
    """Run the block with this process pinned to ``cpu``: children started inside inherit it."""
    before = cpus()
    if cpu is None or cpu not in before:
        yield
        return
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


class HubCanary:
    """A loopback TCP listener standing in for the hub (HF_ENDPOINT): counts who connects."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.connections: list[float] = []
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections.append(time.time())
            conn.close()  # no answer: a tool that insists fails fast, and locally


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM the process group we created for ``proc``, SIGKILL it 10 s later if needed."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue

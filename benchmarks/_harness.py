"""Shared plumbing of the client benchmarks: pinning, the truth server, the send-log join, tables.

Not a benchmark itself. Every benchmark that checks the client runs the built-in server in its own
process, pinned to one CPU and (when allowed) at real-time priority, so that what we measure is the
client's error and not the server's (REFERENCE section 1 measured peers the same way). The client
process is pinned to the other CPU.
"""

from __future__ import annotations

import asyncio

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# TOKENPACE_BENCH_SRC: another tree's src/ to measure (client_accuracy.py --against runs its child there).
sys.path.insert(0, os.environ.get("TOKENPACE_BENCH_SRC") or str(Path(__file__).resolve().parents[1] / "src"))

from tokenpace.servers import BuiltinServerConfig, read_send_log, start_server_process  # noqa: E402

CLIENT_CPU = 0
SERVER_CPU = 1
RT_PRIORITY = 10  # SCHED_FIFO priority of the server process (any value > 0 beats normal tasks)


def pin_client() -> str:
    """Pin this process to CLIENT_CPU when the machine has it; say what was done."""
    try:
        os.sched_setaffinity(0, {CLIENT_CPU})
        return f"client pinned to CPU {CLIENT_CPU}"
    except (AttributeError, OSError) as exc:
        return f"client not pinned ({exc})"


@dataclass
class TruthServer:
    """A running built-in server with a send log; ``rt`` says whether real-time priority took."""

    url: str
    pid: int
    send_log: Path | None
    rt: bool
    cpu0_s: float = 0.0
    wall0_s: float = 0.0

    def cpu_s(self) -> float:
        return process_cpu_s(self.pid)

    def mark(self) -> None:
        self.cpu0_s, self.wall0_s = self.cpu_s(), time.monotonic()

    def cores_since_mark(self) -> float:
        return (self.cpu_s() - self.cpu0_s) / max(time.monotonic() - self.wall0_s, 1e-9)


@contextlib.contextmanager
def truth_server(send_log: Path | None, *, max_num_seqs: int, prefill_s: float, step_s: float,
                 jitter: float = 0.05, realtime: bool = True) -> Iterator[TruthServer]:
    """Start the built-in server on SERVER_CPU; stop it on exit, which flushes ``send_log``."""
    config = BuiltinServerConfig(
        prefill_base_s=prefill_s, prefill_per_token_s=0.0, decode_base_s=step_s,
        decode_per_running_s=0.0, jitter_frac=jitter, max_num_seqs=max_num_seqs,
        send_log_path=str(send_log) if send_log else None)
    cpus = {SERVER_CPU} if (os.cpu_count() or 1) > SERVER_CPU else None
    server = start_server_process(config, cpus=cpus)
    try:
        rt = _make_realtime(server.pid) if realtime else False
        handle = TruthServer(server.url, server.pid, send_log, rt)
        handle.mark()
        yield handle
    finally:
        server.stop()  # SIGTERM flushes the send log


def _make_realtime(pid: int) -> bool:
    try:
        os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(RT_PRIORITY))
        return True
    except (AttributeError, PermissionError, OSError):
        return False


def process_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


@dataclass
class Truth:
    """What the server logged for one request."""

    received_ns: int
    token_ns: list[int] = field(default_factory=list)  # token chunks, in write order
    token_counts: list[int] = field(default_factory=list)
    done_ns: int | None = None  # the "[DONE]" write


def read_truth(path: Path) -> dict[str, Truth]:
    truth: dict[str, Truth] = {}
    events = read_send_log(path)
    # The log is in write order per flush batch; sort by chunk within a request to be safe.
    for e in events:
        if e["kind"] == "received":
            truth[e["request_id"]] = Truth(e["t_ns"])
    for e in sorted((e for e in events if e["kind"] != "received"), key=lambda e: (e["request_id"], e["chunk"])):
        t = truth.get(e["request_id"])
        if t is None:
            continue
        if e["kind"] == "token":
            t.token_ns.append(e["t_ns"])
            t.token_counts.append(e["tokens"])
        elif e["kind"] == "done":
            t.done_ns = e["t_ns"]
    return truth


def mean_in_flight(spans: Sequence[tuple[int, int]], lo: int, hi: int) -> float | None:
    """Time-averaged count of spans (start, end) open over [lo, hi]."""
    if hi <= lo:
        return None
    return sum(max(0, min(e, hi) - max(s, lo)) for s, e in spans) / (hi - lo)


def pcts(values_ms: Sequence[float] | np.ndarray) -> dict[str, float]:
    a = np.asarray(values_ms, dtype=float)
    if a.size == 0:
        return {"p50": float("nan"), "p99": float("nan"), "max": float("nan"), "n": 0}
    p50, p99 = np.percentile(a, [50, 99])
    return {"p50": float(p50), "p99": float(p99), "max": float(a.max()), "n": int(a.size)}


def median(values: Sequence[float | None]) -> float:
    vals = [v for v in values if v is not None and not np.isnan(v)]
    return float(np.median(vals)) if vals else float("nan")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured Markdown table (readable in a terminal too)."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = lambda vals: "| " + " | ".join(v.rjust(w) for v, w in zip(vals, widths)) + " |"  # noqa: E731
    out = [line(headers), "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|"]
    out += [line(r) for r in cells]
    return "\n".join(out)


def _cell(v: object) -> str:
    if isinstance(v, float):
        if np.isnan(v):
            return "–"
        return f"{v:.2f}" if abs(v) < 100 else f"{v:,.0f}"
    return str(v)


def machine_line() -> str:
    load = os.getloadavg()
    return (f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
            f"load average before start {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}")


def loopback_floor(samples: int = 300, gap_s: float = 0.01) -> dict[str, float]:
    """The machine's own floor: one plain blocking socket, no event loop, no HTTP.

    A child on SERVER_CPU (real-time when allowed) writes its ``monotonic_ns()`` every ``gap_s``
    over loopback TCP; this process, on CLIENT_CPU, stamps each read. No client can beat this on
    this machine: it is the wake-up latency of an idle CPU plus loopback delivery (and, on a shared
    VM, other tenants).
    """
    import socket
    import struct

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    pid = os.fork()
    if pid == 0:  # child: the writer
        try:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, {SERVER_CPU})
            _make_realtime(0)
            conn, _ = listener.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for _ in range(samples):
                time.sleep(gap_s)
                conn.sendall(struct.pack("q", time.monotonic_ns()))
            conn.close()
        finally:
            os._exit(0)
    listener.close()
    errors, buf = [], b""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(samples * gap_s + 10)
        while data := sock.recv(4096):
            now = time.monotonic_ns()
            buf += data
            while len(buf) >= 8:
                errors.append((now - struct.unpack("q", buf[:8])[0]) / 1e6)
                buf = buf[8:]
    os.waitpid(pid, 0)
    return pcts(errors)


def run_loop(coro, loop: str):
    """Run a coroutine on uvloop or asyncio's own loop, by name."""
    if loop == "uvloop":
        import uvloop

        return uvloop.run(coro)
    return asyncio.run(coro)


def run_child(child_json: str, run) -> None:
    """One run in a child process of a benchmark that alternates trees or modes: ``run``'s keyword
    arguments as JSON (``client_rt``: at real-time priority), its figures printed as JSON."""
    kw = json.loads(child_json)
    if kw.pop("client_rt"):
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(RT_PRIORITY - 1))
    print(json.dumps(run(**kw)))

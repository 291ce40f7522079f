"""The SSE parser's cost for one line that never ends: it must grow with the line, not its square.

Feeds a ``data:`` line of N MiB in 64 KiB reads (what a socket gives) with the line limit lifted,
so the whole line is buffered, then ends it; prints the CPU time per size. Linear means the
time per MiB stays flat as the line grows (before the fix, 32 MiB cost 6.6 s).

    .venv/bin/python benchmarks/sse_long_line.py                  # 8, 32 and 128 MiB
    .venv/bin/python benchmarks/sse_long_line.py --mib 4 16 64
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tokenpace.client.sse import SSEParser  # noqa: E402

READ_BYTES = 64 * 1024


def parse_line_cpu_s(mib: int) -> float:
    piece = b"x" * READ_BYTES
    parser = SSEParser(strict=True, max_line_bytes=(mib + 1) << 20)
    start = time.process_time()
    parser.feed(b"data: ")
    for _ in range((mib << 20) // READ_BYTES):
        parser.feed(piece)
    events = parser.feed(b"\n\n")
    elapsed = time.process_time() - start
    assert len(events) == 1 and len(events[0].data) == mib << 20
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, nargs="+", default=[8, 32, 128], help="line sizes in MiB")
    args = parser.parse_args()
    print(f"reproduce: python benchmarks/sse_long_line.py --mib {' '.join(map(str, args.mib))}")
    print(f"load average at start: {os.getloadavg()[0]:.2f}; reads of {READ_BYTES // 1024} KiB")
    print(f"{'line MiB':>9} {'CPU s':>8} {'CPU ms per MiB':>15}")
    for mib in args.mib:
        seconds = parse_line_cpu_s(mib)
        print(f"{mib:>9} {seconds:>8.3f} {seconds * 1000 / mib:>15.2f}")


if __name__ == "__main__":
    main()

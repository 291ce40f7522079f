"""Install the peer load generators (guidellm, aiperf, inference-perf), each in its own virtual
environment, and print the ``--peer-bin`` flags that point the benchmarks at them.

They are never project dependencies: their trees (transformers, datasets, zmq, ...) conflict with
ours and with each other. A venv is reused once its ``.complete`` marker exists.

    python3 benchmarks/peers/install.py                       # all three under /tmp/tokenpace-peers
    python3 benchmarks/peers/install.py --tools aiperf --dir ~/.cache/tokenpace
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DEFAULT_DIR = "/tmp/tokenpace-peers"
COMMANDS = {"guidellm": "guidellm", "aiperf": "aiperf", "inference-perf": "inference-perf"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tools", default=",".join(COMMANDS), help="comma-separated (default: all three)")
    ap.add_argument("--dir", default=DEFAULT_DIR, help=f"where the venvs go (default {DEFAULT_DIR})")
    args = ap.parse_args()
    os.environ["TOKENPACE_CACHE"] = args.dir  # read by _peers.install.cache_root
    from _peers.install import ensure_peer

    flags, failed = [], 0
    for tool in [t.strip() for t in args.tools.split(",") if t.strip()]:
        if tool not in COMMANDS:
            print(f"unknown tool {tool!r} (known: {', '.join(COMMANDS)})", file=sys.stderr)
            return 2
        try:
            venv = ensure_peer(tool)
        except Exception as exc:  # noqa: BLE001 - one line per tool; the others still install
            print(f"{tool}: install failed: {exc}", file=sys.stderr)
            failed += 1
            continue
        flags.append(f"--peer-bin {tool}={venv / 'bin' / COMMANDS[tool]}")
    print(" ".join(flags))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

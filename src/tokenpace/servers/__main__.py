"""``python -m tokenpace.servers``: the built-in server as its own process.

Prints the base URL (``http://HOST:PORT/v1``) as the first line of stdout once it accepts requests,
then serves until SIGINT or SIGTERM. Exit codes: 0 after a clean stop, 2 for an invalid flag or an
address it cannot listen on.

Examples:
  python -m tokenpace.servers --port 8000
  python -m tokenpace.servers --decode-base-ms 20 --tokens-per-chunk 4 --send-log sends.jsonl
"""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import ExitCode
from .args import add_server_arguments, config_from_args
from .serve import serve_forever


def _cpus(value: str) -> set[int]:
    return {int(cpu) for cpu in value.split(",")}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tokenpace.servers",
        description="OpenAI-compatible LLM server that simulates timing (no GPU, no model).",
        epilog="examples:\n  python -m tokenpace.servers --port 8000\n"
        "  python -m tokenpace.servers --decode-base-ms 20 --tokens-per-chunk 4 --send-log sends.jsonl",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_server_arguments(parser)
    proc = parser.add_argument_group("process")
    proc.add_argument("--cpu", type=_cpus, metavar="CPU[,CPU]", help="pin the server to these CPUs")
    proc.add_argument("--no-uvloop", action="store_true", help="use asyncio's own event loop")
    proc.add_argument("--parent-pid", type=int, metavar="PID", help="stop when this process is no longer our parent")
    proc.add_argument("--quiet", action="store_true", help="print only the URL")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    try:
        config = config_from_args(ns)
    except ValueError as e:
        parser.error(str(e))
    if ns.cpu:
        os.sched_setaffinity(0, ns.cpu)

    def announce(url: str) -> None:
        print(url, flush=True)
        if not ns.quiet:
            print(f"tokenpace built-in server: model {config.model!r}, {config.timing} timing; Ctrl-C stops it",
                  file=sys.stderr)  # fmt: skip

    try:
        return serve_forever(config, use_uvloop=not ns.no_uvloop, announce=announce, parent_pid=ns.parent_pid)
    except OSError as e:  # typically: the port is taken
        print(f"error: cannot listen on {config.host}:{config.port}: {e.strerror or e}", file=sys.stderr)
        return ExitCode.USAGE


if __name__ == "__main__":
    raise SystemExit(main())

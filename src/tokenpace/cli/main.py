"""`tokenpace` command line: parse, call the library, render. Errors are one line (exit codes in
the README); `--traceback` shows the trace."""

from __future__ import annotations

import argparse
import errno
import signal
import sys
import traceback
from typing import Any

from tokenpace._version import __version__
from tokenpace.cli import bench_cmd, report_cmd, serve_cmd, sim_cmd, workload_cmd
from tokenpace.cli import compare_cmd, export_cmd, sweep_cmd
from tokenpace.cli import calibrate_cmd, lint_cmd, plan_cmd, proxy_cmd
from tokenpace.cli.streams import guard_stdout
from tokenpace.errors import ExitCode, RunInterrupted, TokenpaceError

EPILOG = """\
examples:
  tokenpace bench                                  # benchmark the built-in simulated server
  tokenpace bench --url http://127.0.0.1:8000/v1 --concurrency 16 --requests 500 --slo chat
  tokenpace sweep --sim --rate auto --slo chat     # the knee and max goodput, simulated
  tokenpace serve --port 8000                      # the built-in OpenAI-compatible server
  tokenpace report run.json --html run.html        # a self-contained HTML report
  tokenpace proxy --upstream http://127.0.0.1:8000/v1 --records live.jsonl   # measure live traffic
  tokenpace compare base.json new.json --fail-if "ttft.p99 > +10%"

exit codes: 0 ok · 1 internal error · 2 bad usage or input · 3 target unreachable or refused ·
            4 every measured request failed · 5 run invalid (load generator bottleneck) ·
            6 a compare --fail-if gate failed · 7 a file could not be written (disk full) ·
            8 lint --fail-on found a problem · 9 --ray could not join or trust the cluster ·
            130 interrupted
"""


# A file that cannot be written for want of room or permission to grow: the user's to fix (exit 7).
_CANNOT_WRITE = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own errors: one line, exit 2
        self.exit(ExitCode.USAGE, f"tokenpace: error: {message} (see --help)\n")


# Each command, and its line in `tokenpace --help` (a test checks it is the line the command's own
# parser has). Only the command being run builds its options: some need numpy or aiohttp (the
# simulator's engine flags, the server's), and `tokenpace --help` should not wait for them.
COMMANDS: dict[str, tuple[Any, str]] = {
    "bench": (bench_cmd, "load-test an OpenAI-compatible streaming endpoint"),
    "serve": (serve_cmd, "run the built-in OpenAI-compatible server (simulated timing)"),
    "report": (report_cmd, "summarize a saved run or sweep (result JSON or records JSONL)"),
    "compare": (compare_cmd, "compare runs against a base run; gate regressions in CI"),
    "export": (export_cmd, "export a run's per-request records as CSV or Parquet"),
    "sim": (sim_cmd, "simulate an LLM serving engine under the same load, in virtual time"),
    "sweep": (sweep_cmd, "raise the load step by step: the knee, max goodput under an SLO, cost"),
    "workload": (workload_cmd, "look at a workload before sending it"),
    "calibrate": (calibrate_cmd, "fit the simulator's efficiencies and overheads to a measured run"),
    "plan": (plan_cmd, "the cheapest deployment that meets the SLO at your traffic"),
    "proxy": (proxy_cmd, "measuring reverse proxy: record live traffic to an OpenAI-compatible API"),
    "lint": (lint_cmd, "find what keeps a request log's prompts from hitting the prompt cache"),
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or (``only``) every command listed but only that one built."""
    parser = _Parser(prog="tokenpace", description="Latency and cost that users feel from LLM serving.",
                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"tokenpace {__version__}")
    parser.add_argument("--traceback", action="store_true", help="show the full traceback on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (module, help_line) in COMMANDS.items():
        if only is None or name == only:
            module.register(sub)
        else:
            sub.add_parser(name, help=help_line)
    return parser


def main(argv: list[str] | None = None) -> int:
    guard_stdout()
    argv = sys.argv[1:] if argv is None else argv
    named = next((a for a in argv if not a.startswith("-")), "")  # global flags take no value
    parser = build_parser(only=named if named in COMMANDS else "")
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return ExitCode.USAGE
    _sigterm_as_interrupt()
    try:
        return int(args.func(args) or 0)
    except RunInterrupted as exc:
        print(f"tokenpace: {exc}", file=sys.stderr)
        return exc.exit_code
    except TokenpaceError as exc:
        if args.traceback:
            traceback.print_exc()
        print(f"tokenpace: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tokenpace: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except OSError as exc:
        if exc.errno not in _CANNOT_WRITE:
            return _internal_error(exc, args.traceback)
        where = f" {exc.filename}" if exc.filename else ""
        print(f"tokenpace: error: cannot write{where}: {exc.strerror}", file=sys.stderr)
        return ExitCode.NOT_SAVED
    except Exception as exc:  # a bug: say so in one line, trace on request
        return _internal_error(exc, args.traceback)


def _internal_error(exc: Exception, show_traceback: bool) -> int:
    if show_traceback:
        traceback.print_exc()
    print(f"tokenpace: internal error: {type(exc).__name__}: {exc} (rerun with --traceback)",
          file=sys.stderr)
    return ExitCode.INTERNAL


def _sigterm_as_interrupt() -> None:
    """SIGTERM ends any command as Ctrl-C does: one line, exit 130 (not a silent 143). Commands
    that handle signals themselves (a run, a sweep, the server) replace this while they do."""
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread (main() called from a thread)
        pass

"""`tokenpace proxy`: a measuring reverse proxy in front of an OpenAI-compatible endpoint."""

from __future__ import annotations

import argparse

from tokenpace.errors import UsageError

EPILOG = """\
examples:
  tokenpace proxy --upstream http://127.0.0.1:8000/v1 --listen 127.0.0.1:9000 --slo chat --records live.jsonl
  tokenpace proxy --upstream http://127.0.0.1:8000/v1 --watch     # live console view
  curl -s http://127.0.0.1:9000/metrics                           # Prometheus text
  tokenpace report live.jsonl --html live.html                    # the same reports as a load test
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("proxy", help="measuring reverse proxy: record live traffic to an OpenAI-compatible API",
                       description="Relay OpenAI-compatible traffic unchanged, stream chunks as they arrive, "
                                   "and record each request (JSONL, /metrics, --watch).",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--upstream", required=True, metavar="URL", help="upstream base URL with its API prefix, "
                   "e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--listen", default="127.0.0.1:9000", metavar="HOST:PORT",
                   help="where to listen (default 127.0.0.1:9000; loopback unless you say otherwise)")
    p.add_argument("--slo", metavar="PRESET|EXPR", help="judge goodput in /metrics and --watch against this SLO")
    p.add_argument("--records", metavar="PATH", help="append one JSON record per request here (rotating)")
    p.add_argument("--records-max-mib", type=float, default=64, metavar="MIB",
                   help="rotate the records file at this size (default 64)")
    p.add_argument("--records-backups", type=int, default=4, metavar="N",
                   help="rotated files kept: PATH.1.jsonl ... (default 4)")
    p.add_argument("--window", type=float, default=60.0, metavar="SECONDS",
                   help="sliding window of goodput and the live view (default 60)")
    p.add_argument("--watch", action="store_true", help="show a live console view")
    p.set_defaults(func=run)


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"--listen {text!r}: expected HOST:PORT, e.g. 127.0.0.1:9000")
    return host.strip("[]") or "127.0.0.1", int(port)


def config_from_args(args: argparse.Namespace):  # noqa: ANN201 - ProxyConfig, imported late
    from tokenpace.metrics.slo import parse_slo
    from tokenpace.proxy import ProxyConfig

    if not args.upstream.startswith(("http://", "https://")):
        raise UsageError(f"--upstream {args.upstream!r}: expected an http:// or https:// URL")
    if args.slo:
        parse_slo(args.slo)  # a bad SLO is a usage error now, not at the first request
    if args.records_max_mib <= 0 or args.records_backups < 0 or args.window <= 0:
        raise UsageError("--records-max-mib and --window must be > 0, --records-backups >= 0")
    host, port = parse_listen(args.listen)
    return ProxyConfig(upstream=args.upstream, host=host, port=port, slo=args.slo, records_path=args.records,
                       records_max_bytes=int(args.records_max_mib * 1024 * 1024),
                       records_backups=args.records_backups, window_s=args.window)


def run(args: argparse.Namespace) -> int:
    from tokenpace.proxy import run_proxy

    config = config_from_args(args)
    watch = None
    if args.watch:
        from tokenpace.proxy.watch import watch

    def announce(line: str) -> None:
        print(line, flush=True)

    try:
        return run_proxy(config, announce=announce, watch=watch)
    except OSError as exc:
        raise UsageError(f"cannot listen on {config.host}:{config.port}: {exc.strerror or exc}") from None

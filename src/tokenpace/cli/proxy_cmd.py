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
  TOKENPACE_HASH_SALT=s3cret tokenpace proxy --upstream http://127.0.0.1:8000/v1 --records live.jsonl \
      --prompt-hashes                                             # + each prompt's salted hash chain
  tokenpace workload reuse live.jsonl                             # prefix reuse from those chains

--prompt-hashes needs a salt (--hash-salt-file FILE, else the TOKENPACE_HASH_SALT environment
variable); without one it exits 2. Records then hold hashes of the prompt's blocks, never its text.
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
    p.add_argument("--starts-per-turn", type=int, default=4, metavar="N",
                   help="in a burst of new requests, start N upstream per turn of the event loop, so that the "
                        "streams already flowing are relayed in between (default 4; 0: start all at once)")
    p.add_argument("--accepts-per-turn", type=int, default=8, metavar="N",
                   help="in a burst of new connections, accept N per turn of the event loop, so that the streams "
                        "already flowing are relayed in between (default 8; 0: the event loop's own accept, every "
                        "waiting connection at once)")
    p.add_argument("--gc", choices=("quiet", "auto"), default="auto",
                   help="garbage collection while serving: auto (default): Python's collector, whose collections "
                        "pause every stream for 1-5 ms every few seconds under load; quiet: no automatic "
                        "collection, a full one when no request is in flight (and by --gc-full-every)")
    p.add_argument("--gc-full-every", type=float, default=300.0, metavar="SECONDS",
                   help="with --gc quiet: once a young collection has run (more than 200,000 objects piled up), a "
                        "full one at the latest this long after the last, even if requests never stop (default 300)")
    p.add_argument("--relay", choices=("tap", "loop"), default="tap",
                   help="how a stream is relayed: tap (default): each read written to the client from the upstream "
                        "connection's data callback, no task woken per read; loop: a task awaits each read and "
                        "writes it (aiohttp's readany and write)")
    p.add_argument("--prompt-hashes", action="store_true", help="keep a salted hash chain of each prompt's "
                   "blocks in its record (never the text), for `tokenpace workload reuse`")
    p.add_argument("--hash-salt-file", metavar="FILE", help="the salt for --prompt-hashes (default: the "
                   "TOKENPACE_HASH_SALT environment variable); a trailing newline is not part of it")
    p.add_argument("--hash-block", type=int, default=16, metavar="N", help="units per hashed block (default 16)")
    p.add_argument("--tokenizer", metavar="PATH|NAME", help="hash blocks of this local tokenizer's tokens "
                   "(default: words)")
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
    if args.records_max_mib <= 0 or args.records_backups < 0 or args.window <= 0 or args.starts_per_turn < 0 \
            or args.accepts_per_turn < 0 or args.gc_full_every <= 0:
        raise UsageError("--records-max-mib, --window and --gc-full-every must be > 0; --records-backups, "
                         "--starts-per-turn and --accepts-per-turn >= 0")
    host, port = parse_listen(args.listen)
    salt, tokenizer = _prompt_hashing(args)
    return ProxyConfig(upstream=args.upstream, host=host, port=port, slo=args.slo, records_path=args.records,
                       records_max_bytes=int(args.records_max_mib * 1024 * 1024),
                       records_backups=args.records_backups, window_s=args.window,
                       hash_salt=salt, hash_block=args.hash_block, tokenizer=tokenizer,
                       starts_per_turn=args.starts_per_turn, accepts_per_turn=args.accepts_per_turn,
                       gc=args.gc, gc_full_every_s=args.gc_full_every, relay=args.relay)


def _prompt_hashing(args: argparse.Namespace) -> tuple[bytes | None, object]:
    """(salt, tokenizer) for --prompt-hashes; (None, None) without it."""
    import os

    if not args.prompt_hashes:
        if args.hash_salt_file or args.tokenizer:
            raise UsageError("--hash-salt-file and --tokenizer go with --prompt-hashes")
        return None, None
    if args.hash_block < 1:
        raise UsageError(f"--hash-block {args.hash_block}: must be >= 1")
    if args.hash_salt_file:
        try:
            with open(args.hash_salt_file, "rb") as f:
                salt = f.read().rstrip(b"\r\n")
        except OSError as exc:
            raise UsageError(f"--hash-salt-file {args.hash_salt_file}: {exc.strerror or exc}") from None
        if not salt:
            raise UsageError(f"--hash-salt-file {args.hash_salt_file} is empty: put a secret in it")
    else:
        salt = os.environ.get("TOKENPACE_HASH_SALT", "").encode()
        if not salt:
            raise UsageError("--prompt-hashes needs a salt: give --hash-salt-file FILE or set TOKENPACE_HASH_SALT")
    tokenizer = None
    if args.tokenizer:
        from tokenpace.workload.tokenizer import load_tokenizer

        tokenizer = load_tokenizer(args.tokenizer)
    return salt, tokenizer


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

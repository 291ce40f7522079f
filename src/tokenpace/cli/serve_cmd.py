"""`tokenpace serve`: the built-in OpenAI-compatible server, standalone (flags shared with
`python -m tokenpace.servers`)."""

from __future__ import annotations

import argparse

from tokenpace.errors import UsageError

DEFAULT_PORT = 8000
EPILOG = """\
examples:
  tokenpace serve --port 8000
  tokenpace serve --port 8000 --tokens-per-chunk 4 --send-log sends.jsonl
  tokenpace serve --port 8000 --sim --calibration cal.json   # a calibrated engine, in real time
  tokenpace bench --url http://127.0.0.1:8000/v1      # in another terminal
"""


def register(sub: argparse._SubParsersAction) -> None:
    from tokenpace.servers import add_server_arguments

    p = sub.add_parser("serve", help="run the built-in OpenAI-compatible server (simulated timing)",
                       description="OpenAI-compatible server with simulated timing: no GPU, no model.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_server_arguments(p)
    p.set_defaults(port=DEFAULT_PORT, func=run)


def run(args: argparse.Namespace) -> int:
    from tokenpace.servers import config_from_args, serve_forever

    try:
        config = config_from_args(args)
    except ValueError as exc:
        raise UsageError(str(exc)) from None

    def announce(url: str) -> None:
        timing = f"{config.timing} timing"
        if config.sim:
            def name(x: object) -> str:
                return x if isinstance(x, str) else getattr(x, "id", str(x))

            timing = f"engine simulator: {name(config.sim.model)} on {name(config.sim.gpu)}"
            if getattr(args, "calibration", None):
                timing += f" (calibration {args.calibration})"
        print(f"tokenpace serve: {url} · model {config.model!r} · {timing} · "
              "Ctrl-C stops it", flush=True)

    try:
        return serve_forever(config, announce=announce)
    except OSError as exc:
        raise UsageError(f"cannot listen on {config.host}:{config.port}: {exc.strerror or exc}") from None

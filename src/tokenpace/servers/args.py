"""Command-line flags of the built-in server, shared by ``python -m tokenpace.servers`` and
``tokenpace serve``, and the reverse mapping the process launcher uses (config -> argv).

Timing flags are in milliseconds (what people think in); the config holds seconds.
"""

from __future__ import annotations

import argparse
from dataclasses import fields

from tokenpace.config import MAX_SEED

from .config import TIMING_MODELS, BuiltinServerConfig
from .formats import NAMES as API_FORMATS
from .formats import parse_api_formats
from .sim_backend import add_sim_arguments, sim_argv, sim_config_from_args

# (flag, config field, metavar, help); "_ms" flags are converted to and from the "_s" fields.
_MS_FLAGS = (
    ("--prefill-base-ms", "prefill_base_s", "MS", "fixed prefill time per request"),
    ("--prefill-per-token-ms", "prefill_per_token_s", "MS", "prefill time per prompt token"),
    ("--decode-base-ms", "decode_base_s", "MS", "fixed time of one decode step"),
    ("--decode-per-running-ms", "decode_per_running_s", "MS", "decode step time added per running request"),
)
_INT_FLAGS = (
    ("--tokens-per-chunk", "tokens_per_chunk", "K", "tokens carried by each streamed chunk"),
    ("--max-num-seqs", "max_num_seqs", "N", "running requests at most; more wait in a FIFO queue"),
    ("--kv-capacity-tokens", "kv_capacity_tokens", "TOKENS", "KV-cache size behind vllm:kv_cache_usage_perc"),
    ("--default-max-tokens", "default_max_tokens", "TOKENS", "output length when a request names none"),
    ("--max-model-len", "max_model_len", "TOKENS", "context length: longer prompt + max_tokens is HTTP 400"),
)
_DEFAULTS = {f.name: f.default for f in fields(BuiltinServerConfig)}


def _seed(value: str) -> int | None:
    """'random', or a whole number that numpy's generators take (0 to 2**64-1)."""
    if value == "random":
        return None
    try:
        seed = int(value)
    except ValueError:
        seed = -1
    if not 0 <= seed <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be 'random' or a whole number from 0 to 2**64-1, not {value!r}")
    return seed


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    d = _DEFAULTS
    net = parser.add_argument_group("network")
    net.add_argument("--host", default=d["host"], metavar="HOST", help="address to listen on (default %(default)s)")
    net.add_argument("--port", type=int, default=d["port"], metavar="PORT",
                     help="port to listen on; 0: any free port (default %(default)s)")
    net.add_argument("--model", default=d["model"], metavar="NAME", help="served model name (default %(default)s)")
    net.add_argument("--api-formats", default=",".join(API_FORMATS), metavar="LIST",
                     help="request formats to serve, comma-separated: chat (/v1/chat/completions), completions "
                          "(/v1/completions), responses (/v1/responses), anthropic (/v1/messages); default all")

    timing = parser.add_argument_group("timing")
    timing.add_argument("--timing", choices=TIMING_MODELS, default=d["timing"], help="timing model")
    for flag, name, metavar, text in _MS_FLAGS:
        timing.add_argument(flag, type=float, default=d[name] * 1000, metavar=metavar, help=f"{text} (default %(default)g)")
    timing.add_argument("--jitter", type=float, default=d["jitter_frac"], metavar="FRACTION",
                        help="each time is scaled by a uniform factor in 1 +- FRACTION (default %(default)g)")  # fmt: skip
    timing.add_argument("--seed", type=_seed, default=d["seed"], metavar="N",
                        help="seed of the jitter and of --faults fractions, or 'random'")  # fmt: skip

    engine = parser.add_argument_group("engine")
    for flag, name, metavar, text in _INT_FLAGS:
        # --max-num-seqs: None when not given, so that a --calibration's limit can apply.
        engine.add_argument(flag, type=int, default=None if name == "max_num_seqs" else d[name], metavar=metavar,
                            help=f"{text} (default {d[name]})")

    faults = parser.add_argument_group("faults")
    faults.add_argument("--faults", metavar="SPEC", default=None,
                        help="misbehave on purpose: KIND=WHEN[:PARAM],... with WHEN a fraction, every:N or at:N;N, "
                        "e.g. reset-mid=0.05,stall-first=0.02:3s,http-429=every:10 (kinds: see the README)")  # fmt: skip

    add_sim_arguments(parser)

    out = parser.add_argument_group("output")
    out.add_argument("--send-log", metavar="PATH", default=None,
                     help="write a JSONL line per written chunk (the truth a client is checked against)")  # fmt: skip
    out.add_argument("--timings", action="store_true",
                     help="add llama.cpp's per-request `timings` (prompt_ms, predicted_ms, ...) to each response")
    out.add_argument("--send-log-flush-s", type=float, default=d["send_log_flush_s"], metavar="SECONDS",
                     help="how often the send log is written out (default %(default)g)")  # fmt: skip


def config_from_args(ns: argparse.Namespace) -> BuiltinServerConfig:
    """Raises ValueError for values the config rejects."""
    values = {name: getattr(ns, flag[2:].replace("-", "_")) / 1000 for flag, name, _, _ in _MS_FLAGS}
    values.update({name: getattr(ns, flag[2:].replace("-", "_")) for flag, name, _, _ in _INT_FLAGS})
    sim = sim_config_from_args(ns, _DEFAULTS["max_num_seqs"])
    if values["max_num_seqs"] is None:  # not given: the simulated engine's (a calibration's), else the default
        values["max_num_seqs"] = sim.max_num_seqs if sim is not None else _DEFAULTS["max_num_seqs"]
    return BuiltinServerConfig(
        host=ns.host, port=ns.port, model=ns.model, timing=ns.timing, jitter_frac=ns.jitter, seed=ns.seed,
        api_formats=parse_api_formats(ns.api_formats),
        send_log_path=ns.send_log, send_log_flush_s=ns.send_log_flush_s, faults=ns.faults, timings=ns.timings, sim=sim, **values,
    )  # fmt: skip


def config_to_argv(config: BuiltinServerConfig) -> list[str]:
    """Flags that rebuild ``config`` in another process."""
    argv = ["--host", config.host, "--port", str(config.port), "--model", config.model, "--timing", config.timing]
    argv += [arg for flag, name, _, _ in _MS_FLAGS for arg in (flag, repr(getattr(config, name) * 1000))]
    argv += [arg for flag, name, _, _ in _INT_FLAGS for arg in (flag, str(getattr(config, name)))]
    argv += ["--api-formats", ",".join(config.api_formats)]
    argv += ["--jitter", repr(config.jitter_frac), "--seed", "random" if config.seed is None else str(config.seed)]
    if config.send_log_path:
        argv += ["--send-log", str(config.send_log_path), "--send-log-flush-s", repr(config.send_log_flush_s)]
    if config.faults is not None:
        argv += ["--faults", config.faults]
    if config.timings:
        argv.append("--timings")
    return argv + sim_argv(config.sim)

"""`tokenpace lint`: a request log → what keeps its prompts out of the prompt cache, and the gain."""

from __future__ import annotations

import argparse
import json
from typing import Any

from tokenpace.errors import ExitCode, UsageError

EPILOG = """\
examples:
  tokenpace lint requests.jsonl --provider anthropic --model claude-sonnet-4-5 --tokenizer tok.json
  tokenpace lint requests.jsonl --provider openai --input-price 2.5
  tokenpace lint requests.jsonl --provider vllm --block-size 16 --sim-model llama-3.1-8b --gpu h100-sxm
  tokenpace lint requests.jsonl --fail-on timestamp,uuid,id --json > lint.json

The log is JSONL: OpenAI chat/completions or Anthropic messages request bodies, bare or as
{"request": ..., "response": {"usage": ...}}, or tokenpace datasets. Without --tokenizer prompts
are counted in words (labelled so); provider minimums are in tokens, so give one for exact checks.
exit codes: 0 ok (or findings without --fail-on) · 2 bad flag or log line (file:line) ·
            8 --fail-on matched a finding
"""
KINDS = ("timestamp", "uuid", "email", "id", "user_name", "counter", "tool_order", "json_key_order",
         "whitespace", "formatting", "below_minimum", "too_many_breakpoints", "moving_breakpoint",
         "no_breakpoint", "static_after_dynamic")


def add_provider_options(g: argparse._ArgumentGroup) -> None:
    g.add_argument("--provider", default="vllm", metavar="NAME",
                   help="openai, anthropic, vllm or sglang (or one from --providers): its cache rules")
    g.add_argument("--model", metavar="NAME", help="the provider's model (per-model minimums and prices)")
    g.add_argument("--providers", metavar="FILE", help="a JSON file adding or changing provider rules")
    g.add_argument("--input-price", type=float, metavar="USD_PER_MTOK",
                   help="input price per 1M tokens (default: the model's, when the data has it)")
    g.add_argument("--cache-read-multiplier", type=float, metavar="X",
                   help="cached tokens cost X times the input price (default: the provider's)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lint", help="find what keeps a request log's prompts from hitting the prompt cache",
                       description="Prompt-cache lint: content in the cacheable prefix that changes "
                                   "between requests, and provider rules broken, each with what fixing "
                                   "it would save.", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("log", metavar="LOG", help="request log (JSONL)")
    g = p.add_argument_group("provider")
    add_provider_options(g)
    g.add_argument("--block-size", type=int, metavar="TOKENS", help="vLLM's KV block size (default 16)")
    g = p.add_argument_group("counting")
    g.add_argument("--tokenizer", metavar="PATH|NAME", help="local tokenizer.json, folder or .gguf: "
                   "count tokens (default: words)")
    g.add_argument("--sim-model", default="llama-3.1-8b", metavar="NAME",
                   help="model whose simulated prefill prices TTFT saved (default llama-3.1-8b)")
    g.add_argument("--gpu", default="h100-sxm", metavar="NAME", help="GPU for the simulated prefill")
    g.add_argument("--calibration", metavar="FILE", help="price TTFT with a `tokenpace calibrate` file "
                   "(fitted to a measured run) instead of --sim-model and --gpu")
    g.add_argument("--gpu-hour-usd", type=float, metavar="USD",
                   help="self-hosted: price the prefill GPU time saved at this $/GPU-hour")
    g.add_argument("--window", type=int, default=None, metavar="UNITS",
                   help="compare with this many units of recent prompts (default 20,000,000)")
    g.add_argument("--skip-bad-lines", action="store_true", help="skip (and count) bad log lines")
    g = p.add_argument_group("output")
    g.add_argument("--json", action="store_true", help="print the report as JSON")
    g.add_argument("--min-requests", type=int, default=2, metavar="N",
                   help="report a finding only when it touches N requests (default 2)")
    g.add_argument("--fail-on", metavar="KINDS",
                   help=f"exit 8 if any finding is of these kinds (comma list, or 'any'): {', '.join(KINDS)}")
    p.set_defaults(func=run)


def provider_from(args: argparse.Namespace, block_size: int | None = None):
    from tokenpace.advise.providers import get_provider

    for name in ("input_price", "cache_read_multiplier"):
        v = getattr(args, name)
        if v is not None and not v >= 0:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 0, got {v}")
    return get_provider(args.provider, args.model, extra=args.providers, block_size=block_size,
                        input_price=args.input_price, read_multiplier=args.cache_read_multiplier)


def encoder_from(args: argparse.Namespace):
    from tokenpace.advise.units import Encoder

    if not args.tokenizer:
        return Encoder()
    from tokenpace.workload.tokenizer import load_tokenizer

    return Encoder(load_tokenizer(args.tokenizer))


def run(args: argparse.Namespace) -> int:
    from tokenpace.advise.gain import PrefillCost
    from tokenpace.advise.lint import DEFAULT_WINDOW_UNITS, Linter, lint
    from tokenpace.advise.logs import LogStats, read_log

    fail = _fail_kinds(args.fail_on)
    if args.block_size is not None and args.block_size < 1:
        raise UsageError(f"--block-size must be >= 1, got {args.block_size}")
    if args.min_requests < 1:
        raise UsageError(f"--min-requests must be >= 1, got {args.min_requests}")
    if args.window is not None and args.window < 1:
        raise UsageError(f"--window must be >= 1, got {args.window}")
    provider = provider_from(args, args.block_size)
    enc = encoder_from(args)
    prefill = PrefillCost(args.sim_model, args.gpu, calibration=args.calibration)
    linter = Linter(provider, enc, prefill, window_units=args.window or DEFAULT_WINDOW_UNITS,
                    gpu_hour_usd=args.gpu_hour_usd)
    stats = LogStats(args.log)
    report = lint(read_log(args.log, skip_bad=args.skip_bad_lines, stats=stats), linter,
                  min_requests=args.min_requests)
    report["log"] = {"path": args.log, "requests": stats.requests, "skipped_lines": len(stats.skipped),
                     "out_of_order": stats.out_of_order, "formats": stats.kinds}
    print(json.dumps(report, indent=2) if args.json else render(report))
    if fail and any(f["kind"] in fail or "any" in fail for f in report["findings"]):
        return ExitCode.FINDINGS
    return ExitCode.OK


def _fail_kinds(text: str | None) -> set[str]:
    if not text:
        return set()
    kinds = {k.strip() for k in text.split(",") if k.strip()}
    bad = kinds - set(KINDS) - {"any"}
    if bad:
        raise UsageError(f"--fail-on: unknown kind {sorted(bad)[0]!r} (known: any, {', '.join(KINDS)})")
    return kinds


def render(r: dict[str, Any]) -> str:
    unit = r["unit"]
    prov = r["provider"]
    out = [f"{r['requests']:,} requests · {r['prompt_units']:,} prompt {unit} · cacheable prefix "
           f"{r['cacheable_units']:,} {unit}, of which {r['shared_prefix_units']:,} shared with an "
           f"earlier request · provider {prov['id']}"
           + (f" ({prov['model']})" if prov.get("model") else "")]
    if unit == "words":
        out.append("counted in words (no --tokenizer): token figures are approximate")
    if r["log"]["skipped_lines"]:
        out.append(f"{r['log']['skipped_lines']} bad lines skipped")
    if not r["findings"]:
        out.append("no findings: nothing in the cacheable prefix changes between requests that share it")
        return "\n".join(out)
    out.append("")
    for i, f in enumerate(r["findings"], 1):
        where = f["json_path"] + (f" char {f['char_offset']}" if f.get("char_offset") else "")
        off = f["token_offset"]
        if off:
            where += f", {unit[:-1]} offset {off['min']}" + (f"–{off['max']}" if off["max"] != off["min"] else "")
        gain = f"{f['cached_tokens_gained']:,} cacheable {unit} to gain"
        if f["ttft_saved_ms_mean"]:
            pre = r["prefill"]
            gain += f" · TTFT −{f['ttft_saved_ms_mean']:.1f} ms per request ({pre['model']} on {pre['gpu']}, simulated)"
        if f["usd_saved"]:
            gain += f" · ${f['usd_saved']:.4f} saved"
        out.append(f"{i}. {f['kind']} at {where}: {f['requests']:,} requests, "
                   f"{f['invalidated_units']:,} prefix {unit} invalidated · {gain}")
        if f["examples"]:
            out.append(f"   e.g. {' | '.join(f['examples'])}  (first: {f['first_seen']})")
        out.append(f"   fix: {f['fix']}")
    t = r["totals"]
    out.append("")
    out.append(f"total: {t['cached_tokens_gained']:,} cacheable {unit} to gain"
               + (f" · ${t['usd_saved']:.4f}" if t["usd_saved"] else ""))
    return "\n".join(out)

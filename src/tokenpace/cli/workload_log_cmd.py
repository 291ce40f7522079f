"""`tokenpace workload reuse` and `tokenpace workload dedupe`: a request log → prefix reuse (what a
prefix cache could serve) and response-cache hits (what a response cache could answer)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from tokenpace.errors import ExitCode, UsageError

REUSE_EPILOG = """\
examples:
  tokenpace workload reuse live.jsonl --tokenizer tok.json --cache-tokens 500000 --block-size 16
  tokenpace workload reuse live.jsonl --emit-trace reuse.trace.jsonl   # then: tokenpace sim --trace reuse.trace.jsonl
  tokenpace workload reuse proxy.records.jsonl --json                  # records with prompt_hash_chain

Counts tokens with --tokenizer, else words (labelled). Exit 2 on a bad flag or log line (file:line).
"""
DEDUPE_EPILOG = """\
examples:
  tokenpace workload dedupe live.jsonl --similarity 0.9
  tokenpace workload dedupe live.jsonl --similarity 0.85 --input-price 3 --output-price 15 --json
  tokenpace workload dedupe live.jsonl --embeddings ./potion-base-8M --similarity 0.9

The cache key holds the sampling parameters and everything before the final user turn; the final
user turn is compared by the Jaccard similarity of its character 5-grams (MinHash), or with
--embeddings by the cosine of a local model2vec model's embeddings (a folder; nothing is
downloaded; pip install 'tokenpace[embed]'). Exit 2 on a bad flag, model folder or log line
(file:line).
"""


def register(inner: argparse._SubParsersAction) -> None:
    r = inner.add_parser("reuse", help="prefix reuse of a request log: hit-rate ceiling, LRU hit rate",
                         description="Replay a request log's prompts through a prefix cache: the hit-rate "
                                     "ceiling, the hit rate of an LRU cache of a given size, the top shared "
                                     "prefixes, and a trace that reproduces the reuse.",
                         epilog=REUSE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("log", metavar="LOG", help="request log (JSONL)")
    r.add_argument("--tokenizer", metavar="PATH|NAME", help="count tokens with this local tokenizer "
                   "(default: words)")
    r.add_argument("--block-size", type=int, default=16, metavar="UNITS", help="cache block (default 16)")
    r.add_argument("--cache-tokens", type=int, metavar="UNITS", help="LRU cache size (default: only the ceiling)")
    r.add_argument("--emit-trace", metavar="PATH", help="write a trace (timestamp, lengths, hash_ids of "
                   "512-unit blocks) for bench --trace and sim --trace")
    r.add_argument("--skip-bad-lines", action="store_true", help="skip (and count) bad log lines")
    r.add_argument("--json", action="store_true", help="print the report as JSON")
    r.set_defaults(func=run_reuse)
    d = inner.add_parser("dedupe", help="response-cache what-if: exact and near-duplicate requests",
                         description="What a response cache would answer: exact duplicates after "
                                     "normalizing, near duplicates by MinHash similarity, the hit rate "
                                     "against the threshold, example pairs, and the compute saved.",
                         epilog=DEDUPE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    d.add_argument("log", metavar="LOG", help="request log (JSONL)")
    d.add_argument("--similarity", type=float, default=0.9, metavar="0..1",
                   help="threshold for a near hit (default 0.9)")
    d.add_argument("--tokenizer", metavar="PATH|NAME", help="count prompt tokens with this local "
                   "tokenizer when the log has no usage (default: words)")
    d.add_argument("--embeddings", metavar="DIR", help="compare by the cosine of the embeddings of this local "
                   "model2vec model folder instead of MinHash (nothing is downloaded; extra 'embed')")
    d.add_argument("--input-price", type=float, metavar="USD_PER_MTOK", help="input price per 1M tokens")
    d.add_argument("--output-price", type=float, metavar="USD_PER_MTOK", help="output price per 1M tokens")
    d.add_argument("--skip-bad-lines", action="store_true", help="skip (and count) bad log lines")
    d.add_argument("--json", action="store_true", help="print the report as JSON")
    d.set_defaults(func=run_dedupe)


def _encoder(tokenizer: str | None):
    from tokenpace.advise.units import Encoder

    if not tokenizer:
        return Encoder()
    from tokenpace.workload.tokenizer import load_tokenizer

    return Encoder(load_tokenizer(tokenizer))


def run_reuse(args: argparse.Namespace) -> int:
    from tokenpace.advise.logs import LogStats, read_log
    from tokenpace.advise.reuse import Reuse, reuse

    if args.block_size < 1:
        raise UsageError(f"--block-size must be >= 1, got {args.block_size}")
    if args.cache_tokens is not None and args.cache_tokens < args.block_size:
        raise UsageError(f"--cache-tokens must hold at least one block ({args.block_size}), got {args.cache_tokens}")
    enc = _encoder(args.tokenizer)
    stats = LogStats(args.log)
    analysis = Reuse(enc, args.block_size, args.cache_tokens, trace_path=args.emit_trace)
    report = reuse(read_log(args.log, skip_bad=args.skip_bad_lines, stats=stats), analysis)
    report["log"] = {"path": args.log, "requests": stats.requests, "skipped_lines": len(stats.skipped),
                     "out_of_order": stats.out_of_order, "formats": stats.kinds}
    report["trace_written"] = args.emit_trace
    print(json.dumps(report, indent=2) if args.json else render_reuse(report))
    return ExitCode.OK


def run_dedupe(args: argparse.Namespace) -> int:
    from tokenpace.advise.dedupe import Dedupe, dedupe
    from tokenpace.advise.logs import LogStats, read_log

    if not 0 < args.similarity <= 1:
        raise UsageError(f"--similarity must be in (0, 1], got {args.similarity}")
    for name in ("input_price", "output_price"):
        v = getattr(args, name)
        if v is not None and not v >= 0:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 0, got {v}")
    index = None
    if args.embeddings is not None:
        from tokenpace.advise.embed import EmbeddingIndex, load_embedding_model

        index = EmbeddingIndex(load_embedding_model(args.embeddings), source=args.embeddings)
    stats = LogStats(args.log)
    analysis = Dedupe(_encoder(args.tokenizer), args.similarity, input_price=args.input_price,
                      output_price=args.output_price, embeddings=index)
    report = dedupe(read_log(args.log, skip_bad=args.skip_bad_lines, stats=stats), analysis)
    report["log"] = {"path": args.log, "requests": stats.requests, "skipped_lines": len(stats.skipped)}
    print(json.dumps(report, indent=2) if args.json else render_dedupe(report))
    return ExitCode.OK


def render_reuse(r: dict[str, Any]) -> str:
    u = r["unit"]
    out = [f"{r['requests']:,} requests · {r['prompt_units']:,} prompt {u} ({r['unit_source']}) · "
           f"block {r['block_size']} {u}"]
    c = r["ceiling"]
    out.append(f"ceiling (unbounded cache): {c['hit_rate']:.1%} of prompt {u} reusable ({c['hit_units']:,})")
    if r["lru"]:
        lr = r["lru"]
        out.append(f"LRU cache of {lr['cache_units']:,} {u}: {lr['hit_rate']:.1%} hit rate ({lr['hit_units']:,} {u})")
    if "provider_reported" in r:
        p = r["provider_reported"]
        out.append(f"provider reported: {p['cached_rate']:.1%} cached ({p['cached_tokens']:,} of "
                   f"{p['prompt_tokens']:,} tokens, {p['requests']:,} requests with usage) · predicted "
                   f"({p['predicted_by']}): {p['predicted_cached_units']:,} {u}")
    if r["top_prefixes"]:
        out.append("top shared prefixes:")
        for t in r["top_prefixes"]:
            start = f" · starts {t['starts_with']!r}" if t["starts_with"] else ""
            out.append(f"  {t['prefix_units']:>8,} {u} × {t['requests']:,} requests ({t['units_reused']:,} "
                       f"reused){start}")
    if r["shared_prefix_spec"]:
        out.append(f"as a synthetic workload: --shared-prefix {r['shared_prefix_spec']}")
    if r["trace_written"]:
        out.append(f"trace written: {r['trace_written']} (replay: tokenpace sim --trace {r['trace_written']})")
    return "\n".join(out)


def render_dedupe(r: dict[str, Any]) -> str:
    s = r["saved"]
    out = [f"{r['requests']:,} requests · key: {r['key']}",
           f"similarity: {r['similarity']['measure']}",
           f"exact duplicates: {r['exact']['hit_rate']:.1%} · hits at >= {r['similarity']['threshold']}: "
           f"{r['near']['hit_rate']:.1%} ({s['hit_requests']:,} requests; {s['prompt_units']:,} prompt "
           f"{r['unit']} and {s['output_tokens']:,} output tokens saved"
           + (f", ${s['usd']:.4f}" if s["usd"] is not None else "") + ")", "", "threshold  hit rate"]
    for c in r["curve"]:
        out.append(f"  {c['threshold']:>5.2f}   {c['hit_rate']:6.1%}")
        for e in c["examples"]:
            sim = e["cosine"] if "cosine" in e else e["similarity_estimated"]
            out.append(f"          {sim:.2f}: {e['text'][:60]!r} ~ {e['earlier'][:60]!r}")
    return "\n".join(out)

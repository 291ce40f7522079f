"""`tokenpace workload inspect`: the workload flags → the plan → lengths, arrivals, prefix sharing."""

from __future__ import annotations

import argparse
import json
from itertools import islice
from typing import Any

from tokenpace.cli import options
from tokenpace.config import API_HELP, APIS, ARRIVALS, DEFAULT_REQUESTS, BenchConfig
from tokenpace.errors import ExitCode, UsageError

EPILOG = f"""\
examples:
  tokenpace workload inspect --input-tokens lognormal:mean=800,sigma=0.6,max=8000
  tokenpace workload inspect --dataset sharegpt.json --tokenizer path/to/tokenizer.json
  tokenpace workload inspect --shared-prefix groups=8,prefix-tokens=2048,per-group=50,order=grouped
  tokenpace workload inspect --trace trace.jsonl --time-scale 0.5
  tokenpace workload inspect --conversations sessions=20,turns=6,think-time=exp:3s

Looks at the first --requests requests (default: all of a dataset, trace or bounded shared-prefix
workload, else {DEFAULT_REQUESTS}). Nothing is sent. Exit 2 on a bad flag, spec or file.
"""
_BAR = 40


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("workload", help="look at a workload before sending it",
                       description="Workload tools.")
    inner = p.add_subparsers(dest="workload_command", metavar="ACTION", parser_class=type(p))
    q = inner.add_parser("inspect", help="length histograms, arrival rates, prefix sharing",
                         description="Show what a workload spec or file would send: input and "
                                     "output length histograms, arrival-rate statistics, "
                                     "prefix-sharing structure and where token counts come from.",
                         epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = q.add_argument_group("load")
    g.add_argument("--requests", type=int, metavar="N", help="requests to look at")
    g.add_argument("--rate", type=float, metavar="RPS", help="open loop: requests per second")
    g.add_argument("--arrival", choices=ARRIVALS, default="poisson", help="open-loop arrivals")
    g.add_argument("--burstiness", type=float, default=1.0, metavar="SHAPE",
                   help="gamma shape (1 = Poisson, <1 burstier)")
    options.add_seed(g)
    g.add_argument("--api", choices=APIS, default="chat", help=API_HELP)
    options.add_workload(q)
    q.add_argument("--json", action="store_true", help="print the statistics as JSON")
    q.set_defaults(func=run)
    from tokenpace.cli import workload_log_cmd

    workload_log_cmd.register(inner)
    p.set_defaults(func=lambda _args: p.print_help() or ExitCode.USAGE)


def run(args: argparse.Namespace) -> int:
    from tokenpace.workload import conversations_for, plan_requests, workload_from_config
    from tokenpace.workload.inspect import inspect_plan

    config = BenchConfig(rate=args.rate, arrival=args.arrival, burstiness=args.burstiness,
                         seed=args.seed, api=args.api, requests=args.requests,
                         **options.workload_values(args)).validate()
    spec = workload_from_config(config)
    n = args.requests or spec.finite_requests or DEFAULT_REQUESTS
    maker = spec.prompt_maker
    conversations = None
    if spec.conversations is not None:
        items, conversations = _conversation_items(spec, conversations_for(spec), n)
    else:
        try:
            items = list(islice(plan_requests(spec), n))
        except ValueError as exc:  # e.g. no text of exactly N tokens with this tokenizer
            raise UsageError(str(exc)) from None
    report = inspect_plan(items, maker)
    if conversations is not None:
        report["conversations"] = conversations
    for source in ("dataset", "trace"):
        data = getattr(spec, source)
        if data is not None:
            report[source] = {"path": data.path, "format": data.format, "entries": len(data.entries),
                              "skipped_lines": len(data.skipped)}
            if data.out_of_order:
                report[source]["sorted_out_of_order"] = data.out_of_order
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(render(report))
    return ExitCode.OK


def _conversation_items(spec, sessions, n: int):
    from tokenpace.workload import PlannedRequest

    items, thinks, last_turn_tokens = [], [], []
    for conv in sessions:
        while not conv.done and len(items) < n:
            turn = conv.next_turn()
            items.append(PlannedRequest(len(items), turn.prompt(spec.api), turn.input_tokens,
                                        turn.output_tokens, None))
            if turn.turn > 1:
                thinks.append(turn.think_time_s)
        last_turn_tokens.append(conv.history_tokens)
    info = {"sessions": spec.conversations.sessions, "turns": spec.conversations.turns,
            "think_time_mean_s": sum(thinks) / len(thinks) if thinks else 0.0,
            "last_turn_input_tokens_mean": sum(last_turn_tokens) / len(last_turn_tokens)}
    return items, info


def render(r: dict[str, Any]) -> str:
    out = [f"{r['requests']} requests · input lengths: {r['input_length_source']}"]
    for key in ("dataset", "trace"):
        if key in r:
            d = r[key]
            out.append(f"{key}: {d['path']} ({d['format']}, {d['entries']} entries, "
                       f"{d['skipped_lines']} bad lines skipped"
                       + (f"; sorted by timestamp: {d['sorted_out_of_order']} out of order"
                          if d.get("sorted_out_of_order") else "") + ")")
    for key, title in (("input_tokens", "input tokens"), ("output_tokens", "output tokens")):
        out += ["", *_histogram(title, r[key])]
    out.append("")
    a = r["arrivals"]
    if a is None:
        out.append("arrivals: closed loop (each request when a worker is free)")
    else:
        rate = "-" if a["mean_rate_rps"] is None else f"{a['mean_rate_rps']:.2f} req/s"
        cv = "-" if a["gap_cv"] is None else f"{a['gap_cv']:.2f}"
        g = a["gap_ms"]
        out.append(f"arrivals: {a['requests']} over {a['span_s']:.1f} s · mean rate {rate} · peak "
                   f"{a['peak_requests_in_1s']} in 1 s · gap ms mean {g['mean']:.1f} p50 {g['p50']:.1f} "
                   f"p99 {g['p99']:.1f} max {g['max']:.1f} · gap CV {cv} (Poisson: 1)")
    if "conversations" in r:
        c = r["conversations"]
        out.append(f"conversations: {c['sessions']} sessions × {c['turns']} turns · think time mean "
                   f"{c['think_time_mean_s']:.2f} s · last turn's history mean "
                   f"{c['last_turn_input_tokens_mean']:.0f} tokens")
    p = r["prefix_sharing"]
    groups = f" · {r['prefix_groups']} prefix groups" if r["prefix_groups"] else ""
    out.append(f"prefix sharing (ideal cache, over {p['unit']}): {p['reusable_fraction']:.1%} of "
               f"{p['prompt_units']:,} prompt {p['unit']} reusable · {p['distinct_prefixes']} "
               f"distinct shared prefixes{groups}")
    return "\n".join(out)


def _histogram(title: str, s: dict[str, Any]) -> list[str]:
    if not s.get("count"):
        return [f"{title}: none"]
    lines = [f"{title}: mean {s['mean']:.1f} · std {s['std']:.1f} · min {s['min']:.0f} · p50 "
             f"{s['p50']:.0f} · p90 {s['p90']:.0f} · p99 {s['p99']:.0f} · max {s['max']:.0f}"]
    peak = max(b["count"] for b in s["histogram"]) or 1
    for b in s["histogram"]:
        bar = "█" * round(_BAR * b["count"] / peak)
        lines.append(f"  {b['lo']:>9,.0f} – {b['hi']:<9,.0f} │{bar:<{_BAR}} {b['count']}")
    return lines

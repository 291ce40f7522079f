"""`tokenpace plan`: the cheapest deployment that meets the SLO at the user's traffic (plan/), and
`tokenpace plan fit`: memory only."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tokenpace.errors import UsageError

EPILOG = """\
examples:
  tokenpace plan --model llama-3.1-70b --rate 20 --arrival poisson --slo chat \\
      --input-tokens lognormal:mean=1500,sigma=0.8 --output-tokens 300 \\
      --gpus h100-sxm,h200,a100-80gb,l40s --prices prices.json --out plan.json --html plan.html
  tokenpace plan --model llama-3.1-8b --rate 50 --slo ttft=300ms,tpot=40ms --quant bf16,fp8 \\
      --spec-decode acceptance=0.7,draft-tokens=4 --growth 1.5
  tokenpace plan --model llama-3.1-8b --rate 5 --slo chat --gpus h100-sxm --calibration cal.json
  tokenpace plan --model llama-3.1-8b --rate 10 --dataset traffic.jsonl --slo ttft=300ms,tpot=40ms
  tokenpace plan --model llama-3.1-8b --rate 20 --shared-prefix groups=4,prefix-tokens=3000 --input-tokens 200
  tokenpace plan --model llama-3.1-8b --rate 20 --trace reuse.trace.jsonl   # from `workload reuse --emit-trace`
  tokenpace plan fit --model llama-3.1-8b --gpu l40s --quant int4 --context 8192   # memory only

Each candidate (GPU x TP x precision x engine preset x knobs) is checked for memory first, then
for the TTFT and TPOT an idle engine could reach and the throughput a full batch could reach; the
rest are simulated (the event simulator, real queueing) to find the highest rate one replica
serves within the SLO. Replicas = ceil(rate / that). Cost = GPU price x GPUs. Prices: an example
table shipped with tokenpace (each price with its source and date); give yours with --prices.
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="the cheapest deployment that meets the SLO at your traffic",
                       description="Plan capacity and cost: search GPUs, TP, precision and engine "
                                   "settings with the simulator; the cheapest that meets the SLO.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", nargs="?", choices=["fit"], help="fit: memory only, no simulation")
    p.add_argument("--model", required=True, metavar="NAME|PATH", help="catalog name or a config.json")
    p.add_argument("--gpus", "--gpu", dest="gpus", default="h100-sxm,h200,a100-80gb,l40s", metavar="LIST",
                   help="GPU types to consider (default %(default)s)")
    p.add_argument("--quant", default="bf16,fp8", metavar="LIST",
                   help="weight precisions (default %(default)s; FP8 only where the GPU has FP8; the KV "
                        "cache follows the engine default: FP8 with FP8 weights)")
    p.add_argument("--kv-dtype", default=None, metavar="LIST",
                   help="KV cache precisions to try, e.g. bf16,fp8 (default: the engine's, FP8 with FP8 weights)")
    p.add_argument("--tp", default="1,2,4,8", metavar="LIST", help="tensor-parallel degrees (default %(default)s)")
    p.add_argument("--engines", "--engine", dest="engines", default="vllm", metavar="LIST",
                   help="engine presets: vllm, sglang, trtllm (default %(default)s)")
    p.add_argument("--context", type=int, metavar="TOKENS", help="plan fit: tokens per sequence (prompt + output)")
    g = p.add_argument_group("traffic and SLO")
    g.add_argument("--rate", type=float, metavar="RPS", help="requests/s, all replicas together")
    g.add_argument("--arrival", default="poisson", choices=["poisson", "constant", "gamma"])
    g.add_argument("--burstiness", type=float, default=1.0, help="gamma arrivals' shape (1: Poisson)")
    g.add_argument("--input-tokens", default="1024", metavar="SPEC", help="length spec, as bench (default %(default)s)")
    g.add_argument("--output-tokens", default="256", metavar="SPEC", help="length spec, as bench (default %(default)s)")
    g.add_argument("--dataset", metavar="PATH", help="the traffic's lengths from a dataset (the formats bench "
                   "reads): each entry's prompt and output length, drawn together; replaces --input-tokens")
    g.add_argument("--trace", metavar="PATH", help="the traffic's lengths and shared prefixes from a trace "
                   "(bench --trace's format, e.g. from `workload reuse --emit-trace`); its timestamps are not "
                   "used: --rate and --arrival set the pace")
    g.add_argument("--shared-prefix", metavar="SPEC", help="groups=G,prefix-tokens=P: every request starts with "
                   "one of G shared prefixes of P tokens (--input-tokens: the rest of the prompt)")
    g.add_argument("--tokenizer", metavar="PATH", help="with --dataset: exact prompt lengths (else words)")
    g.add_argument("--slo", default="chat", metavar="SPEC", help="as bench's --slo (default %(default)s)")
    g.add_argument("--seed", type=int, default=0)
    g = p.add_argument_group("engine knobs to search")
    g.add_argument("--chunked-prefill", default="preset", metavar="LIST",
                   help="on, off, or on,off (default: each preset's own policy)")
    g.add_argument("--max-num-seqs", default=None, metavar="LIST", help="batch limits to try (default: the preset's)")
    g.add_argument("--max-batched-tokens", default=None, metavar="LIST",
                   help="tokens per step to try (default: the preset's)")
    g.add_argument("--prefix-caching", nargs="?", const="on", default="auto", metavar="LIST",
                   help="on, off, or on,off (default auto: on,off when the traffic shares prefixes "
                        "(--shared-prefix, a --trace with block ids), else off)")
    g.add_argument("--spec-decode", metavar="SPEC",
                   help="also try speculative decoding: acceptance=A[,draft-tokens=G][,draft-cost=C]")
    g = p.add_argument_group("prices, predictor, output")
    g.add_argument("--prices", metavar="FILE", help="a price table (JSON) replacing the example's prices by GPU")
    g.add_argument("--predictor", choices=["roofline", "kernels"], default="roofline",
                   help="step costs: the roofline (default) or measured kernel tables (the kernels extra; GPUs "
                        "without tables are left out, said)")
    g.add_argument("--calibration", metavar="FILE", help="a calibration (tokenpace calibrate): its fitted "
                   "efficiencies replace the catalog's for its GPU")
    g.add_argument("--growth", type=float, metavar="X", help="what-if: traffic grows by this factor")
    g.add_argument("--top", type=int, default=10, help="finalists to rank exactly (default %(default)s)")
    g.add_argument("--jobs", type=int, default=0, help="worker processes (default: one per CPU)")
    g.add_argument("--out", metavar="FILE", help="write the plan as JSON")
    g.add_argument("--html", metavar="FILE", help="write the plan as a self-contained HTML page")
    g.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tokenpace.simulator.catalog import get_model

    try:
        get_model(args.model)
    except (KeyError, ValueError, OSError) as exc:
        raise UsageError(f"--model: {exc}") from None
    if args.action == "fit":
        return _fit(args)
    return _plan(args)


def _list(text: str, flag: str, cast: Any = str) -> list:
    items = [x.strip() for x in str(text).split(",") if x.strip()]
    if not items:
        raise UsageError(f"{flag}: empty list")
    try:
        return [cast(x) for x in items]
    except ValueError:
        raise UsageError(f"{flag}: not a list of {cast.__name__}: {text!r}") from None


def _fit(args: argparse.Namespace) -> int:
    import json

    from tokenpace.plan.fit import memory_fit

    context = args.context or 4096
    if context < 1:
        raise UsageError(f"--context must be >= 1, not {context}")
    rows = []
    for gpu in _list(args.gpus, "--gpu"):
        for quant in _list(args.quant, "--quant"):
            for tp in _list(args.tp, "--tp", int):
                for engine in _list(args.engines, "--engine"):
                    for kv in [None] if args.kv_dtype is None else _list(args.kv_dtype, "--kv-dtype"):
                        rows.append(_checked(lambda: memory_fit(args.model, gpu, quant, kv_dtype=kv, tp=tp,
                                                                engine=engine, context_tokens=context)))
    if args.json:
        print(json.dumps([r.to_dict() for r in rows], indent=2))
        return 0
    for r in rows:
        verdict = (f"fits: KV for {r.kv_tokens:,} tokens = {r.sequences} sequences of {r.context_tokens:,}"
                   if r.fits else f"does not fit: {r.reason()}")
        print(f"{r.model} on {r.tp} x {r.gpu} {r.weights} (KV {r.kv_dtype}, {r.engine}): weights "
              f"{r.weights_gib:.1f} GiB/GPU, reserve {r.reserve_gib:.2f} GiB/GPU, KV "
              f"{r.kv_bytes_per_token * r.tp / 1024:.0f} KiB/token ({r.kv_gib_per_sequence:.2f} GiB per "
              f"{r.context_tokens:,}-token context); {verdict}")
    return 0


def _checked(make: Any) -> Any:
    try:
        return make()
    except (KeyError, ValueError) as exc:
        raise UsageError(str(exc).strip("'\"")) from None


def _plan(args: argparse.Namespace) -> int:
    import json

    from tokenpace.files import write_whole
    from tokenpace.metrics.slo import parse_slo
    from tokenpace.plan.candidates import enumerate_candidates
    from tokenpace.plan.prices import load_prices
    from tokenpace.plan.run import PlanConfig, run_plan
    from tokenpace.reports.plan_console import render_plan

    from tokenpace.cli.streams import stdout_console

    if args.rate is None or not args.rate > 0:
        raise UsageError("--rate: give the traffic's requests/s (> 0)")
    for flag, value, low in (("--top", args.top, 1), ("--jobs", args.jobs, 0)):
        if value < low:
            raise UsageError(f"{flag} must be >= {low}, not {value}")
    if args.growth is not None and not args.growth > 0:
        raise UsageError(f"--growth must be > 0, not {args.growth}")
    traffic = _traffic(args)
    chunked: list[bool | None] = ([None] if args.chunked_prefill == "preset"
                                  else [_on_off(x) for x in _list(args.chunked_prefill, "--chunked-prefill")])
    seqs: list[int | None] = [None] if args.max_num_seqs is None else _list(args.max_num_seqs, "--max-num-seqs", int)
    tokens: list[int | None] = ([None] if args.max_batched_tokens is None
                                else _list(args.max_batched_tokens, "--max-batched-tokens", int))
    if any(v is not None and v < 1 for v in seqs + tokens):
        raise UsageError("--max-num-seqs and --max-batched-tokens take whole numbers >= 1")
    calibration = None
    if args.calibration:
        from tokenpace.simulator.calibrate.calibration import load_calibration
        calibration = load_calibration(args.calibration)
    candidates = _checked(lambda: enumerate_candidates(
        gpus=_list(args.gpus, "--gpus"), tps=_list(args.tp, "--tp", int), weights=_list(args.quant, "--quant"),
        engines=_list(args.engines, "--engines"), chunked=chunked, max_num_seqs=seqs,
        prefix_caching=_prefix_caching(args.prefix_caching, traffic), specs=[None] + ([_spec(args.spec_decode)] if args.spec_decode else []),
        calibration=calibration, max_batched_tokens=tokens,
        kv_dtypes=[None] if args.kv_dtype is None else _list(args.kv_dtype, "--kv-dtype"),
        predictor=args.predictor))
    if args.predictor == "kernels":
        from tokenpace.simulator.kernels import tables_available

        if not tables_available():
            raise UsageError("--predictor kernels needs the measured tables: pip install 'tokenpace[kernels]'")
    if not candidates:
        raise UsageError("no candidate: none of --gpus can run any of --quant")
    config = PlanConfig(args.model, traffic, parse_slo(args.slo), candidates, load_prices(args.prices),
                        top=args.top, jobs=args.jobs, growth=args.growth, calibration=args.calibration,
                        predictor=args.predictor)
    doc = run_plan(config)
    data = json.dumps(doc, indent=2).encode()
    if args.out:
        write_whole(args.out, data, what="the plan")
    if args.html:
        from tokenpace.reports.html.plan_page import render_plan_html

        write_whole(args.html, render_plan_html(doc).encode(), what="the plan page")
    if args.json:
        sys.stdout.write(data.decode() + "\n")
    else:
        render_plan(doc, stdout_console())
        if args.out:
            print(f"plan written to {args.out}")
    return 0


def _traffic(args: argparse.Namespace) -> Any:
    from tokenpace.plan.search import Traffic, dataset_traffic
    from tokenpace.workload.lengths import parse_length
    from tokenpace.workload.shared_prefix import parse_shared_prefix

    given = [flag for flag, value in (("--dataset", args.dataset), ("--trace", args.trace),
                                      ("--shared-prefix", args.shared_prefix)) if value]
    if len(given) > 1:
        raise UsageError(f"{' and '.join(given)}: give one traffic source")
    if args.dataset or args.trace:
        return dataset_traffic(args.rate, args.dataset or args.trace, tokenizer=args.tokenizer,
                               output_tokens=args.output_tokens, arrival=args.arrival, burstiness=args.burstiness,
                               seed=args.seed, trace=bool(args.trace))
    shared = None
    if args.shared_prefix:
        shared = parse_shared_prefix(args.shared_prefix)
        if shared.order != "interleaved" or shared.per_group is not None:
            raise UsageError("--shared-prefix: a plan's traffic is a steady rate: give groups=G,prefix-tokens=P "
                             "only (requests cycle through the groups)")
    return Traffic(args.rate, parse_length(args.input_tokens, flag="--input-tokens"),
                   parse_length(args.output_tokens, flag="--output-tokens"), args.arrival,
                   args.burstiness, args.seed, shared_prefix=shared)


def _prefix_caching(text: str, traffic: Any) -> list[bool]:
    if text == "auto":
        return [True, False] if traffic.shares_prefixes else [False]
    return [_on_off(x, "--prefix-caching") for x in _list(text, "--prefix-caching")]


def _on_off(text: str, flag: str = "--chunked-prefill") -> bool:
    from tokenpace.sweep.client_vary import on_off

    try:
        return on_off(text)
    except ValueError:
        raise UsageError(f"{flag}: on or off, not {text!r}") from None


def _spec(text: str) -> Any:
    from tokenpace.simulator.spec_decode import SpecDecodeConfig

    values: dict[str, float] = {}
    for part in _list(text, "--spec-decode"):
        key, _, value = part.partition("=")
        try:
            values[key.strip().lower()] = float(value)
        except ValueError:
            raise UsageError(f"--spec-decode: {part!r} is not key=number") from None
    unknown = set(values) - {"acceptance", "draft-tokens", "draft-cost"}
    if unknown or "acceptance" not in values:
        raise UsageError("--spec-decode: acceptance=A[,draft-tokens=G][,draft-cost=C]")
    try:
        return SpecDecodeConfig(num_draft_tokens=int(values.get("draft-tokens", 4)),
                                acceptance_rate=values["acceptance"], draft_cost=values.get("draft-cost", 0.1))
    except ValueError as exc:
        raise UsageError(f"--spec-decode: {exc}") from None

"""From a BenchConfig's workload fields to a WorkloadSpec: parse the specs, load the files.

Both `run_bench` and `run_sim` (and `tokenpace workload inspect`) call `workload_from_config`, so
one command line means one workload whether it is measured or simulated.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from tokenpace.config import BenchConfig
from tokenpace.errors import UsageError
from tokenpace.workload.conversations import parse_conversations
from tokenpace.workload.datasets import in_time_order, load_dataset
from tokenpace.workload.extras import REASONING_EFFORTS
from tokenpace.workload.lengths import parse_length
from tokenpace.workload.plan import WorkloadSpec
from tokenpace.workload.shared_prefix import parse_shared_prefix
from tokenpace.workload.tokenizer import load_tokenizer

_SOURCES = (("dataset", "--dataset"), ("trace", "--trace"), ("shared_prefix", "--shared-prefix"),
            ("conversations", "--conversations"))


def workload_from_config(config: BenchConfig) -> WorkloadSpec:
    """The workload a config describes; UsageError (exit 2) naming the flag for anything invalid."""
    c = config
    given = [flag for name, flag in _SOURCES if getattr(c, name, None)]
    if len(given) > 1:
        raise UsageError(f"give at most one of {', '.join(given)}")
    if c.trace and c.rate is not None:
        raise UsageError("--trace brings its own arrival times: drop --rate (use --time-scale)")
    if not (math.isfinite(c.time_scale) and c.time_scale > 0):
        raise UsageError(f"--time-scale must be a finite number > 0, not {c.time_scale}")
    if c.reasoning_effort is not None and c.reasoning_effort not in REASONING_EFFORTS:
        raise UsageError(f"--reasoning-effort must be one of {', '.join(REASONING_EFFORTS)}")
    if c.tools < 0 or c.tools != int(c.tools):
        raise UsageError(f"--tools must be a whole number >= 0, not {c.tools}")
    if c.tools and c.conversations:
        raise UsageError("--tools with --conversations is not supported (a tool call needs a tool "
                         "result in the history)")
    if c.tools and c.api != "chat":
        raise UsageError("--tools needs --api chat (tools are generated in chat's format only)")
    if c.reasoning_effort is not None and c.api == "anthropic":
        raise UsageError("--reasoning-effort is OpenAI's field; for Anthropic's extended thinking pass "
                         "--extra-body '{\"thinking\": {\"type\": \"enabled\", \"budget_tokens\": 1024}}'")
    tokenizer = load_tokenizer(c.tokenizer) if c.tokenizer else None
    trace = load_dataset(c.trace, skip_bad=c.skip_bad_lines, flag="--trace") if c.trace else None
    if trace is not None and not trace.is_trace:
        raise UsageError(f"--trace: {c.trace} is not a trace (lines need timestamp, input_length, "
                         "output_length); use --dataset for prompts")
    if trace is not None:
        trace = in_time_order(trace, sort=c.sort_trace)
    elif c.sort_trace:
        raise UsageError("--sort-trace needs --trace")
    dataset = load_dataset(c.dataset, skip_bad=c.skip_bad_lines) if c.dataset else None
    if dataset is not None and dataset.is_trace:
        raise UsageError(f"--dataset: {c.dataset} is a trace: use --trace to replay it")
    return WorkloadSpec(
        parse_length(c.input_tokens, flag="--input-tokens"),
        parse_length(c.output_tokens, flag="--output-tokens"),
        seed=c.seed, rate=c.rate, arrival=c.arrival, burstiness=c.burstiness, api=c.api,
        tokenizer=tokenizer, dataset=dataset, trace=trace, time_scale=c.time_scale,
        shared_prefix=parse_shared_prefix(c.shared_prefix) if c.shared_prefix else None,
        conversations=parse_conversations(c.conversations) if c.conversations else None,
        reasoning_effort=c.reasoning_effort, tools=int(c.tools))


def workload_summary(spec: WorkloadSpec) -> dict[str, Any]:
    """What a result file says about its workload: lengths, where prompts came from, and how
    input lengths were counted."""
    summary: dict[str, Any] = {
        "input_tokens": spec.input_tokens.text,
        "output_tokens": spec.output_tokens.text,
        "input_length_source": spec.input_length_source,
    }
    for name, data in (("dataset", spec.dataset), ("trace", spec.trace)):
        if data is not None:
            summary[name] = {"path": data.path, "format": data.format, "requests": len(data.entries),
                             "skipped_lines": len(data.skipped)}
    if spec.trace is not None:
        summary["time_scale"] = spec.time_scale
        if spec.trace.out_of_order:
            summary["trace"]["sorted_out_of_order"] = spec.trace.out_of_order
    if spec.shared_prefix is not None:
        summary["shared_prefix"] = dataclasses.asdict(spec.shared_prefix)
    if spec.conversations is not None:
        c = spec.conversations
        summary["conversations"] = {"sessions": c.sessions, "turns": c.turns,
                                    "think_time": dataclasses.asdict(c.think_time)}
    if spec.reasoning_effort or spec.tools:
        summary["reasoning_effort"], summary["tools"] = spec.reasoning_effort, spec.tools
    return summary

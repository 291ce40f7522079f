"""The client's CPU per streamed token event in each API format: chat (the peer) against
completions, OpenAI Responses and Anthropic Messages, in the same run.

Each stream is what the built-in server writes for one request of N tokens, one token per event
(the client's worst case: one classification per token), taken byte for byte from its framers. It
is fed to the client's reading path (SSE parser, the format's classifier, the accounting and the
final record) one event per read, as a socket delivers a stream paced by a decoder. CPU time
(``time.process_time``) per token event, median over repeats, and each format's ratio to chat.

With ``--against REV`` the chat stream is also read by the client of git revision REV (its ``src/``
extracted with ``git archive`` into a temporary folder), and by this tree's, each in fresh child
processes whose blocks alternate, so the cost of the format layer on the chat path shows as a ratio.

    .venv/bin/python benchmarks/client_formats.py                  # 1,000-token streams, 200 repeats
    .venv/bin/python benchmarks/client_formats.py --tokens 256 --repeats 500
    .venv/bin/python benchmarks/client_formats.py --against e9ed4d5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tokenpace.client.formats import api_format  # noqa: E402
from tokenpace.client.progress import Progress, finish_record  # noqa: E402
from tokenpace.client.responses import _on_events  # noqa: E402
from tokenpace.client.sse import SSEParser  # noqa: E402
from tokenpace.record import RequestRecord  # noqa: E402
from tokenpace.servers.engine import Sequence  # noqa: E402
from tokenpace.servers.formats import FORMATS  # noqa: E402
from tokenpace.servers.tokens import output_text_json  # noqa: E402

APIS = ("chat", "completions", "responses", "anthropic")


def server_stream(api: str, tokens: int) -> list[bytes]:
    """The built-in server's writes for one streamed request (usage asked for, as tokenpace asks)."""
    fmt = FORMATS[api]
    seq = Sequence(prompt_tokens=512, max_tokens=tokens, arrival_ns=0)
    framer = fmt.framer(api, "r-1", "m", 0, None)
    continuous = api in ("chat", "completions")  # vLLM's continuous_usage_stats: what tokenpace asks
    writes = list(framer.opening(seq, continuous))
    for i in range(tokens):
        seq.generated_tokens = i + 1
        if i == 0 and (first := framer.first(seq)):
            writes.append(first)
        writes.append(framer.token(output_text_json(i, 1), i + 1 == tokens, seq, continuous))
    writes += [data for data, _ in framer.closing(seq, True)]
    return writes


def read_cpu_s(api: str, writes: list[bytes], tokens: int) -> float:
    fmt = api_format(api)
    record, progress, parser = RequestRecord("r", 0), Progress(), SSEParser(strict=True)
    start = time.process_time()
    for stamp, data in enumerate(writes):
        _on_events(parser.feed(data), stamp, record, progress, fmt)
    finish_record(record, progress)
    elapsed = time.process_time() - start
    assert record.status == "ok" and record.output_tokens == tokens and len(record.chunk_ns) == tokens, api
    return elapsed


# Run by the child with another revision's src/ first on sys.path: its chat reading path, the same bytes.
_CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from tokenpace.client.progress import Progress, finish_record
from tokenpace.client.responses import _on_events
from tokenpace.client.sse import SSEParser
from tokenpace.record import RequestRecord
writes = [bytes.fromhex(w) for w in json.load(open(sys.argv[2]))]
tokens, repeats = int(sys.argv[3]), int(sys.argv[4])
out = []
for _ in range(repeats):
    record, progress, parser = RequestRecord("r", 0), Progress(), SSEParser(strict=True)
    start = time.process_time()
    for stamp, data in enumerate(writes):
        _on_events(parser.feed(data), stamp, record, progress)
    finish_record(record, progress)
    out.append((time.process_time() - start) / tokens * 1e6)
    assert record.status == "ok" and record.output_tokens == tokens
print(json.dumps(out))
"""


def against(rev: str, writes: list[bytes], tokens: int, repeats: int, blocks: int = 10) -> tuple[list, list]:
    """(this tree's, REV's) chat samples, taken in alternating blocks."""
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(root), "archive", rev, "src"], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        stream = Path(tmp, "stream.json")
        stream.write_text(json.dumps([w.hex() for w in writes]))
        here, there = [], []
        per_block = max(1, repeats // blocks)
        for _ in range(blocks):  # both in a fresh child process each time: the same conditions
            for src, samples in ((root / "src", here), (Path(tmp, "src"), there)):
                child = subprocess.run([sys.executable, "-c", _CHILD, str(src), str(stream), str(tokens),
                                        str(per_block)], check=True, capture_output=True, text=True)
                samples += json.loads(child.stdout)
    return here, there


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--against", metavar="REV", help="also read the chat stream with revision REV's client")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}; {args.tokens}-token streams, one event per read, "
          f"{args.repeats} repeats, formats interleaved")
    streams = {api: server_stream(api, args.tokens) for api in APIS}
    samples: dict[str, list[float]] = {api: [] for api in APIS}
    for _ in range(args.repeats):
        for api in APIS:  # interleaved, so that a noisy moment hits every format alike
            samples[api].append(read_cpu_s(api, streams[api], args.tokens) / args.tokens * 1e6)
    chat = statistics.median(samples["chat"])
    print(f"{'api':<12} {'bytes/token':>11} {'µs/token p50':>13} {'p10':>7} {'p90':>7} {'× chat':>7}")
    for api in APIS:
        values = sorted(samples[api])
        p10, p50, p90 = (values[int(q * (len(values) - 1))] for q in (0.1, 0.5, 0.9))
        size = sum(len(w) for w in streams[api]) / args.tokens
        print(f"{api:<12} {size:>11.0f} {p50:>13.2f} {p10:>7.2f} {p90:>7.2f} {p50 / chat:>7.2f}")
    if args.against:
        here, there = against(args.against, streams["chat"], args.tokens, args.repeats)
        a, b = statistics.median(here), statistics.median(there)
        print(f"chat, this tree: {a:.2f} µs/token p50 · revision {args.against}: {b:.2f} µs/token p50 · "
              f"ratio {a / b:.3f} (alternating blocks of {len(here) // 10}, {len(here)} samples each)")


if __name__ == "__main__":
    main()

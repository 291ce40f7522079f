"""The printed report: tables in our columns, which field fills each, and the notes."""

from __future__ import annotations

from .common import Row, Stat


def table(rows: list[Row]) -> str:
    header = ["tool", "TTFT mean", "p50", "p99", "TPOT mean", "p50", "p99", "ITL mean", "p50",
              "p99", "out tok/s", "req/s", "ok"]
    lines = [header]
    for r in rows:
        lines.append([f"{r.tool} {r.version}", *r.ttft_ms.cells(), *r.tpot_ms.cells(),
                      *r.itl_ms.cells(), f"{r.output_tokens_s:.1f}" if r.output_tokens_s else "—",
                      f"{r.requests_s:.2f}" if r.requests_s else "—", str(r.ok)])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = ["  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])
                     for i, c in enumerate(line)) for line in lines]
    out.insert(1, "-" * len(out[0]))
    return "\n".join(out)


def definition_notes(rows: list[Row]) -> list[str]:
    """Figures the table leaves out, each read from the tool's own result files."""
    notes = []
    for r in rows:
        raw = r.raw
        if r.tool == "guidellm":
            t = raw.get("time_per_output_token_ms (TTFT included)") or {}
            notes.append(f"guidellm time_per_output_token_ms (last token − start) / tokens, TTFT "
                         f"included: mean {t.get('mean', 0):.1f}, p50 {t.get('p50', 0):.1f} ms")
        elif r.tool == "aiperf":
            client = (raw.get("output_sequence_length_client") or {}).get("sum")
            server = (raw.get("usage_completion_tokens") or {}).get("sum")
            notes.append(f"aiperf output tokens: {client} re-tokenized on the client (used for its "
                         f"ITL and throughput) vs {server} in the server's usage")
        elif r.tool == "inference-perf":
            client = raw.get("output_len_client") or {}
            server = raw.get("output_tokens_server") or {}
            ntpot = raw.get("normalized_time_per_output_token") or {}
            n = r.ok or 0
            notes.append(f"inference-perf output tokens: {client.get('mean', 0) * n:.0f} "
                         f"re-tokenized on the client (used for its TPOT and throughput) vs "
                         f"{server.get('total')} in the server's usage; "
                         f"normalized_time_per_output_token (end − start) / tokens, TTFT included: "
                         f"mean {ntpot.get('mean', 0) * 1e3:.1f} ms")
    return notes


def names_table(rows: list[Row]) -> str:
    seen: dict[str, Row] = {}
    for r in rows:
        seen.setdefault(r.tool, r)
    return "\n".join(f"  {tool}: TTFT = {r.names.get('ttft')}; TPOT = {r.names.get('tpot')}; "
                     f"ITL = {r.names.get('itl')}; out tok/s = {r.names.get('output_tokens_s')}"
                     for tool, r in seen.items())


def row_from_dict(d: dict) -> Row:
    stats = {k: Stat(**d[k]) for k in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")}
    return Row(**{**d, **stats})


def report(result: dict) -> None:
    """Print the tables and notes of one result document (``peers.json``)."""
    rows = [row_from_dict(d) for d in result["rows"]]
    ours = [row_from_dict(d) for d in result["rows_our_definitions"]]
    w = result["workload"]
    print(f"\nWorkload: concurrency {w['concurrency']}, {w['requests']} requests, "
          f"{w['input_tokens']} prompt tokens, {w['output_tokens']} output tokens (ignore_eos), "
          f"{result['api']}; server: {result['server']}")
    print("Each figure under the tool's own definition, in our columns (ms):\n")
    print(table(rows))
    print("\nThe same per-request records under tokenpace's definitions (server token counts; "
          "ITL = chunk gaps where each chunk is one token):\n")
    print(table(ours))
    print("\nWhich field of each tool fills each column of the first table:")
    print(names_table(rows))
    print("\nFigures under other definitions, from the same result files:")
    for note in definition_notes(rows):
        print("  " + note)
    print(f"\nHub canary (HF_ENDPOINT) connections: {result['hub_canary_connections']}")
    for name, why in result["failures"].items():
        print(f"FAILED {name}: {why.splitlines()[0]}")
    print("\nCommands:")
    for r in rows:
        print(f"  {r.tool}: {r.command}")

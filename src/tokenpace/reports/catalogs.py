"""The simulator's catalogs as console tables (`tokenpace sim --list`)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from tokenpace.simulator import POLICIES, list_gpus, list_models, list_precisions


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, title_justify="left", box=None, header_style="bold", pad_edge=False)
    for i, col in enumerate(columns):
        left = i < 2 or col in ("aliases", "link", "what it does")
        table.add_column(col, justify="left" if left else "right", no_wrap=i < 2)
    return table


def render_catalogs(console: Console) -> None:
    gpus = _table("GPUs (dense peaks)", "id", "name", "BF16 TFLOPS", "FP8 TFLOPS", "FP4 TFLOPS",
                  "memory GB", "HBM TB/s", "link GB/s", "link", "aliases")
    for g in list_gpus():
        peaks = ("—" if t is None else f"{t:g}" for t in (g.fp8_tflops, g.fp4_tflops))
        gpus.add_row(g.id, g.name, f"{g.bf16_tflops:g}", *peaks,
                     f"{g.memory_gb:g}", f"{g.hbm_tb_s:g}", f"{g.link_gb_s:g}", g.link, ", ".join(g.aliases))
    console.print(gpus)

    models = _table("Models", "id", "name", "layers", "hidden", "heads/KV", "head dim", "intermediate",
                    "experts", "vocab", "params B")
    for m in list_models():
        experts = f"{m.num_experts} top-{m.experts_per_token}" if m.is_moe else "dense"
        params = f"{m.params / 1e9:.2f}" + (f" ({m.active_params / 1e9:.1f} active)" if m.is_moe else "")
        models.add_row(m.id, m.name, str(m.num_layers), str(m.hidden_size), f"{m.num_heads}/{m.num_kv_heads}",
                       str(m.head_dim), str(m.intermediate_size), experts, str(m.vocab_size), params)
    console.print(models)

    precisions = _table("Precisions (--quant, --kv-dtype)", "id", "name", "bits", "bytes/value",
                        "matmuls in", "aliases")
    for p in list_precisions():
        precisions.add_row(p.id, p.name, str(p.bits), f"{p.bytes_per_value:.4g}", p.compute, ", ".join(p.aliases))
    console.print(precisions)

    policies = _table("Scheduling policies (--policy)", "id", "what it does")
    for name, cls in POLICIES.items():
        policies.add_row(name, cls.summary)
    console.print(policies)

    from tokenpace.simulator.engines import list_engines

    engines = _table("Engine presets (--engine)", "id", "admission", "KV sizing", "limits (seqs/tokens)",
                     "step ms", "host µs/seq (overlapped)")
    for e in list_engines():
        limits = " or ".join(f"{r['max_num_seqs']}/{r['max_batched_tokens']}" for r in e.limits)
        if e.heuristic:
            limits = f"{e.heuristic} ({limits} without a workload)"
        engines.add_row(e.id, e.admission, f"{e.memory_model} × {e.memory_fraction:g}", limits,
                        f"{e.step_overhead_ms:g}", f"{e.host_seq_us:g}" if e.host_seq_us else "-")
    console.print(engines)
    console.print("[dim]Catalogs are JSON files in tokenpace/simulator/data; --model, --gpu, --quant, "
                  "--kv-dtype and --engine also take a path to a JSON file in the same layout (--model: or a Hugging "
                  "Face config.json).[/]")

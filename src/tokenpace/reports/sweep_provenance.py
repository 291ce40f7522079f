"""What a sweep swept, in words, from its document: the target (a URL, the built-in server, or a
simulated engine: model, GPUs, TP, precision, engine preset, step-time predictor), the workload,
the load, the SLO, the tool version and the date. The console header and the HTML page's header
and Configuration section all read it from here, so they say the same thing."""

from __future__ import annotations

from typing import Any

from tokenpace.errors import TokenpaceError
from tokenpace.metrics import parse_slo
from tokenpace.reports.validated import band_line
from tokenpace.sweep.findings import dig, limits_text


def provenance(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, text) rows, in reading order."""
    c = doc.get("config") or {}
    base = c.get("base") or {}
    rows = [("Target", target(doc))]
    engine = c.get("engine")
    if engine:
        rows += [("Engine preset", _preset(engine)),
                 ("Scheduling", _scheduling(engine) + (" (before the grid's changes)" if c.get("vary") else "")),
                 ("Step-time predictor", predictor(c))]
        if c.get("validated_error"):
            rows.append(("Validated error", band_line(c["validated_error"])))
    rows += [("Workload", workload(base)), ("Load", load(c)), ("SLO", slo(doc)),
             ("Price", f"${base['gpu_hour_usd']:g} per GPU-hour × {base.get('gpus', 1)} GPU"
              if base.get("gpu_hour_usd") is not None else "none given (cost in GPU-hours)"),
             ("Tool", f"tokenpace {dig(doc, 'tool', 'version') or '?'}"), ("Date", date(doc))]
    spread = scale_out(c)
    if spread:
        rows.insert(rows.index(("Load", load(c))) + 1, ("Scale-out", spread))
    return rows


def scale_out(c: dict[str, Any]) -> str | None:
    """How the steps ran, when not one after another from one process: None otherwise."""
    fan = c.get("fan_out") or {}
    if fan.get("backend") == "processes":
        return f"steps simulated in {fan['jobs']} processes ({fan['tasks']} tasks)"
    if fan.get("backend") == "ray":
        return f"steps simulated as Ray tasks on {fan['address']} ({fan['tasks']} tasks)"
    base = c.get("base") or {}
    workers = base.get("workers")
    if base.get("ray"):
        actors = f"{workers} Ray actors" if workers else "Ray actors (one per node)"
        return f"each step's load from {actors} on {base['ray']}"
    if workers is not None and workers != 1:
        return "each step's load from " + ("worker processes (auto)" if workers == 0 else f"{workers} worker processes")
    return None


def headline(doc: dict[str, Any]) -> str:
    """One line: target · workload · SLO · tool and date."""
    base = (doc.get("config") or {}).get("base") or {}
    return " · ".join((target(doc), workload(base), f"SLO {slo(doc)}",
                       f"tokenpace {dig(doc, 'tool', 'version') or '?'}, {date(doc, short=True)}"))


def target(doc: dict[str, Any]) -> str:
    c = doc.get("config") or {}
    engine = c.get("engine")
    if engine:
        kv = engine.get("kv_cache_dtype")
        gpus = engine.get("tp") or 1
        return (f"simulated {engine.get('model')} on {gpus}× {engine.get('gpu')} (TP {gpus}), "
                f"{engine.get('weights')} weights, {kv} KV cache")
    base = c.get("base") or {}
    model = base.get("model") or next((dig(s, "target", "model") for s in doc.get("steps") or []
                                       if dig(s, "target", "model")), None)
    where = base.get("url") or f"the built-in server ({base.get('builtin_timing', 'sim')} timing)"
    api = f"{base.get('api', 'chat')} API, {'streaming' if base.get('stream', True) else 'not streaming'}"
    return f"{where}, model {model or 'as served'}, {api}"


def _preset(engine: dict[str, Any]) -> str:
    preset = engine.get("engine") or {}
    if not preset:
        return "none: the simulator's own defaults"
    said = ", ".join(f"{k} {v}" for k, v in (preset.get("set") or {}).items())
    return f"{preset.get('preset')}" + (f" (sets {said})" if said else "")


def _scheduling(engine: dict[str, Any]) -> str:
    return (f"{engine.get('policy')}, max {engine.get('max_num_seqs')} sequences, "
            f"{engine.get('max_batched_tokens')} tokens per step, admission {engine.get('admission')}"
            + (", prefix caching" if engine.get("prefix_caching") else "")
            + (", speculative decoding" if engine.get("spec_decode") else ""))


def predictor(c: dict[str, Any]) -> str:
    if c.get("calibration"):
        return f"roofline calibrated from {c['calibration']}"
    engine = c.get("engine") or {}
    if engine.get("step_predictor") == "kernels":
        from tokenpace.simulator.kernels.tables import kernel_backend

        tables = kernel_backend((engine.get("engine") or {}).get("preset"))
        return (f"kernels: aiconfigurator-core's measured kernel tables ({tables}'s, {engine.get('gpu')}); "
                "what they leave out priced as the roofline does")
    roof = engine.get("roofline") or {}
    fixed = [f"{k.upper()} {roof[k]:g}" for k in ("mfu", "mbu") if roof.get(k) is not None]
    catalog = "efficiencies from the catalog (data/efficiency.json, efficiency_measured.json" + (
        f" + {c['engine']['efficiency_file']})" if (c.get("engine") or {}).get("efficiency_file") else ")")
    if len(fixed) == 2:
        return f"roofline, {' and '.join(fixed)} given"
    return "roofline, " + (f"{fixed[0]} given, the rest " if fixed else "") + catalog


def workload(base: dict[str, Any]) -> str:
    if base.get("dataset"):
        said = f"dataset {base['dataset']}"
        if base.get("output_tokens"):
            said += f", output {base['output_tokens']} tokens"
    else:
        said = f"input {base.get('input_tokens')} tokens, output {base.get('output_tokens')} tokens"
    if base.get("shared_prefix"):
        said += f", shared prefix {base['shared_prefix']}"
    if not base.get("ignore_eos", True):
        said += " (the model may stop early)"
    return said


def load(c: dict[str, Any]) -> str:
    if c.get("axis") == "concurrency":
        loads = "concurrency " + ", ".join(f"{v:g}" for v in c.get("loads") or [])
    elif c.get("auto"):
        loads = "request rate chosen automatically (--rate auto)"
    else:
        loads = "request rates " + ", ".join(f"{v:g}" for v in c.get("loads") or []) + " req/s"
    if c.get("axis") == "rate":
        loads += f", {dig(c, 'base', 'arrival') or 'poisson'} arrivals"
    bound = (f"{c['requests_per_step']} requests per step" if c.get("requests_per_step")
             else f"{c.get('duration_per_step_s'):g} s per step" + (" (virtual)" if c.get("simulated") else ""))
    grid = "; grid: " + " × ".join(f"{v['key']} {', '.join(v['values'])}" for v in c["vary"]) if c.get("vary") else ""
    return f"{loads}; {bound}{grid}"


def slo(doc: dict[str, Any]) -> str:
    text = doc.get("slo") or dig(doc, "config", "base", "slo")
    if not text:
        return "none given (recommendations per preset only)"
    try:
        return f"{text} ({limits_text(parse_slo(str(text)))})"
    except TokenpaceError:
        return str(text)


def date(doc: dict[str, Any], *, short: bool = False) -> str:
    if doc.get("started_utc"):
        return f"started {doc['started_utc']}"
    if dig(doc, "config", "simulated"):
        return ("no clock read (simulated)" if short else
                "none: a simulated sweep reads no clock (the same inputs give the same file)")
    return "start time not recorded"

"""Typed catalogs of GPUs, models and precisions: built-in JSON data that a user can extend.

Every ``get_*`` takes a catalog name (case-insensitive, aliases allowed) or a path to a JSON file in
the same layout; ``get_model`` also takes a Hugging Face ``config.json`` (or a folder holding one)
or a GGUF model file, and ``get_precision`` a GGUF file (its weights' measured bits per weight).
``get_gpu`` takes any hardware described by peak FLOP/s and memory bandwidth (a CPU too).
``extra`` adds a user's catalog file to the built-in entries (its entries win on the same id).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from tokenpace.errors import UsageError
from tokenpace.simulator.catalog._files import (
    build, builtin_entries, entries_of, find, looks_like_path, read_json,
)
from tokenpace.simulator.catalog.gpu import GPU
from tokenpace.simulator.catalog.model import ModelSpec, experts_touched, from_hf_config
from tokenpace.simulator.catalog.precision import Precision

__all__ = [
    "GPU", "ModelSpec", "Precision",
    "get_gpu", "get_model", "get_precision",
    "list_gpus", "list_models", "list_precisions",
    "is_gguf_file", "load_model_file", "experts_touched",
]


def _merge(builtin: list, extra: list) -> list:
    ids = {e.id for e in extra}
    return [e for e in builtin if e.id not in ids] + extra


@lru_cache(maxsize=None)
def _builtin(kind: str, make: Any, label: str) -> tuple:
    """The built-in catalog's objects (frozen dataclasses), built once per process."""
    return tuple(build(e, make, label) for e in builtin_entries(kind))


def list_gpus(extra: str | Path | None = None) -> list[GPU]:
    items = list(_builtin("gpus", GPU.from_dict, "gpu"))
    if extra is not None:
        items = _merge(items, [build(e, GPU.from_dict, "gpu") for e in entries_of(read_json(extra), "gpus")])
    return items


def list_precisions(extra: str | Path | None = None) -> list[Precision]:
    items = list(_builtin("precisions", Precision.from_dict, "precision"))
    if extra is not None:
        more = entries_of(read_json(extra), "precisions")
        items = _merge(items, [build(e, Precision.from_dict, "precision") for e in more])
    return items


def list_models(extra: str | Path | None = None) -> list[ModelSpec]:
    items = list(_builtin("models", ModelSpec.from_dict, "model"))
    if extra is not None:
        items = _merge(items, load_model_file(extra))
    return items


def load_model_file(path: str | Path) -> list[ModelSpec]:
    """Models from a catalog-layout JSON file, or one model from a Hugging Face config.json or a
    GGUF file."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    if is_gguf_file(p):
        from tokenpace.simulator.catalog.gguf import load_gguf

        return [load_gguf(p)[0]]
    data = read_json(p)
    if isinstance(data, dict) and ("num_hidden_layers" in data or "text_config" in data):
        model_id = p.parent.name if p.name == "config.json" and p.parent.name else p.stem
        try:
            return [from_hf_config(data, model_id)]
        except (KeyError, TypeError, ValueError) as e:
            raise UsageError(f"{p}: not a usable decoder config.json (missing {e})") from e
    return [build(e, ModelSpec.from_dict, "model") for e in entries_of(data, "models")]


def get_gpu(name: str | GPU, extra: str | Path | None = None) -> GPU:
    if isinstance(name, GPU):
        return name
    if looks_like_path(name):
        return [build(e, GPU.from_dict, "gpu") for e in entries_of(read_json(name), "gpus")][0]
    return find(list_gpus(extra), name, "GPU")


def get_precision(name: str | Precision, extra: str | Path | None = None) -> Precision:
    if isinstance(name, Precision):
        return name
    if is_gguf_file(name):
        from tokenpace.simulator.catalog.gguf import load_gguf

        return load_gguf(name, "--quant")[1]
    if looks_like_path(name):
        entries = entries_of(read_json(name), "precisions")
        return [build(e, Precision.from_dict, "precision") for e in entries][0]
    return find(list_precisions(extra), name, "precision")


def get_model(name: str | ModelSpec, extra: str | Path | None = None) -> ModelSpec:
    if isinstance(name, ModelSpec):
        return name
    if looks_like_path(name):
        return load_model_file(name)[0]
    return find(list_models(extra), name, "model")


def is_gguf_file(path: str | Path) -> bool:
    """A ``.gguf`` name, or an existing file that starts with GGUF's magic bytes."""
    from tokenpace.gguf import is_gguf

    return str(path).lower().endswith(".gguf") or (Path(path).is_file() and is_gguf(path))

"""Reading catalog JSON: the built-in files shipped as package data, and a user's own files.

A catalog file is either ``{"<kind>": [entry, ...]}`` (the built-in layout), a bare list of entries,
or a single entry object. Names are matched case-insensitively against ``id`` and ``aliases``, with
``_`` and ``-`` treated alike, so ``H100_SXM`` finds ``h100-sxm``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from tokenpace.errors import UsageError

T = TypeVar("T")


def normalize(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def read_json(path: str | Path) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise UsageError(f"cannot read catalog file {path}: {e.strerror or e}") from e
    except json.JSONDecodeError as e:
        raise UsageError(f"{path} is not valid JSON: {e}") from e


def builtin_entries(kind: str, file: str | None = None) -> list[dict[str, Any]]:
    """The entries of the built-in ``data/<kind>.json`` (kind: gpus, models, precisions), or of
    ``data/<file>.json`` in the same layout. Read once per process (a search prices thousands of
    candidates): a new list, the entries shared and not to be changed."""
    return list(_builtin_entries(kind, file or kind))


@lru_cache(maxsize=None)
def _builtin_entries(kind: str, file: str) -> tuple[dict[str, Any], ...]:
    text = resources.files("tokenpace.simulator").joinpath("data").joinpath(f"{file}.json").read_text("utf-8")
    return tuple(entries_of(json.loads(text), kind))


def entries_of(data: Any, kind: str) -> list[dict[str, Any]]:
    if isinstance(data, dict) and kind in data:
        data = data[kind]
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not all(isinstance(e, dict) for e in data):
        raise UsageError(f"a {kind} catalog must be an object, a list of objects, or {{{kind!r}: [...]}}")
    return data


def looks_like_path(name: str) -> bool:
    return name.endswith((".json", ".gguf")) or "/" in name or "\\" in name or Path(name).is_dir()


def build(entry: dict[str, Any], make: Callable[[dict[str, Any]], T], kind: str) -> T:
    try:
        return make(entry)
    except (KeyError, TypeError, ValueError) as e:
        label = entry.get("id") or entry.get("name") or "?"
        raise UsageError(f"invalid {kind} entry {label!r}: {e!r}") from e


def find(entries: list[T], name: str, kind: str) -> T:
    """The entry whose id or alias matches ``name``; a UsageError naming the choices otherwise."""
    key = normalize(name)
    for e in entries:
        if key == normalize(e.id) or key in (normalize(a) for a in e.aliases):  # type: ignore[attr-defined]
            return e
    choices = ", ".join(e.id for e in entries)  # type: ignore[attr-defined]
    raise UsageError(f"unknown {kind} {name!r}; known: {choices} (or give a path to a JSON file)")

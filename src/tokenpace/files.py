"""Writing a file whole or not at all: a temporary file beside it, then a rename. A full disk (or a
file size limit, a read-only file system) leaves the old file, or none, never a torn one, and is
one NotSaved error (exit 7) naming the file."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from tokenpace.errors import NotSaved, UsageError


def write_whole(path: str | Path, data: bytes | Iterable[bytes], *, what: str = "") -> Path:
    """``what`` names the file in the error (e.g. "the result file"). ``data`` may come in pieces
    (an iterable of bytes, e.g. one JSONL line each): written one after another, never joined in
    memory, and still renamed into place only once whole."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # two processes never share one
    try:
        if isinstance(data, (bytes, bytearray, memoryview)):
            tmp.write_bytes(data)
        else:
            # A 1 MiB buffer: pieces of a few kilobytes (a simulated record's line) each went to
            # the kernel through the default 8 KiB one, a system call every other line (20,000
            # lines: 0.10 -> 0.03 CPU-s).
            with open(tmp, "wb", buffering=1 << 20) as fh:
                for piece in data:
                    fh.write(piece)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise NotSaved(f"cannot write {what + ' ' if what else ''}{path}: {exc.strerror or exc}") from None
    except BaseException:  # Ctrl-C mid-write: no half-written temporary file either
        tmp.unlink(missing_ok=True)
        raise
    return path


def cache_dir(name: str, override_env: str) -> Path:
    """A cache of tokenpace's own (rebuilt when missing, never needed for correctness):
    ``$<override_env>`` if set, else ``name/`` in ``$TOKENPACE_CACHE`` (the folder
    scripts/llama_engine.py builds the engine in) or ``~/.cache/tokenpace``."""
    if os.environ.get(override_env):
        return Path(os.environ[override_env]).expanduser()
    env = os.environ.get("TOKENPACE_CACHE")
    return (Path(env).expanduser() if env else Path.home() / ".cache" / "tokenpace") / name


def open_run_file(path: str | Path) -> BinaryIO:
    """A result or records file opened for reading; a one-line UsageError when it cannot be."""
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise UsageError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise UsageError(f"{path} is a directory: give a result .json or a records .jsonl") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None

"""Read a GGUF model file's tokenizer metadata (vocabulary, merges, model type); and, for the
simulator, its header: every key/value and the tensor table (names, shapes, bytes).

GGUF (llama.cpp's model format) starts with a small header and a key/value section; the tensor
table and the tensors follow, and a model file is gigabytes. This reader parses the header, the
key/value section and (on request) the tensor table only (little-endian, versions 2 and 3) and
never reads tensor data, so reading a 70B model's vocabulary costs a few megabytes of I/O. Layout,
from the GGUF specification:

    magic "GGUF" · uint32 version · uint64 tensor_count · uint64 kv_count
    kv_count × (string key · uint32 value_type · value)
    tensor_count × (string name · uint32 n_dims · n_dims × uint64 dim · uint32 type · uint64 offset)
    padding to general.alignment (default 32) · tensor data (offsets are relative to its start)
    string = uint64 length · UTF-8 bytes;  array = uint32 element_type · uint64 count · elements
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from tokenpace.errors import UsageError

GGUF_MAGIC = b"GGUF"
# value_type → struct format of one scalar (8: string, 9: array are handled apart).
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
# Keys we keep: the tokenizer's and the architecture (for messages). Others are skipped unparsed.
_WANTED_PREFIXES = ("tokenizer.", "general.architecture", "general.name")


@dataclass
class GGUFVocab:
    path: str
    model: str  # tokenizer.ggml.model: "gpt2" (byte-level BPE), "llama" (SentencePiece), ...
    tokens: list[str]
    merges: list[str] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    token_types: list[int] = field(default_factory=list)  # 1 normal, 2 unknown, 3 control, 6 byte
    pre: str | None = None  # tokenizer.ggml.pre: the pre-tokenizer ("llama-bpe", "qwen2", ...)
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class GGUFTensor:
    name: str
    shape: tuple[int, ...]  # GGUF order: the row length first
    ggml_type: int
    nbytes: int  # from the offsets: the tensor's bytes plus at most alignment - 1 of padding

    @property
    def elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass
class GGUFHeader:
    path: str
    metadata: dict[str, Any]  # every key/value
    tensors: list[GGUFTensor]


def read_gguf_header(path: str | Path, *, label: str, skip: tuple[str, ...] = ()) -> GGUFHeader:
    """The key/values (but those whose key starts with one of ``skip``) and the tensor table of a
    GGUF file; ``label`` starts every error message (the flag that named the file). Tensor sizes
    come from consecutive offsets, so any quantization type is measured without a table of block
    sizes."""
    name = f"{label}: {path}"
    try:
        with open(path, "rb") as fh:
            meta, tensor_count = _read_kv(fh, name, wanted=("",), skip=skip)
            raw = [_tensor_info(fh, name) for _ in range(tensor_count)]
            align = int(meta.get("general.alignment") or 32)
            data_start = -(-fh.tell() // align) * align
            file_size = os.fstat(fh.fileno()).st_size
    except OSError as exc:
        raise UsageError(f"{name}: cannot read: {exc.strerror or exc}") from None
    ends = sorted({off for *_, off in raw} | {file_size - data_start})
    next_offset = dict(zip(ends, ends[1:]))
    tensors = [GGUFTensor(t, shape, kind, next_offset.get(off, off) - off) for t, shape, kind, off in raw]
    return GGUFHeader(path=str(path), metadata=meta, tensors=tensors)


def _tensor_info(fh: BinaryIO, name: str) -> tuple[str, tuple[int, ...], int, int]:
    tensor = _string(fh, name)
    (n_dims,) = _unpack(fh, "<I", name)
    if n_dims > 8:
        raise UsageError(f"{name}: tensor {tensor!r} has {n_dims} dimensions (corrupt file?)")
    shape = _unpack(fh, f"<{n_dims}Q", name)
    ggml_type, offset = _unpack(fh, "<IQ", name)
    return tensor, tuple(shape), ggml_type, offset


def read_gguf_vocab(path: str | Path) -> GGUFVocab:
    """The tokenizer of a GGUF file; UsageError naming the problem for anything else."""
    try:
        with open(path, "rb") as fh:
            meta, _ = _read_kv(fh, f"--tokenizer: {path}")
    except OSError as exc:
        raise UsageError(f"--tokenizer: cannot read {path}: {exc}") from None
    tokens = meta.get("tokenizer.ggml.tokens")
    if not tokens:
        raise UsageError(f"--tokenizer: {path} is a GGUF file without a vocabulary "
                         "(no tokenizer.ggml.tokens)")
    return GGUFVocab(path=str(path), model=str(meta.get("tokenizer.ggml.model", "")), tokens=tokens,
                     merges=list(meta.get("tokenizer.ggml.merges") or []),
                     scores=list(meta.get("tokenizer.ggml.scores") or []),
                     token_types=list(meta.get("tokenizer.ggml.token_type") or []),
                     pre=meta.get("tokenizer.ggml.pre"), metadata=meta)


def is_gguf(path: str | Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == GGUF_MAGIC
    except OSError:
        return False


def _read_kv(fh: BinaryIO, name: str, wanted: tuple[str, ...] = _WANTED_PREFIXES,
             skip: tuple[str, ...] = ()) -> tuple[dict[str, Any], int]:
    """The key/values whose key starts with one of ``wanted`` and none of ``skip``, and the tensor
    count. ``name`` starts every error message ("--tokenizer: PATH")."""
    if fh.read(4) != GGUF_MAGIC:
        raise UsageError(f"{name} is not a GGUF file")
    (version,) = _unpack(fh, "<I", name)
    if version not in (2, 3):
        raise UsageError(f"{name}: GGUF version {version} is not supported (2 and 3 are)")
    tensor_count, kv_count = _unpack(fh, "<QQ", name)
    meta: dict[str, Any] = {}
    for _ in range(kv_count):
        key = _string(fh, name)
        (vtype,) = _unpack(fh, "<I", name)
        keep = key.startswith(wanted) and not (skip and key.startswith(skip))
        meta_value = _value(fh, vtype, name, keep=keep)
        if keep:
            meta[key] = meta_value
    return meta, tensor_count


def _value(fh: BinaryIO, vtype: int, name: str, *, keep: bool) -> Any:
    if vtype in _SCALARS:
        return _unpack(fh, _SCALARS[vtype], name)[0]
    if vtype == _STRING:
        return _string(fh, name)
    if vtype == _ARRAY:
        etype, count = _unpack(fh, "<IQ", name)
        if etype in _SCALARS:  # one read for the whole array
            fmt = _SCALARS[etype]
            size = struct.calcsize(fmt)
            data = _read(fh, size * count, name)
            return list(struct.unpack(f"<{count}{fmt[1]}", data)) if keep else None
        if etype == _STRING:
            if not keep:  # seek over them: a 262k-token vocabulary skips in a fraction of the time
                for _ in range(count):
                    fh.seek(_string_length(fh, name), 1)
                return None
            return [_string(fh, name) for _ in range(count)]
        if etype == _ARRAY:
            return [_value(fh, _ARRAY, name, keep=keep) for _ in range(count)]
    raise UsageError(f"{name}: unknown GGUF value type {vtype} (corrupt file?)")


def _string(fh: BinaryIO, name: str) -> str:
    return _read(fh, _string_length(fh, name), name).decode("utf-8", errors="replace")


def _string_length(fh: BinaryIO, name: str) -> int:
    (length,) = _unpack(fh, "<Q", name)
    if length > 1 << 30:
        raise UsageError(f"{name}: implausible string length {length} (corrupt file?)")
    return length


def _unpack(fh: BinaryIO, fmt: str, name: str) -> tuple:
    return struct.unpack(fmt, _read(fh, struct.calcsize(fmt), name))


def _read(fh: BinaryIO, n: int, name: str) -> bytes:
    data = fh.read(n)
    if len(data) != n:
        raise UsageError(f"{name}: truncated GGUF header")
    return data

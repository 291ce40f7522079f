"""A storage format for weights or KV cache: bytes per value (scales included) and compute format.

``bits`` may be fractional: a mixed-precision file (llama.cpp's Q4_K_M mixes 4.5- and 6.56-bit
blocks) is described by its mean bits per weight, measured from the file (``catalog/gguf.py``).
``embedding_bits``: the embedding and LM head, when they are not kept in 16 bits (GGUF files
quantize them too); None: 16 bits, as quantized safetensors checkpoints ship them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


COMPUTES = ("bf16", "fp8", "fp4")  # tensor-core formats; each falls back to BF16 on GPUs without it


@dataclass(frozen=True, slots=True)
class Precision:
    id: str
    name: str
    bits: float
    group_size: int | None = None  # values sharing one scale; None: per channel (negligible)
    scale_bytes: float = 0.0
    compute: str = "bf16"  # "bf16", "fp8" or "fp4": the format matmuls run in
    aliases: tuple[str, ...] = field(default=())
    embedding_bits: float | None = None  # None: 16

    @property
    def embedding_bytes_per_value(self) -> float:
        return 2.0 if self.embedding_bits is None else self.embedding_bits / 8

    @property
    def bytes_per_value(self) -> float:
        """E.g. int4 with a 2-byte scale per 128 weights: 0.5 + 2/128 = 0.515625 bytes."""
        scales = self.scale_bytes / self.group_size if self.group_size else 0.0
        return self.bits / 8 + scales

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Precision:
        group = d.get("group_size")
        compute = str(d.get("compute", "bf16"))
        emb = d.get("embedding_bits")
        if compute not in COMPUTES:
            raise ValueError(f"compute must be one of {', '.join(map(repr, COMPUTES))}, not {compute!r}")
        return cls(
            id=str(d["id"]),
            name=str(d.get("name", d["id"])),
            bits=_number(d["bits"]),
            group_size=None if group is None else int(group),
            scale_bytes=float(d.get("scale_bytes", 0.0)),
            compute=compute,
            aliases=tuple(d.get("aliases", ())),
            embedding_bits=None if emb is None else _number(emb),
        )

    def to_dict(self) -> dict[str, Any]:
        d = {
            "id": self.id, "name": self.name, "aliases": list(self.aliases), "bits": self.bits,
            "group_size": self.group_size, "scale_bytes": self.scale_bytes, "compute": self.compute,
        }
        if self.embedding_bits is not None:
            d["embedding_bits"] = self.embedding_bits
        return d


def _number(value: Any) -> float:
    """A positive finite bit count; whole numbers stay ints (``16``, not ``16.0``, in documents)."""
    x = float(value)
    if not (x > 0 and x < 1e3):
        raise ValueError(f"bits must be a positive number, not {value!r}")
    return int(x) if x.is_integer() else x

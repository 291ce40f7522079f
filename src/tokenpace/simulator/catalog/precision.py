"""A storage format for weights or KV cache: bytes per value (scales included) and compute format."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Precision:
    id: str
    name: str
    bits: int
    group_size: int | None = None  # values sharing one scale; None: per channel (negligible)
    scale_bytes: float = 0.0
    compute: str = "bf16"  # "bf16" or "fp8": the format matmuls run in
    aliases: tuple[str, ...] = field(default=())

    @property
    def bytes_per_value(self) -> float:
        """E.g. int4 with a 2-byte scale per 128 weights: 0.5 + 2/128 = 0.515625 bytes."""
        scales = self.scale_bytes / self.group_size if self.group_size else 0.0
        return self.bits / 8 + scales

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Precision:
        group = d.get("group_size")
        compute = str(d.get("compute", "bf16"))
        if compute not in ("bf16", "fp8"):
            raise ValueError(f"compute must be 'bf16' or 'fp8', not {compute!r}")
        return cls(
            id=str(d["id"]),
            name=str(d.get("name", d["id"])),
            bits=int(d["bits"]),
            group_size=None if group is None else int(group),
            scale_bytes=float(d.get("scale_bytes", 0.0)),
            compute=compute,
            aliases=tuple(d.get("aliases", ())),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "name": self.name, "aliases": list(self.aliases), "bits": self.bits,
            "group_size": self.group_size, "scale_bytes": self.scale_bytes, "compute": self.compute,
        }

"""A GPU as the step-time model sees it: peak tensor throughput, HBM size and bandwidth, its link.

Any other hardware is described the same way, in generic words a user's JSON may use instead:
``peak_tflops`` (dense peak for matmuls, for ``bf16_tflops``) and ``bandwidth_gb_s`` (memory
bandwidth in 1e9 bytes/s, for ``hbm_tb_s``). A CPU is one: its peak is cores × clock × FLOPs per
cycle, its bandwidth the DRAM's (docs/hardware-cpu-2core.json).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

GIB = 1 << 30


@dataclass(frozen=True, slots=True)
class GPU:
    id: str
    name: str
    bf16_tflops: float  # dense peak
    fp8_tflops: float | None  # dense peak; None: no FP8 tensor cores
    memory_gb: float  # read as GiB, see data/gpus.json
    hbm_tb_s: float  # 1e12 bytes/s
    link_gb_s: float  # bidirectional aggregate, 1e9 bytes/s
    link: str = "nvlink"
    aliases: tuple[str, ...] = field(default=())
    cuda_memory_gib: float | None = None  # total memory as CUDA reports it (None: 0.99 × memory_gb)
    fp4_tflops: float | None = None  # dense peak of FP4 (NVFP4) tensor cores; None: none (Blackwell has them)

    @property
    def cuda_memory_bytes(self) -> int:
        """What an engine sizes its memory from: CUDA's total, below the nominal size."""
        gib = self.cuda_memory_gib if self.cuda_memory_gib is not None else 0.99 * self.memory_gb
        return int(gib * GIB)

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gb * GIB)

    @property
    def hbm_bytes_s(self) -> float:
        return self.hbm_tb_s * 1e12

    @property
    def link_bytes_s_per_direction(self) -> float:
        return self.link_gb_s * 1e9 / 2

    def peak_flops(self, compute: str) -> float:
        """Peak FLOP/s for matmuls in ``compute`` ("bf16", "fp8" or "fp4"); FP8 and FP4 fall back
        to BF16 on a GPU without such units (weights dequantized, as W4A16/W8A16 kernels run)."""
        if compute == "fp4" and self.fp4_tflops:
            return self.fp4_tflops * 1e12
        if compute == "fp8" and self.fp8_tflops:
            return self.fp8_tflops * 1e12
        return self.bf16_tflops * 1e12

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GPU:
        fp8, fp4 = d.get("fp8_tflops"), d.get("fp4_tflops")
        peak = d["bf16_tflops"] if "bf16_tflops" in d or "peak_tflops" not in d else d["peak_tflops"]
        bandwidth = d["hbm_tb_s"] if "hbm_tb_s" in d or "bandwidth_gb_s" not in d else float(d["bandwidth_gb_s"]) / 1e3
        gpu = cls(
            id=str(d["id"]),
            name=str(d.get("name", d["id"])),
            bf16_tflops=float(peak),
            fp8_tflops=None if fp8 is None else float(fp8),
            memory_gb=float(d["memory_gb"]),
            hbm_tb_s=float(bandwidth),
            link_gb_s=float(d.get("link_gb_s", 64.0)),
            link=str(d.get("link", "pcie")),
            aliases=tuple(d.get("aliases", ())),
            cuda_memory_gib=None if d.get("cuda_memory_gib") is None else float(d["cuda_memory_gib"]),
            fp4_tflops=None if fp4 is None else float(fp4),
        )
        for label, value in (("peak FLOP/s", gpu.bf16_tflops), ("memory", gpu.memory_gb),
                             ("bandwidth", gpu.hbm_tb_s), ("link bandwidth", gpu.link_gb_s)):
            if not (0 < value < float("inf")):
                raise ValueError(f"{label} must be a positive number, not {value}")
        return gpu

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "name": self.name, "aliases": list(self.aliases),
            "bf16_tflops": self.bf16_tflops, "fp8_tflops": self.fp8_tflops,
            "memory_gb": self.memory_gb, "hbm_tb_s": self.hbm_tb_s,
            "link_gb_s": self.link_gb_s, "link": self.link, "cuda_memory_gib": self.cuda_memory_gib,
            **({"fp4_tflops": self.fp4_tflops} if self.fp4_tflops is not None else {}),
        }

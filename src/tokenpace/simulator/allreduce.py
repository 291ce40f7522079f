"""What a step's tensor-parallel all-reduces cost on one GPU (``roofline.RooflinePredictor``'s).

Two all-reduces per layer under TP, each of tokens × hidden 16-bit values. Where the efficiency
catalog has a measured curve for the GPU count (``allreduce_bus_bandwidth``'s ``by_message``: the
latency by message size), that curve prices each message, interpolated linearly (past its largest
message, that one's time scaled by size); its smallest message's latency is the latency each
all-reduce pays, the rest of a message's time its link time. Elsewhere (other GPU counts, GPUs
without tables) a ring all-reduce: 2(t−1)/t × the message's bytes over one direction of the link
at the catalog's bus-bandwidth efficiency, after a latency of base + 2(t−1) hops. The measured
curve runs up to 2.5 times slower than that line for 0.5-32 MB, a decode step's messages (RESULTS
5l). ``step_price`` adds them up: ``link_s`` per step, ``count`` × ``latency_s`` (or a calibration's
``allreduce_latency_s`` in its place).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from tokenpace.simulator.catalog import GPU, ModelSpec
from tokenpace.simulator.catalog.efficiency import Efficiency


@dataclass(frozen=True, slots=True)
class AllReduceCost:
    count: int  # all-reduces per step (0 without TP)
    latency_s: float  # each one's fixed latency
    hidden: int  # values per token in a message
    line_s_per_token: float  # the ring's link seconds per token of a message (no curve)
    sizes: tuple[float, ...] = ()  # the measured curve's message sizes (values), ascending
    seconds: tuple[float, ...] = ()  # and its latencies; () where none is measured at this TP

    @classmethod
    def of(cls, model: ModelSpec, gpu: GPU, tp: int, eff: Efficiency) -> AllReduceCost:
        if tp <= 1:
            return cls(0, eff.allreduce_base_latency_s, model.hidden_size, 0.0)
        ring = 2 * (tp - 1) / tp
        line = ring * model.hidden_size * 2 / (gpu.link_bytes_s_per_direction * eff.allreduce_bus_bandwidth)
        curve = eff.allreduce_curve(tp)
        if curve is None:
            latency = eff.allreduce_base_latency_s + 2 * (tp - 1) * eff.allreduce_hop_latency_s
            return cls(2 * model.num_layers, latency, model.hidden_size, line)
        sizes, seconds = tuple(map(float, curve[0])), tuple(curve[1])
        return cls(2 * model.num_layers, seconds[0], model.hidden_size, line, sizes, seconds)

    @property
    def measured(self) -> bool:
        return bool(self.sizes)

    def link_s(self, tokens: int) -> float:
        """One all-reduce's seconds beyond its latency for a step of ``tokens`` tokens."""
        if not self.sizes:
            return tokens * self.line_s_per_token
        sizes, secs = self.sizes, self.seconds
        x = tokens * self.hidden
        if x >= sizes[-1]:
            return secs[-1] * x / sizes[-1] - self.latency_s
        i = bisect.bisect_right(sizes, x)
        if i == 0:
            return 0.0
        x0, x1 = sizes[i - 1], sizes[i]
        return secs[i - 1] + (secs[i] - secs[i - 1]) * (x - x0) / (x1 - x0) - self.latency_s

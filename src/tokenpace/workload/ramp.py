"""`--ramp SECONDS`: the load rises linearly to its target, then holds. One rule for bench's load
generator and the simulator.

- Open loop: the arrival rate rises linearly from 0 to the target rate over the ramp. The planned
  arrivals (constant, Poisson or gamma at the target rate) are moved by the time change that turns
  a process at the full rate into one at the ramped rate: an arrival planned at ``u`` seconds goes
  out at ``t`` where the ramped rate's cumulative count reaches the full rate's at ``u``:
  ``r t² / (2R) = r u`` for ``t < R``, so ``t = sqrt(2 R u)`` for ``u < R/2``, then ``t = u + R/2``.
  The plan's randomness is kept: only its clock is bent.
- Closed loop: client k of C starts at ``k R / C`` (concurrency rises by one every ``R / C``).

The steady-state window (``tokenpace.runner.steady``) starts at the end of the ramp.
"""

from __future__ import annotations

import math


def ramped_offset_s(offset_s: float, ramp_s: float) -> float:
    """When an arrival planned at ``offset_s`` (at the full rate) goes out under a linear ramp."""
    if ramp_s <= 0:
        return offset_s
    if offset_s < ramp_s / 2:
        return math.sqrt(2.0 * ramp_s * max(offset_s, 0.0))
    return offset_s + ramp_s / 2


def client_start_s(client: int, concurrency: int, ramp_s: float) -> float:
    """When closed-loop client ``client`` (0-based) of ``concurrency`` sends its first request."""
    if ramp_s <= 0 or concurrency <= 0:
        return 0.0
    return client * ramp_s / concurrency

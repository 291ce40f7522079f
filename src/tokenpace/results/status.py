"""The one rule for how a run ended, shared by ``tokenpace bench``, ``tokenpace sim`` and each
step of a sweep, and the exit code it gives:

- interrupted: a signal stopped the run (exit 130);
- failed: nothing was measured, or every measured request failed (exit 4);
- invalid: the load generator was the bottleneck, so its numbers cannot be trusted (exit 5);
- ok (exit 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tokenpace.errors import ExitCode

EXIT_CODES = {"ok": ExitCode.OK, "failed": ExitCode.RUN_FAILED, "invalid": ExitCode.INVALID_RUN,
              "interrupted": ExitCode.INTERRUPTED}


@dataclass(frozen=True)
class RunStatus:
    status: str  # "ok", "failed", "invalid" or "interrupted"
    reason: str | None = None  # None when ok

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]


def run_status(summary: dict[str, Any], *, interrupted: bool = False,
               load: dict[str, Any] | None = None) -> RunStatus:
    counts = summary["counts"]
    if interrupted:
        return RunStatus("interrupted", "interrupted: the run did not finish")
    if not counts["sent"]:
        return RunStatus("failed", "no request was measured")
    if counts["ok"] == 0:
        return RunStatus("failed", f"every request failed ({_kinds(counts)})")
    if load and not load.get("valid", True):
        return RunStatus("invalid", "load generator was the bottleneck: "
                         + "; ".join(load.get("invalid_reasons") or []))
    return RunStatus("ok")


def _kinds(counts: dict[str, Any]) -> str:
    """The three most common failure kinds, e.g. "http_500 4"."""
    kinds = counts.get("errors_by_kind") or {}
    return ", ".join(f"{k} {n}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1])[:3]) or "no detail"

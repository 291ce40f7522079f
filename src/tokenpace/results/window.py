"""How a result document names its measurement window, and how a saved window is read back to
count a run again over the same span (``tokenpace report --slo`` on a saved run)."""

from __future__ import annotations

from typing import Any

from tokenpace.metrics.window import Window

STEADY_PREFIX = "Steady-state window"  # every steady-state rule starts so (runner.steady writes them)


def saved_window(window: dict[str, Any], config: dict[str, Any]) -> Window | None:
    """The window a saved summary was counted over, to count again over the same one: the
    steady-state window (its rule kept), or a --duration run's; None: the default one."""
    if not window or window.get("start_ns") is None or window.get("end_ns") is None:
        return None
    definition = window.get("definition") or ""
    if definition.startswith(STEADY_PREFIX):
        rule = definition.split(" Output tokens count", 1)[0]
        return Window(window["start_ns"], window["end_ns"], explicit=True, rule=rule)
    if config.get("duration_s"):
        return Window(window["start_ns"], window["end_ns"], explicit=True)
    return None

"""Engine metrics during a run: scrape an engine's Prometheus ``/metrics`` (vLLM, SGLang, TGI,
llama.cpp), keep the time series, take the run's histograms as deltas, compare the engine's
latencies with the client's, and say in plain words what limited the engine.

``EngineWatch`` (scrape.py) wraps the load; ``engine_metrics_section`` (section.py) turns it into
the result document's ``engine_metrics``. Pure parts: families (the per-engine name tables),
snapshot (parsing), histograms, series, compare, diagnose.
"""

from .diagnose import diagnose
from .families import ENGINE_FAMILIES, QUANTITIES, detect_engine
from .histograms import Histogram, describe_ms, quantile

# The scraper (and aiohttp with it) loads when first asked for: a report that only reads the
# name tables (the HTML page's engine section) does not pay a third of a second for it.
_LAZY = {"DEFAULT_INTERVAL_S": "scrape", "EngineWatch": "scrape", "metrics_url_for": "scrape",
         "engine_metrics_section": "section"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "DEFAULT_INTERVAL_S", "ENGINE_FAMILIES", "QUANTITIES", "EngineWatch", "Histogram",
    "describe_ms", "detect_engine", "diagnose", "engine_metrics_section", "metrics_url_for", "quantile",
]

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
from .scrape import DEFAULT_INTERVAL_S, EngineWatch, metrics_url_for
from .section import engine_metrics_section

__all__ = [
    "DEFAULT_INTERVAL_S", "ENGINE_FAMILIES", "QUANTITIES", "EngineWatch", "Histogram",
    "describe_ms", "detect_engine", "diagnose", "engine_metrics_section", "metrics_url_for", "quantile",
]

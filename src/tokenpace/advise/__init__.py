"""Caching advice from request logs: ``tokenpace lint`` (lint.py), ``tokenpace workload reuse``
(reuse.py) and ``tokenpace workload dedupe`` (dedupe.py), over a streamed log (logs.py), prompt
units (units.py), provider cache rules (providers.py, data/providers.json) and a radix tree with
LRU eviction (radix.py)."""

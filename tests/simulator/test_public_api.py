"""The public surface is what ``tokenpace.simulator`` re-exports, and it stays importable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import tokenpace.simulator as sim


def test_public_names_resolve():
    for name in sim.__all__:
        assert getattr(sim, name) is not None, name


def test_result_is_identical_across_processes_with_different_hash_seeds():
    # Block hashes must not depend on Python's per-process string hashing.
    code = (
        "import hashlib, json\n"
        "from tokenpace.simulator import SimConfig, SimRequest, simulate\n"
        "reqs = [SimRequest(2100, 20, arrival_s=0.2 * i, prefix_group='sys-prompt', prefix_tokens=2048)"
        " for i in range(10)]\n"
        "r = simulate(SimConfig(prefix_caching=True), reqs)\n"
        "print(hashlib.sha256(json.dumps(r.to_dict(), sort_keys=True).encode()).hexdigest())\n"
    )
    src = str(Path(sim.__file__).resolve().parents[2])
    outs = set()
    for seed in ("1", "2"):
        path = src + os.pathsep + os.environ.get("PYTHONPATH", "")
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": path}
        outs.add(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                check=True).stdout)
    assert len(outs) == 1

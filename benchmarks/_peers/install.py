"""Each peer tool in its own virtual environment under a cache folder, installed at run time.

The peers are not project dependencies: their dependency trees (transformers, datasets, zmq, ...)
would conflict with ours and with each other, so each lives in
``$TOKENPACE_CACHE/peers/<tool>-<version>/`` (default ``~/.cache/tokenpace``), made once and
reused. A venv is only used once its ``.complete`` marker exists, so an interrupted install is
redone rather than half-used.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PeerSpec:
    name: str              # PyPI distribution
    version: str
    min_python: tuple[int, int]


PEERS = {
    "guidellm": PeerSpec("guidellm", "0.8.1", (3, 10)),
    "aiperf": PeerSpec("aiperf", "0.13.0", (3, 10)),
    # inference-perf requires Python >= 3.12 (every release); we use any 3.12+ interpreter found.
    "inference-perf": PeerSpec("inference-perf", "0.7.0", (3, 12)),
}


def cache_root() -> Path:
    return Path(os.environ.get("TOKENPACE_CACHE") or Path.home() / ".cache" / "tokenpace")


def venv_dir(spec: PeerSpec) -> Path:
    return cache_root() / "peers" / f"{spec.name}-{spec.version}"


def _python_version(exe: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([exe, "-c", "import sys; print(*sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
        major, minor = out.split()
        return int(major), int(minor)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def find_python(minimum: tuple[int, int]) -> str:
    """An interpreter at least ``minimum``: ours, then python3.N on PATH, then pyenv's builds."""
    candidates = [sys.executable]
    candidates += [shutil.which(f"python3.{n}") or "" for n in range(minimum[1], 15)]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python3")))
    for exe in filter(None, candidates):
        version = _python_version(exe)
        if version and version >= minimum:
            return exe
    raise RuntimeError(f"no Python >= {minimum[0]}.{minimum[1]} found (needed by a peer tool)")


def ensure_peer(tool: str, log=print) -> Path:
    """Return the venv of ``tool``, creating it (pip install tool==version) when missing."""
    spec = PEERS[tool]
    venv = venv_dir(spec)
    if (venv / ".complete").exists():
        return venv
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    python = find_python(spec.min_python)
    log(f"installing {spec.name}=={spec.version} into {venv} (Python {python}) ...")
    start = time.monotonic()
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    with open(venv.parent / f"{venv.name}.install.log", "w") as install_log:
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install",
                        f"{spec.name}=={spec.version}"],
                       check=True, stdout=install_log, stderr=subprocess.STDOUT, timeout=1800)
    took_s = time.monotonic() - start
    size_mb = sum(f.stat().st_size for f in venv.rglob("*") if f.is_file()) / 1e6
    (venv / ".complete").write_text(f"{spec.name}=={spec.version} python={python} "
                                    f"install_s={took_s:.0f} size_mb={size_mb:.0f}\n")
    log(f"  {spec.name} installed in {took_s:.0f} s, {size_mb:.0f} MB")
    return venv


def install_note(tool: str) -> str:
    marker = venv_dir(PEERS[tool]) / ".complete"
    return marker.read_text().strip() if marker.exists() else "not installed"

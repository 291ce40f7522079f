"""Make ``tokenpace`` importable from a checkout that has not been installed."""

from __future__ import annotations

import sys
from pathlib import Path

try:
    import tokenpace  # noqa: F401
except ModuleNotFoundError:  # running from a checkout without an install
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

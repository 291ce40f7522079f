"""Make ``tokenpace`` importable from the source tree when it is not installed in the venv."""

import sys
from pathlib import Path

try:
    import tokenpace  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

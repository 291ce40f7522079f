"""A real engine in the loop: llama.cpp's llama-server with Gemma 3 270M, from the cache that
`python3 scripts/llama_engine.py ensure` fills. One server (8 slots) serves the whole session.

Without the binary or the model these tests skip, saying why; with TOKENPACE_REQUIRE_ENGINE=1
(CI) they fail instead.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SLOTS = 8


def _load_engine_script():
    spec = importlib.util.spec_from_file_location("llama_engine", ROOT / "scripts" / "llama_engine.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("llama_engine", module)
    spec.loader.exec_module(module)
    return module


llama_engine = _load_engine_script()


@pytest.fixture(scope="session")
def engine_ready() -> None:
    missing = llama_engine.missing_parts()
    if missing:
        why = f"real engine not ready ({'; '.join(missing)}): run `python3 scripts/llama_engine.py ensure`"
        if os.environ.get("TOKENPACE_REQUIRE_ENGINE") == "1":
            pytest.fail(f"TOKENPACE_REQUIRE_ENGINE=1 but {why}")
        pytest.skip(why)


@pytest.fixture(scope="session")
def llama_url(engine_ready) -> str:
    """Base URL ("http://127.0.0.1:PORT/v1") of one llama-server (8 slots) for the session."""
    with llama_engine.running_llama_server(slots=SLOTS) as url:
        yield url


@pytest.fixture(scope="session")
def model_gguf(engine_ready) -> Path:
    return llama_engine.model_path()

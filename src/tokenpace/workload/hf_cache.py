"""A tokenizer named as on the Hugging Face Hub (`meta-llama/Llama-3.1-8B`), found in the local
Hugging Face cache and nowhere else: nothing is downloaded (REFERENCE: tools that hang while
fetching a tokenizer).

The cache is `$HF_HUB_CACHE`, else `hub/` in `$HF_HOME`, else `~/.cache/huggingface/hub`; a model
lives there as `models--ORG--NAME/snapshots/<commit>/tokenizer.json`, the commit named by
`refs/main` (or `refs/REVISION` for `NAME@REVISION`), as `huggingface_hub` leaves it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from tokenpace.errors import UsageError

# ORG/NAME or NAME, optionally @REVISION: the Hub's own characters, nothing that reads as a path
_REPO_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]*/)?[A-Za-z0-9][\w.-]*(?:@[\w./-]+)?$")


def looks_like_repo_id(name: str) -> bool:
    return bool(_REPO_ID.match(name)) and not name.endswith((".json", ".gguf"))


def hub_cache_dir() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or Path("~/.cache/huggingface")
    return Path(home).expanduser() / "hub"


def cached_tokenizer_json(name: str) -> Path:
    """The tokenizer.json of ``name`` in the local cache; UsageError saying how to get it there."""
    repo, _, revision = name.partition("@")
    hub = hub_cache_dir()
    model_dir = hub / ("models--" + repo.replace("/", "--"))
    snapshot = _snapshot(model_dir, revision or "main")
    if snapshot is not None and (snapshot / "tokenizer.json").is_file():
        return snapshot / "tokenizer.json"
    where = f"in the local Hugging Face cache ({hub})" if model_dir.is_dir() else \
        f"in the local Hugging Face cache ({hub}), nor a local file"
    raise UsageError(f"--tokenizer: no tokenizer.json for {name} {where}; nothing is downloaded: "
                     f"get it with `huggingface-cli download {repo} tokenizer.json "
                     f"tokenizer_config.json{' --revision ' + revision if revision else ''}` "
                     "(set HF_HOME or HF_HUB_CACHE if your cache is elsewhere), or give a local file")


def _snapshot(model_dir: Path, revision: str) -> Path | None:
    ref = model_dir / "refs" / revision
    if ref.is_file():
        return model_dir / "snapshots" / ref.read_text().strip()
    direct = model_dir / "snapshots" / revision  # a commit hash given as the revision
    return direct if direct.is_dir() else None

# compatibility: moved to tokenpace.results
from tokenpace.results.paths import DEFAULT_DIR, result_paths  # noqa: F401

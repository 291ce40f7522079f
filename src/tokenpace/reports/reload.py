# compatibility: moved to tokenpace.results
from tokenpace.results.reload import load_run, saved_window  # noqa: F401

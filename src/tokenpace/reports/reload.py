# compatibility: moved to tokenpace.results
from tokenpace.results.reload import is_live, load_run, saved_window  # noqa: F401

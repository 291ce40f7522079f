# compatibility: moved to tokenpace.results
from tokenpace.results.run_data import RunData, load_run_data, read_timeline  # noqa: F401

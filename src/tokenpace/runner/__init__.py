"""Running a benchmark: the load generator, the record sink, progress, and run_bench."""

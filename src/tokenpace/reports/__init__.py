"""Reports: the result file and the console summary."""

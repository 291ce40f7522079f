"""What a run leaves behind, in one shape: ``RunResult`` (measured, simulated and, coming, observed
runs), the result document and its schema version, the records files, where they go, how a run
ended (the exit-status rule) and how a saved run is read back.

This package sits below the runner, the sweep and the reports: runners end by building a
``RunResult`` and writing it here; reports and sweeps read runs from here, never from the runner.
The one atomic writer is ``tokenpace.files.write_whole`` (below every package), re-exported here.
"""

from tokenpace.files import write_whole
from tokenpace.results.document import SCHEMA_VERSION, load_document, result_document, write_result
from tokenpace.results.paths import DEFAULT_DIR, result_paths, timeline_path
from tokenpace.results.records import JournalRecords, RecordSink, read_records, read_records_counted
from tokenpace.results.reload import load_run
from tokenpace.results.run import KINDS, RunResult
from tokenpace.results.run_data import RunData, load_run_data
from tokenpace.results.status import EXIT_CODES, RunStatus, run_status
from tokenpace.results.window import STEADY_PREFIX, saved_window

__all__ = ["DEFAULT_DIR", "EXIT_CODES", "JournalRecords", "KINDS", "RunResult", "RunStatus", "RecordSink", "SCHEMA_VERSION",
           "RunData", "STEADY_PREFIX", "load_document", "load_run", "load_run_data", "read_records", "read_records_counted", "result_document",
           "result_paths", "run_status", "saved_window", "timeline_path", "write_result", "write_whole"]

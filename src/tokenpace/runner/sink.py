# compatibility: moved to tokenpace.results
from tokenpace.results.records import RecordSink, read_records, read_records_counted  # noqa: F401

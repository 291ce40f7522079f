"""The rotating records file stays bounded and every file it leaves is a readable records file."""

from __future__ import annotations

from tokenpace.instrumentation.sink import RotatingRecordSink, rotated_path
from tokenpace.record import RequestRecord
from tokenpace.runner.sink import read_records


def test_rotation_keeps_at_most_backups_plus_one_files_of_whole_records(tmp_path):
    path = tmp_path / "calls.jsonl"
    sink = RotatingRecordSink(path, max_bytes=4096, backups=2)
    for i in range(200):
        assert sink.write(RequestRecord(request_id=f"r{i}", index=i, sent_ns=i))
    sink.close()
    files = sorted(tmp_path.iterdir())
    assert files == sorted([path, rotated_path(path, 1), rotated_path(path, 2)])
    assert all(f.stat().st_size <= 4096 for f in files)
    newest = [r.index for r in read_records(path)]
    older = [r.index for r in read_records(rotated_path(path, 1))]
    assert newest[-1] == 199 and older[-1] + 1 == newest[0]  # nothing lost between the two newest


def test_appends_to_an_existing_file(tmp_path):
    path = tmp_path / "calls.jsonl"
    for i in range(2):
        sink = RotatingRecordSink(path)
        sink.write(RequestRecord(request_id=f"r{i}", index=i))
        sink.close()
    assert [r.request_id for r in read_records(path)] == ["r0", "r1"]

"""write_whole: the file is written whole or not at all, and nothing half-written is left."""

from __future__ import annotations

import os

import pytest

from tokenpace.errors import ExitCode, NotSaved
from tokenpace.files import write_whole


def test_a_write_that_fails_is_one_not_saved_error_and_leaves_the_old_file(tmp_path):
    target = tmp_path / "run.json"
    write_whole(target, b"old\n")
    blocked = tmp_path / "blocked.json"
    (blocked / "inside").mkdir(parents=True)  # a non-empty directory where the file should go
    with pytest.raises(NotSaved, match=r"cannot write the result file .*blocked\.json: ") as err:
        write_whole(blocked, b"new\n", what="the result file")
    assert err.value.exit_code == ExitCode.NOT_SAVED
    assert target.read_bytes() == b"old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocked.json", "run.json"]  # no .tmp


def test_an_interrupt_mid_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_whole(tmp_path / "run.json", b"data\n")
    assert list(tmp_path.iterdir()) == []

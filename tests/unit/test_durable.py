"""runtime/durable.py without Spark: syncfs(2) once per local file system, nothing for S3."""

from __future__ import annotations

from market_spread.runtime import durable
from market_spread.runtime.storage import location


def test_each_local_file_system_is_flushed_once_and_s3_not_at_all(tmp_path, monkeypatch):
    assert durable._syncfs() is not None  # Linux's libc has syncfs(2)
    calls = []
    flush = durable.sync_file_system
    monkeypatch.setattr(durable, "sync_file_system", lambda folder: (calls.append(folder), flush(folder)))
    (tmp_path / "lake").mkdir()
    places = [tmp_path / "lake", tmp_path / "lake" / "_checkpoints" / "stream", location("s3://bucket/lake"), None]
    seconds = durable.make_durable(places)
    assert calls == [tmp_path / "lake"]  # the checkpoint not made yet: its parent's file system, the same
    assert 0 <= seconds < 30

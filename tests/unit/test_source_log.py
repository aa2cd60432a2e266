"""The file source's metadata log is trimmed of archived files' entries (stream.source_log)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from market_spread.errors import SettingError
from market_spread.stream.source_log import TRIM_EVERY_VARIABLE, trim_interval, trim_source_logs


def _entry(path: str, batch: int) -> str:
    return json.dumps({"path": path, "timestamp": 1795609538775, "batchId": batch}, separators=(",", ":"))


def _checkpoint(tmp_path: Path, entries: list[str], last_committed: int = 9) -> Path:
    checkpoint = tmp_path / "cp"
    (checkpoint / "commits").mkdir(parents=True)
    for b in range(last_committed + 1):
        (checkpoint / "commits" / str(b)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    log = checkpoint / "sources" / "0"
    log.mkdir(parents=True)
    (log / "4.compact").write_text("v1\n" + "\n".join(entries[:1]))  # an older compact file, left alone
    (log / "9.compact").write_text("v1\n" + "\n".join(entries))
    (log / ".9.compact.crc").write_bytes(b"crc")
    return checkpoint


def _lines(checkpoint: Path) -> list[str]:
    return (checkpoint / "sources" / "0" / "9.compact").read_text().split("\n")


def test_only_old_entries_of_files_gone_from_an_existing_folder_are_dropped(tmp_path):
    landing = tmp_path / "landing" / "quotes"
    landing.mkdir(parents=True)
    (landing / "still-here.jsonl").write_text("{}")
    entries = [
        _entry(f"file://{landing}/archived-0.jsonl", 0),  # archived long ago: dropped
        _entry(f"file://{landing}/archived%20space.jsonl", 6),  # URI-encoded, archived: dropped
        _entry(f"file://{landing}/still-here.jsonl", 1),  # its file is in place: kept
        _entry(f"file://{tmp_path}/unmounted/q.jsonl", 2),  # its folder is gone: kept
        _entry("s3a://bucket/landing/q.jsonl", 3),  # not a local file: kept
        _entry(f"file://{landing}/archived-8.jsonl", 8),  # within the last two committed batches: kept
        _entry(f"file://{landing}/archived-9.jsonl", 9),
    ]
    checkpoint = _checkpoint(tmp_path, entries)
    [result] = trim_source_logs(checkpoint)
    assert (result.kept, result.dropped, result.compact_file) == (5, 2, "9.compact")
    assert _lines(checkpoint) == ["v1", entries[2], entries[3], entries[4], entries[5], entries[6]]
    assert not (checkpoint / "sources" / "0" / ".9.compact.crc").exists(), "a stale checksum would fail Spark's read"
    assert (checkpoint / "sources" / "0" / "4.compact").read_text() == "v1\n" + entries[0]
    assert not list((checkpoint / "sources" / "0").glob(".*.rewrite"))
    assert trim_source_logs(checkpoint) == [], "a second pass finds nothing more"


def test_a_log_it_does_not_understand_or_a_checkpoint_without_commits_is_left_alone(tmp_path):
    landing = tmp_path / "landing"
    landing.mkdir()
    checkpoint = _checkpoint(tmp_path, [_entry(f"file://{landing}/gone.jsonl", 0), "not json"])
    before = _lines(checkpoint)
    assert trim_source_logs(checkpoint) == [] and _lines(checkpoint) == before
    assert (checkpoint / "sources" / "0" / ".9.compact.crc").exists()

    other = tmp_path / "other"
    other.mkdir()
    checkpoint = _checkpoint(other, [_entry(f"file://{landing}/gone.jsonl", 0)])
    for commit in (checkpoint / "commits").iterdir():
        commit.unlink()
    assert trim_source_logs(checkpoint) == [], "nothing committed yet: every entry may be replayed"


def test_the_trim_interval_is_a_whole_number_of_batches(monkeypatch):
    monkeypatch.delenv(TRIM_EVERY_VARIABLE, raising=False)
    assert trim_interval() == 1000
    monkeypatch.setenv(TRIM_EVERY_VARIABLE, "3")
    assert trim_interval() == 3
    for bad in ("0", "-1", "ten", "2.5"):
        monkeypatch.setenv(TRIM_EVERY_VARIABLE, bad)
        with pytest.raises(SettingError, match="whole number of batches"):
            trim_interval()

"""The stream's health record (runtime/stream_health.py): per-minute latency and backlog, a day of
it kept, written whole and read back, anything unreadable taken for no record."""

from __future__ import annotations

import json
from pathlib import Path

from market_spread.runtime.stream_health import (
    HEALTH_FILE,
    KEEP_MINUTES,
    MinuteSeries,
    minute_of,
    read_health,
    write_health,
)

T = 1_800_000_000  # a minute's start


def test_minutes_sum_latency_and_keep_the_largest_backlog() -> None:
    series = MinuteSeries()
    series.add_latency(T + 1, 2.0)
    series.add_latency(T + 59, 4.0)
    series.add_latency(T + 60, -0.5)  # a clock slightly ahead of ours: counted as 0
    series.add_latency(T + 61, float("nan"))  # never a figure
    series.add_backlog(T + 5, 7)
    series.add_backlog(T + 30, 3)
    assert series.rows() == [[T, 2, 6.0, 4.0, 7], [T + 60, 1, 0.0, 0.0, None]]
    assert minute_of(T + 59.9) == T


def test_a_day_is_kept() -> None:
    series = MinuteSeries()
    for i in range(KEEP_MINUTES + 10):
        series.add_backlog(T + 60 * i, i)
    rows = series.rows()
    assert len(rows) == KEEP_MINUTES and rows[0][0] == T + 60 * 10 and rows[-1][4] == KEEP_MINUTES + 9


def test_written_whole_and_read_back(tmp_path: Path) -> None:
    series = MinuteSeries()
    series.add_latency(T, 1.5)
    write_health(tmp_path, {"pid": 7, "minutes": series.rows()})
    record = read_health(tmp_path)
    assert record["pid"] == 7 and MinuteSeries.from_rows(record["minutes"]).rows() == series.rows()
    assert [p.name for p in tmp_path.iterdir()] == [HEALTH_FILE]  # no temporary file left


def test_anything_unreadable_is_no_record(tmp_path: Path) -> None:
    assert read_health(tmp_path) == {}
    (tmp_path / HEALTH_FILE).write_text("{not json")
    assert read_health(tmp_path) == {}
    (tmp_path / HEALTH_FILE).write_text(json.dumps({"version": 99, "pid": 1}))
    assert read_health(tmp_path) == {}  # a format this release does not know
    assert MinuteSeries.from_rows([[T, 1, 1.0, 1.0, None], ["x"], "junk", [T + 60, "a", 1, 1, 1]]).rows() == [
        [T, 1, 1.0, 1.0, None]
    ]

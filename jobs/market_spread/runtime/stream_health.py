"""The stream's health record: a small JSON document the running stream rewrites every few seconds
beside its lake (`LAKE/_stream_health.json`), read by the Airflow UI's Stream page.

What `batch_metrics` cannot say is kept here: the end-to-end latency (a landing file's modification
time, or a Kafka record's timestamp, to the commit of its batch) and the input waiting to be taken,
per minute for the last day, and who runs the stream with which source, checkpoint and metrics
endpoint. The stream keeps the series across restarts (it reads the record back when it starts).
Standard library only: the Airflow API server reads it.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any

from market_spread.runtime.storage import Location, S3Path

HEALTH_FILE = "_stream_health.json"
VERSION = 1
KEEP_MINUTES = 24 * 60  # the page's longest window


def minute_of(t: float) -> int:
    """The start (unix seconds) of the minute `t` falls in."""
    return int(t // 60) * 60


@dataclass
class Minute:
    """One minute's figures: the latency observations (count, sum, max, in seconds) and the largest
    backlog sampled (None: not sampled in that minute)."""

    latency_count: int = 0
    latency_sum: float = 0.0
    latency_max: float = 0.0
    backlog: int | None = None

    def row(self, start: int) -> list[Any]:
        return [start, self.latency_count, round(self.latency_sum, 3), round(self.latency_max, 3), self.backlog]


@dataclass
class MinuteSeries:
    """Per-minute latency and backlog, the last KEEP_MINUTES minutes."""

    minutes: dict[int, Minute] = field(default_factory=dict)

    def _at(self, t: float) -> Minute:
        start = minute_of(t)
        found = self.minutes.get(start)
        if found is None:
            found = self.minutes[start] = Minute()
            self._trim(start)
        return found

    def _trim(self, newest: int) -> None:
        oldest = newest - KEEP_MINUTES * 60
        for start in [s for s in self.minutes if s <= oldest]:
            del self.minutes[start]

    def add_latency(self, t: float, seconds: float) -> None:
        if not math.isfinite(seconds):
            return
        seconds = max(0.0, seconds)  # a file stamped by a clock slightly ahead of ours
        minute = self._at(t)
        minute.latency_count += 1
        minute.latency_sum += seconds
        minute.latency_max = max(minute.latency_max, seconds)

    def add_backlog(self, t: float, count: int) -> None:
        minute = self._at(t)
        minute.backlog = count if minute.backlog is None else max(minute.backlog, count)

    def rows(self) -> list[list[Any]]:
        return [self.minutes[s].row(s) for s in sorted(self.minutes)]

    @classmethod
    def from_rows(cls, rows: object) -> "MinuteSeries":
        """The series from a record's rows; malformed rows are skipped."""
        series = cls()
        for row in rows if isinstance(rows, list) else []:
            try:
                start, count, total, top, backlog = row
                series.minutes[int(start)] = Minute(
                    int(count), float(total), float(top), None if backlog is None else int(backlog)
                )
            except (TypeError, ValueError):
                continue
        if series.minutes:
            series._trim(max(series.minutes))
        return series


def health_path(lake: Location) -> Location:
    return lake / HEALTH_FILE


def read_health(lake: Location) -> dict[str, Any]:
    """The lake's health record, or {} when there is none or it cannot be read."""
    try:
        record = json.loads(health_path(lake).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    except Exception:  # noqa: BLE001 - an object store's client error: no record, as for a missing file
        return {}
    return record if isinstance(record, dict) and record.get("version") == VERSION else {}


def write_health(lake: Location, record: dict[str, Any]) -> None:
    """Replace the record whole: a reader sees the old one or the new one (a rename on a local disk,
    one PUT on object storage). OSError when it cannot be written."""
    text = json.dumps({**record, "version": VERSION}, separators=(",", ":"))
    target = health_path(lake)
    if isinstance(target, S3Path):
        target.write_text(text)
        return
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, target)

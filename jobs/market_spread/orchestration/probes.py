"""The lake and the landing folder, read without Spark and without taking any lock: who writes the
lake, is the stream progressing (StreamHealth), what maintenance and validation would act on.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from market_spread.runtime.backlog import BacklogUnknown, Waiting
from market_spread.runtime.lease import lease_live, read_lease
from market_spread.runtime.processes import record_alive
from market_spread.runtime.storage import Location, S3Path
from market_spread.runtime.stream_contract import LOCK_FILE


def read_stream_lock(lake: Location) -> dict[str, Any]:
    """The lake's writer lock record (on S3: its lease) as written by its holder; {} when absent or unreadable."""
    if isinstance(lake, S3Path):
        return read_lease(lake)
    try:
        value = json.loads((lake / LOCK_FILE).read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def live_stream(lake: Location) -> dict[str, Any] | None:
    """The lock record of the stream (or maintain) writing this lake, if its driver or JVM lives.

    Reads the record only (never takes the lock), so probing cannot make a starting stream fail.
    A process counts only if it is the recorded one (same start time, see processes.record_alive):
    a pid reused after a restart does not. A record of another host counts as live (it cannot be
    checked here; callers only wait or skip compaction on it, and `maintain` takes the flock anyway).
    """
    info = read_stream_lock(lake)
    if isinstance(lake, S3Path):
        return info if lease_live(info) else None
    alive = record_alive(info, "pid", "pid_started") or record_alive(info, "jvm_pid", "jvm_started")
    return info if alive else None


def last_batch(lake: Location) -> dict[str, Any] | None:
    """The newest row of batch_metrics, read with delta-rs (no Spark), or None if none yet."""
    path = lake / "batch_metrics"
    if not (path / "_delta_log").is_dir():
        return None
    from market_spread.runtime.storage import open_delta, read_rows

    table = read_rows(open_delta(path), ["batch_id", "finished_at", "quotes", "orders", "alerts"])
    if table.num_rows == 0:
        return None
    rows = table.to_pylist()
    return max(rows, key=lambda r: r["batch_id"])


def delta_tables(lake: Location) -> list[str]:
    """Names of the Delta tables directly under `lake`, sorted."""
    if not lake.is_dir():
        return []
    return sorted(p.name for p in lake.iterdir() if (p / "_delta_log").is_dir())


def _landing_objects(landing: S3Path) -> list[tuple[str, float]]:
    """(name, modification time) of the landing objects the stream reads (object storage has no
    folder times: one listing per feed)."""
    return [
        (obj.name, info.modified.timestamp())
        for feed in ("quotes", "orders")
        for obj, info in (landing / feed).listing()
        if obj.parent == landing / feed and obj.name.endswith(".jsonl") and not obj.name.startswith((".", "_"))
    ]


def _newest_landing_change(landing: Location) -> float:
    if isinstance(landing, S3Path):
        return max((t for _, t in _landing_objects(landing)), default=0.0)
    # A folder's mtime moves whenever a file is renamed into it: O(1) however many files it holds.
    stamps = [(landing / feed).stat().st_mtime for feed in ("quotes", "orders") if (landing / feed).is_dir()]
    return max(stamps, default=0.0)


def _oldest_landing_file_after(landing: Location, since: float) -> float | None:
    if isinstance(landing, S3Path):
        return min((t for _, t in _landing_objects(landing) if t > since), default=None)
    oldest = None
    for feed in ("quotes", "orders"):
        folder = landing / feed
        if not folder.is_dir():
            continue
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.startswith(".") or not entry.name.endswith(".jsonl"):
                    continue
                with contextlib.suppress(OSError):
                    mtime = entry.stat().st_mtime
                    if mtime > since and (oldest is None or mtime < oldest):
                        oldest = mtime
    return oldest


# `batch N: ... in S.SSs` per batch, or `batch N: K batches (M-N): ...; last in S.SSs` per summary.
PROGRESS_LINE = re.compile(
    r"^batch (?P<batch>\d+):(?: (?P<count>\d+) batches \()?.*?(?: in (?P<seconds>[0-9.]+)s)?\s*$"
)


@dataclass
class StreamHealth:
    """Batch progress of one stream process, from its stdout, against the input waiting for it.

    The stream is *stalled* when a landing file arrived after the last batch began and has waited
    longer than `stall_seconds` (`startup_seconds` until the process completes its first batch)
    with no batch completed since. No input means nothing to do, never a stall, so an idle feed
    does not raise false alarms. With `waiting` (a Kafka source: runtime.backlog.kafka_waiting) the
    input waiting is the records past the checkpoint's committed offsets instead of landing files.
    """

    landing: Location
    stall_seconds: float
    startup_seconds: float = 900.0
    waiting: Callable[[], Waiting] | None = None
    started: float = field(default_factory=time.time)
    batches: int = 0
    last_batch_id: int | None = None
    last_progress: float = 0.0  # wall time the last completed batch began (or the process start)
    pending_since: float | None = None

    def __post_init__(self) -> None:
        self.last_progress = self.started

    def observe_line(self, line: str, now: float | None = None) -> bool:
        match = PROGRESS_LINE.match(line.strip())
        if not match:
            return False
        now = time.time() if now is None else now
        took = float(match.group("seconds") or 0.0)
        self.batches += int(match.group("count") or 1)
        self.last_batch_id = int(match.group("batch"))
        self.last_progress = max(self.last_progress, now - took)
        self.pending_since = None
        return True

    def check(self, now: float | None = None) -> str | None:
        """None when healthy, else why the stream counts as stalled."""
        now = time.time() if now is None else now
        limit = self.stall_seconds if self.batches else max(self.stall_seconds, self.startup_seconds)
        if self.waiting is not None:
            return self._check_waiting(now, limit)
        try:
            changed = _newest_landing_change(self.landing)
        except OSError:
            return None
        if changed > self.last_progress and self.pending_since is None:
            self.pending_since = changed
        if self.pending_since is None or now - self.pending_since <= limit:
            return None
        # Confirm with the files themselves (a folder also changes when files leave it).
        oldest = _oldest_landing_file_after(self.landing, self.last_progress)
        if oldest is None:
            self.pending_since = None
            return None
        self.pending_since = oldest
        if now - oldest <= limit:
            return None
        return self._stalled(now, oldest, limit)

    def _stalled(self, now: float, oldest: float, limit: float) -> str:
        last = f"last batch {self.last_batch_id}" if self.batches else "no batch since it started"
        setting = "stall_seconds" if self.batches else "startup_seconds"
        return (
            f"no batch progress for {now - self.last_progress:.0f}s ({last}) while input has waited "
            f"{now - oldest:.0f}s (> {setting} {limit:.0f}s)"
        )

    def _check_waiting(self, now: float, limit: float) -> str | None:
        """The check against `waiting`, asked only once no batch has begun for `limit` seconds."""
        if now - self.last_progress <= limit:
            self.pending_since = None
            return None
        assert self.waiting is not None  # asked only when set (above)
        try:
            found = self.waiting()
        except (BacklogUnknown, OSError):  # the broker out of reach: a dead stream is still seen, not this
            return None
        if not found.count:
            self.pending_since = None
            return None
        # Records without a timestamp: waiting since this check first saw them.
        self.pending_since = self.pending_since or now
        oldest = found.oldest if found.oldest is not None else self.pending_since
        return self._stalled(now, oldest, limit) if now - oldest > limit else None


# --------------------------------------------------------------------------------------------
# What maintenance and validation act on


def data_docs_location(docs: Location) -> str:
    """The Data Docs index as a file:// URI (the shallowest index.html), else the folder itself (on
    S3: the index's s3:// URI)."""
    if isinstance(docs, S3Path):
        return (docs / "index.html").uri("s3")
    index = docs / "index.html"
    if not index.is_file():
        found = sorted(docs.glob("**/index.html"), key=lambda p: len(p.parts)) if docs.is_dir() else []
        index = found[0] if found else index
    return index.as_uri() if index.is_file() else str(docs)


def tables_changed_since(lake: Location, tables: tuple[str, ...], since: datetime | None) -> bool:
    """Did any of these tables commit after `since`? (the `_delta_log` folder's mtime; O(1); on S3
    its newest object)"""
    if since is None:
        return True
    stamp = since.timestamp()
    if isinstance(lake, S3Path):
        return any(
            info.modified.timestamp() >= stamp for name in tables for _, info in (lake / name / "_delta_log").listing()
        )
    for name in tables:
        with contextlib.suppress(OSError):
            if (lake / name / "_delta_log").stat().st_mtime >= stamp:
                return True
    return False


def small_file_counts(lake: Location) -> dict[str, int]:
    """Data files on disk per table (live or tombstoned): what compaction and vacuum act on."""
    counts = {}
    if isinstance(lake, S3Path):
        return {
            name: sum(1 for obj in (lake / name).rglob("*.parquet") if "_delta_log" not in obj.parts)
            for name in delta_tables(lake)
        }
    for name in delta_tables(lake):
        total = 0
        for _root, dirs, files in os.walk(lake / name):
            dirs[:] = [d for d in dirs if d != "_delta_log"]
            total += sum(1 for f in files if f.endswith(".parquet"))
        counts[name] = total
    return counts

"""What the Airflow UI's Stream page shows, read without Spark: per-minute figures of a time window
from `batch_metrics` (delta-rs) and from the stream's health record (latency, backlog), and the
state at a glance (last batch, the lake's writer, checkpoint, source, input waiting, stalled or not).

Standard library only at import; delta-rs, pyarrow and numpy are imported when a page is built.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from market_spread.errors import MarketSpreadError
from market_spread.orchestration.probes import live_stream
from market_spread.orchestration.settings import Settings
from market_spread.runtime.backlog import BacklogUnknown, KafkaProbe, Waiting, kafka_waiting, landing_waiting, numbered
from market_spread.runtime.paths import shown
from market_spread.runtime.storage import Location
from market_spread.runtime.stream_contract import CHECKPOINT_SUBDIR
from market_spread.runtime.stream_health import MinuteSeries, read_health

WINDOWS = {"15m": 15, "1h": 60, "6h": 360, "24h": 1440}
METRIC_COLUMNS = ("batch_id", "started_at", "finished_at", "input_lines", "alerts", "quarantined")


class BadWindow(MarketSpreadError, ValueError):
    """A window the page does not offer."""


def default_window(lake: Location, now: float | None = None) -> str:
    """The window the page opens on: the shortest that holds the life of a stream younger than an
    hour (15 minutes at first, so that its first batches are not a strip at the right edge), else
    the hour. The stream's age is its health record's start."""
    started = read_health(lake).get("started_at")
    age = (time.time() if now is None else now) - started if isinstance(started, (int, float)) else 0.0
    return "15m" if age <= WINDOWS["15m"] * 60 else "1h"


def window_minutes(name: str | None) -> int:
    """The minutes of a window name (15m, 1h, 6h, 24h; default 1h); BadWindow otherwise."""
    if not name:
        return WINDOWS["1h"]
    if name not in WINDOWS:
        raise BadWindow(f"window must be one of {', '.join(WINDOWS)}, not {name!r}")
    return WINDOWS[name]


@dataclass
class Series:
    """Per-minute values over the window, oldest first (None: nothing in that minute)."""

    minutes: list[int]
    values: dict[str, list[float | None]] = field(default_factory=dict)


@dataclass
class StreamStatus:
    now: float
    window: int  # minutes
    series: Series
    last_batch: dict[str, Any] | None  # batch_id, started_at, finished_at (unix seconds)
    holder: dict[str, Any] | None  # the lake's writer record, when its process lives
    checkpoint: str
    checkpoint_batch: int | None  # the checkpoint's newest committed batch
    source: str
    input_label: str
    waiting: Waiting | None
    waiting_error: str | None
    limit: float  # seconds without a batch, while input waits, that make a stall
    health: dict[str, Any]

    @property
    def last_batch_age(self) -> float | None:
        return None if not self.last_batch else max(0.0, self.now - self.last_batch["finished_at"])

    @property
    def stalled(self) -> str | None:
        """Why the stream counts as stalled (no batch committed for longer than the limit while input
        has waited longer than it), else None: the supervisor's rule (orchestration.probes)."""
        waiting = self.waiting
        if waiting is None or not waiting.count or waiting.age(self.now) <= self.limit:
            return None
        age = self.last_batch_age
        if age is not None and age <= self.limit:
            return None
        since = f"no batch for {age:.0f}s" if age is not None else "no batch yet"
        return (
            f"{since} while {waiting.count} {waiting.unit} wait, the oldest for {waiting.age(self.now):.0f}s "
            f"(> {self.limit:.0f}s)"
        )


_tables: dict[str, Any] = {}
_tables_lock = threading.Lock()


def _table(lake: Location) -> Any:
    """batch_metrics as a delta-rs table kept per lake and brought up to date (only new commits are
    read); None while no stream has created it. Call with _tables_lock held."""
    from deltalake.exceptions import DeltaError

    from market_spread.runtime.storage import open_delta

    key = str(lake / "batch_metrics")
    table = _tables.get(key)
    if table is not None:
        try:
            table.update_incremental()
            return table
        except DeltaError:  # the table was replaced or moved: read it afresh
            _tables.pop(key, None)
    try:
        table = _tables[key] = open_delta(lake / "batch_metrics")
    except DeltaError:  # TableNotFoundError among them
        return None
    return table


def _query(table: Any, sql: str) -> Any:
    import pyarrow as pa
    from deltalake import QueryBuilder

    return pa.table(QueryBuilder().register("batch_metrics", table).execute(sql).read_all())


def _batch_metrics(lake: Location, since: float) -> tuple[Any, Any]:
    """(the rows of batch_metrics finished at or after `since`, the newest row when none is), as
    pyarrow Tables; (None, None) without a table."""
    with _tables_lock:
        table = _table(lake)
        if table is None:
            return None, None
        columns = ", ".join(METRIC_COLUMNS)
        rows = _query(
            table,
            f"SELECT {columns} FROM batch_metrics WHERE finished_at >= to_timestamp_micros({int(since * 1_000_000)})",
        )
        if rows.num_rows:
            return rows, None
        # A quiet window: the last batch still says how old the stream's progress is.
        return rows, _query(table, f"SELECT {columns} FROM batch_metrics ORDER BY batch_id DESC LIMIT 1")


def _per_minute(rows: Any, minutes: list[int]) -> dict[str, list[float | None]]:
    """batch_metrics' rows summed (or averaged) per minute of their commit."""
    import numpy as np
    import pyarrow as pa

    n, first = len(minutes), minutes[0]
    empty: dict[str, list[float | None]] = {
        k: [None] * n for k in ("input_rate", "batch_mean", "batch_max", "alerts", "quarantined", "batches")
    }
    if rows is None or rows.num_rows == 0:
        return empty

    def seconds(name: str) -> Any:
        return rows[name].cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).to_numpy(zero_copy_only=False) / 1e6

    finished, started = seconds("finished_at"), seconds("started_at")
    index = ((finished - first) // 60).astype(int)
    keep = (index >= 0) & (index < n)
    index, duration = index[keep], (finished - started)[keep]
    count = np.bincount(index, minlength=n)

    def summed(name: str) -> Any:
        return np.bincount(index, weights=rows[name].to_numpy(zero_copy_only=False)[keep].astype(float), minlength=n)

    top = np.zeros(n)
    np.maximum.at(top, index, duration)
    now_minute_seconds = max(1.0, min(60.0, time.time() - minutes[-1]))
    spans = np.full(n, 60.0)
    spans[-1] = now_minute_seconds  # the current minute has not ended: a rate over its elapsed part
    out = {
        "input_rate": summed("input_lines") / spans,
        "batch_mean": np.bincount(index, duration, n) / np.maximum(count, 1),
        "batch_max": top,
        "alerts": summed("alerts"),
        "quarantined": summed("quarantined"),
        "batches": count,
    }
    return {k: [float(v) if count[i] else None for i, v in enumerate(values)] for k, values in out.items()}


def _health_minutes(health: dict[str, Any], minutes: list[int]) -> dict[str, list[float | None]]:
    by_start = MinuteSeries.from_rows(health.get("minutes")).minutes
    found = [by_start.get(m) for m in minutes]
    return {
        "latency_mean": [m.latency_sum / m.latency_count if m and m.latency_count else None for m in found],
        "latency_max": [m.latency_max if m and m.latency_count else None for m in found],
        "backlog": [None if m is None or m.backlog is None else float(m.backlog) for m in found],
    }


def _last_batch(rows: Any, health: dict[str, Any]) -> dict[str, Any] | None:
    """The newest of `rows` (the window's, or batch_metrics' newest), else the one the health record
    names."""
    if rows is not None and rows.num_rows:
        newest = max(rows.to_pylist(), key=lambda r: r["batch_id"])
        return {
            "batch_id": newest["batch_id"],
            "started_at": newest["started_at"].timestamp(),
            "finished_at": newest["finished_at"].timestamp(),
        }
    last = health.get("last_batch")
    if isinstance(last, dict) and last.get("committed_at"):
        return {
            "batch_id": last.get("batch_id"),
            "started_at": last.get("started_at"),
            "finished_at": last["committed_at"],
        }
    return None


_probes: dict[str, KafkaProbe] = {}
_probe_lock = threading.Lock()


def _waiting(settings: Settings, checkpoint: Location, since: float) -> Waiting:
    if settings.source != "kafka":
        return landing_waiting(settings.landing, since)
    if not settings.bootstrap_servers:
        raise BacklogUnknown("source is kafka but no bootstrap servers are set")
    topics = (settings.quotes_topic or "quotes", settings.orders_topic or "orders")
    with _probe_lock:  # one client per broker list, used by one request at a time
        probe = _probes.setdefault(settings.bootstrap_servers, KafkaProbe(settings.bootstrap_servers, timeout=3.0))
        return kafka_waiting(probe, checkpoint, topics)


def read_status(settings: Settings, window: int, now: float | None = None) -> StreamStatus:
    """The page's figures for the last `window` minutes (the current minute included)."""
    now = time.time() if now is None else now
    last_minute = int(now // 60) * 60
    minutes = [last_minute - 60 * i for i in range(window - 1, -1, -1)]
    lake, health = settings.lake, read_health(settings.lake)
    rows, newest = _batch_metrics(lake, minutes[0])
    series = Series(minutes, {**_per_minute(rows, minutes), **_health_minutes(health, minutes)})
    last = _last_batch(rows if newest is None else newest, health)
    checkpoint = lake / CHECKPOINT_SUBDIR
    committed = numbered(checkpoint / "commits")
    waiting, error = None, None
    try:
        waiting = _waiting(settings, checkpoint, (last or {}).get("started_at") or 0.0)
    except Exception as exc:  # noqa: BLE001 - a broker or store out of reach: said on the page, never a failed page
        error = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    holder = live_stream(lake)
    source_label = (
        f"kafka {settings.bootstrap_servers}" if settings.source == "kafka" else f"files {shown(settings.landing)}"
    )
    limit = settings.stall_seconds if last else max(settings.stall_seconds, settings.startup_seconds)
    return StreamStatus(
        now,
        window,
        series,
        last,
        holder or None,
        shown(checkpoint),
        committed[-1] if committed else None,
        settings.source,
        source_label,
        waiting,
        error,
        limit,
        health,
    )


def as_json(status: StreamStatus) -> dict[str, Any]:
    """The figures as JSON (the page's `status.json`: for scripts and checks)."""
    waiting = status.waiting
    return {
        "now": status.now,
        "window_minutes": status.window,
        "minutes": status.series.minutes,
        "series": status.series.values,
        "last_batch": status.last_batch,
        "last_batch_age_seconds": status.last_batch_age,
        "writer": status.holder,
        "checkpoint": status.checkpoint,
        "checkpoint_batch": status.checkpoint_batch,
        "source": status.source,
        "input": status.input_label,
        "waiting": None
        if waiting is None
        else {"count": waiting.count, "unit": waiting.unit, "oldest": waiting.oldest, "parts": waiting.parts},
        "waiting_error": status.waiting_error,
        "stall_limit_seconds": status.limit,
        "stalled": status.stalled,
        "writers": status.health.get("writers") or {},
        "metrics_endpoint": status.health.get("metrics_endpoint"),
        "metrics_note": status.health.get("metrics_note"),
        "health_written_at": status.health.get("written_at"),
    }

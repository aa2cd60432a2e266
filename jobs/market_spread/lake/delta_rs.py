"""The driver's Delta tables: the delta-rs tables the stream keeps open to read (late quote history,
compaction's file lists), and the entry points of its commits for Arrow rows (`append_table` and
friends), which lake.log_writer makes (data file and commit file, no log listing), as it makes the
state MERGE's and, through delta-rs, the compactions.

Why on the driver: a Spark MERGE of a few thousand rows costs Delta a snapshot of the table's new
version, then analysis, a touched-files job and a rewrite job: 1.5-2.1 s of a 2,000-event batch,
on its critical path; the same commit from the driver takes milliseconds. The MERGE's source (one
row per symbol) and the metrics are already on the driver; a small batch's rows are brought there
by the one Spark job that computes them.

Safe because the stream is the lake's only writer (the lock) and each table has one writer inside it;
every commit carries the same batch tag in `userMetadata` as Spark's commits (lake.tables.batch_tag),
which a restarted stream reads. `MARKET_SPREAD_DRIVER_COMMITS=off` sends every write through Spark again.
"""
from __future__ import annotations

import re
import threading
import time
from typing import Any, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame

from market_spread.lake import log_writer
from market_spread.runtime import settings
from market_spread.runtime.storage import S3Path, location, open_delta

_TYPES = {"STRING": pa.string(), "BIGINT": pa.int64(), "BOOLEAN": pa.bool_(), "DATE": pa.date32(),
          "TIMESTAMP": pa.timestamp("us", tz="UTC")}


def enabled() -> bool:
    """Whether the driver's delta-rs commits are on (MARKET_SPREAD_DRIVER_COMMITS=on|off, default on)."""
    return settings.value("MARKET_SPREAD_DRIVER_COMMITS")  # SettingError unless on or off (or true/false...)


def arrow_schema(schema_sql: str) -> pa.Schema:
    """The Arrow schema of a table's SQL schema (lake.tables.SCHEMAS)."""
    fields = []
    for column in re.split(r",(?![^()]*\))", schema_sql):  # not the comma inside DECIMAL(18,8)
        name, kind = column.strip().split(" ", 1)
        kind = kind.replace(" NOT NULL", "").strip().upper()
        decimal = re.fullmatch(r"DECIMAL\((\d+),\s*(\d+)\)", kind)
        fields.append(pa.field(name, pa.decimal128(int(decimal[1]), int(decimal[2])) if decimal else _TYPES[kind]))
    return pa.schema(fields)


# Tables opened by this process: path -> (DeltaTable, _identity(path) when it was opened; on object
# storage, and for a local table without a log, (version opened at, _elsewhere seen, when its log was
# last read)).
_OPEN: dict[str, tuple[Any, tuple[int, ...] | None]] = {}
_OPEN_LOCK = threading.Lock()


def open_table(path: str) -> Any:
    """The Delta table at `path`, opened once and brought up to date at each later call.

    Why: opening a table reads its latest checkpoint, which lists every data file of the table, and
    the stream opened four or five tables a batch. On the growth run's tables at 5,000 versions an
    open took 20-65 ms, `update_incremental` (only the commits since) 5-10 ms, and the batch's write
    phase had grown from 114 to 270 ms. Safe because this process is the lake's only writer while a
    stream runs (Spark's commits to the same tables are read by the update too). A table removed and
    created again at the same path is opened afresh (`_identity`); `forget_tables()`
    drops them all (a stream's start, a failed batch).

    A table is also opened afresh once a newer checkpoint exists than the one it was opened from:
    a DeltaTable kept up to date by `update_incremental` gets slower with every commit since its
    opening (2,500 appends to one object: 32 ms a commit at 500, 166 ms at 2,500; opened again at
    each checkpoint: 8 and 32 ms, the rest being the log's size)."""
    if isinstance(location(path), S3Path):
        return _open_on_object_storage(path)
    identity = _identity(path)
    with _OPEN_LOCK:
        cached = _OPEN.get(path)
    if cached is not None and identity is not None and cached[1] == identity:
        table = cached[0]
        # Listing the log (what the update does) costs more the longer the log: skip it when no
        # commit follows this object's version. No commit can have been removed unseen: log clean-up
        # comes only with a checkpoint, which changes `_identity`.
        if (location(path) / "_delta_log" / f"{table.version() + 1:020d}.json").exists():
            table.update_incremental()
        return table
    return _open(path, identity)


def _open(path: str, identity: tuple[int, ...] | None) -> Any:
    table = open_delta(path)
    with _OPEN_LOCK:
        _OPEN[path] = (table, identity if identity is not None else (table.version(), _elsewhere, time.monotonic()))
    return table


# Bumped whenever this process commits to a lake other than through the tables kept here (Spark's
# plan's batches): kept tables on object storage read their log again after it.
_elsewhere = 0
_FRESH_SECONDS = 60.0  # far inside the 30-minute log window: no commit it missed can have been cleaned up


def committed_elsewhere() -> None:
    """Say that this process commits (or committed) to its lake outside the kept tables (Spark's
    plan): kept tables read their log again, the driver's writers their table, and no background
    checkpoint runs beside Spark's commits."""
    global _elsewhere
    log_writer.forget()
    with _OPEN_LOCK:
        _elsewhere += 1


def _open_on_object_storage(path: str) -> Any:
    """open_table on S3: no request at all while nothing but this object committed to the table
    (the lease keeps other writers out; `committed_elsewhere` names this process's other commits)
    and its log was read within the last minute; else the update (a LIST). Opened afresh once a
    checkpoint interval of commits has passed since its opening, judged by versions, without the
    HEAD requests of `_identity`; a table removed and made again cannot happen under the lease.
    Why: each request to the store is a round trip of milliseconds, and every commit of a batch
    began with this one (on the S3 server a 2,000-event batch took 1.96x local disk's time)."""
    with _OPEN_LOCK:
        cached = _OPEN.get(path)
    if cached is not None:
        table, (opened_at, seen, read_at) = cached
        fresh = seen == _elsewhere and time.monotonic() - read_at < _FRESH_SECONDS
        if not fresh:
            read_at, seen = time.monotonic(), _elsewhere
            table.update_incremental()
        if table.version() - opened_at < log_writer.checkpoint_interval(table, default=100):
            with _OPEN_LOCK:
                _OPEN[path] = (table, (opened_at, seen, read_at))
            return table
    return _open(path, None)


def _identity(path: str) -> tuple[int, int, int] | None:
    """Which table lives at `path` (on local disk) and from which checkpoint: its log folder's inode
    (which a file system may reuse), the time of its first commit (gone once log retention removes
    it: then the table is opened once more) and the time `_last_checkpoint` was last written (-1
    before any)."""
    log = location(path) / "_delta_log"
    try:
        inode = log.stat().st_ino
    except OSError:
        return None

    def mtime(name: str) -> int:
        try:
            return (log / name).stat().st_mtime_ns
        except OSError:
            return -1

    return inode, mtime(f"{0:020d}.json"), mtime("_last_checkpoint")


def forget_tables() -> None:
    """Drop the tables `open_table` keeps and the driver's writers: each is read from its log again."""
    log_writer.forget()
    with _OPEN_LOCK:
        _OPEN.clear()


def append_table(path: str, rows: pa.Table, batch_id: int) -> None:
    """Append `rows` to the Delta table at `path` in one commit tagged with its batch (lake.log_writer)."""
    log_writer.append(path, rows, batch_id)


def append_row(path: str, schema_sql: str, values: Sequence[Any], batch_id: int) -> None:
    """Append one row (`values` in the schema's order) to the Delta table at `path`, tagged with its batch."""
    schema = arrow_schema(schema_sql)
    append_table(path, pa.Table.from_arrays([pa.array([v], type=f.type) for v, f in zip(values, schema)], schema=schema), batch_id)


def arrow_rows(schema_sql: str, frame: DataFrame) -> pa.Table:
    """A DataFrame's rows on the driver as Arrow, in the table schema `schema_sql` (one Spark job)."""
    schema = arrow_schema(schema_sql)
    return frame.select(*schema.names).toArrow().cast(schema)


def append_rows(path: str, rows: pa.Table, batch_id: int) -> int:
    """Append rows (`arrow_rows`) to the table at `path` with delta-rs; returns how many.

    One Spark job computes the rows (as Spark's own append would), and the commit costs
    milliseconds instead of Delta's transaction in the JVM (0.3-0.5 s)."""
    append_table(path, rows, batch_id)  # even empty: the commit is the batch's mark (lake.committed_batches)
    return rows.num_rows

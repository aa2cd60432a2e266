"""`market-spread maintain`: compaction (OPTIMIZE) and VACUUM of the lake's Delta tables.

Why compaction never runs beside a live stream: on a local file system Delta 4.4 commits through
`HDFSLogStore`, which checks that the next log file (`_delta_log/N.json`) does not exist and then
renames a temporary file onto it. The check and the rename are guarded by a lock inside one JVM
only, and a POSIX rename replaces an existing file, so two JVMs (the stream and this command)
committing version N at the same moment can both "succeed", the second silently erasing the
first: an append of the stream could vanish from the table while its checkpoint says it was
written (exactly-once broken, with no error). Optimistic concurrency only helps when the
put-if-absent is atomic (HDFS, or S3/GCS/Azure log stores), not here.

So `maintain` takes the lake's writer lock (the one `stream` holds, `LAKE/_stream.lock`):
- lock free: no stream can start meanwhile; OPTIMIZE then VACUUM every table, retrying on
  Delta's concurrent-modification errors (e.g. a `validate` appending quality results) with
  backoff.
- lock held by a live stream: OPTIMIZE is skipped and only VACUUM runs, with vacuum logging off so
  that it writes no commit at all: it only deletes files that no snapshot references and that were
  removed more than `--retain-hours` ago, which a concurrent append never touches.
The Airflow maintenance DAG therefore asks the stream to stop for a short window first.

Quote history retention (`--quote-retention-days N`, default 0: keep everything) deletes the
`quotes` rows of days before today (UTC) minus N: a DELETE is a commit like OPTIMIZE's, so it runs
only while `maintain` holds the writer lock, and is skipped (and said so) beside a live stream. The
deleted files leave the disk at a later VACUUM, once older than `--retain-hours`.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, TypeVar

from market_spread.errors import UsageError
from market_spread.lake.lock import LakeBusy, LeaseLock, WriterLock, writer_lock
from market_spread.runtime import spark_jvm
from market_spread.runtime.storage import Location, S3Config, location

DEFAULT_RETAIN_HOURS = 168  # Delta's own default retention: 7 days
EXTRA_TABLES = ("quality_results",)
CONFLICT_MARKERS = (
    "ConcurrentAppendException",
    "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException",
    "ConcurrentTransactionException",
    "ConcurrentWriteException",
    "ConcurrentModificationException",
    "MetadataChangedException",
    "ProtocolChangedException",
    "DELTA_CONCURRENT_",
    "DELTA_METADATA_CHANGED",
    "DELTA_PROTOCOL_CHANGED",
)
T = TypeVar("T")


def quote_cutoff(days: int, today: date | None = None) -> date:
    """The first quote_date kept: today (UTC) minus `days`."""
    today = today or datetime.now(UTC).date()
    return today - timedelta(days=days)


def expire_quotes(spark: Any, path: str, cutoff: date) -> int:
    """DELETE the quote history before `cutoff` (a partition predicate: whole files go); rows deleted."""
    rows = spark.sql(f"DELETE FROM delta.`{path}` WHERE quote_date < DATE'{cutoff.isoformat()}'").collect()
    return int(rows[0]["num_affected_rows"]) if rows and "num_affected_rows" in rows[0].asDict() else 0


def is_conflict(exc: BaseException) -> bool:
    """A Delta optimistic-concurrency conflict (worth retrying), from Python or through Py4J."""
    text = f"{type(exc).__name__}: {exc}"
    return any(marker in text for marker in CONFLICT_MARKERS)


def with_conflict_retries(
    action: Callable[[], T],
    attempts: int,
    what: str,
    base_delay: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
    out: Callable[[str], None] = print,
) -> T:
    """Run `action`; on a Delta write conflict wait (exponential backoff with jitter) and rerun it."""
    for attempt in range(1, attempts + 1):
        try:
            return action()
        except Exception as exc:
            if not is_conflict(exc) or attempt >= attempts:
                raise
            delay = base_delay * 2 ** (attempt - 1) * (0.5 + random.random())
            first_line = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            out(f"maintain: {what}: write conflict ({first_line}); retry {attempt}/{attempts - 1} in {delay:.1f}s")
            sleep(delay)
    raise AssertionError("unreachable")


def _count_data_files(path: Location) -> int:
    return sum(1 for p in path.rglob("*.parquet") if "_delta_log" not in p.parts)


def optimize(spark: Any, path: str) -> tuple[int, int]:
    """OPTIMIZE (bin-packing compaction): (files removed, files added)."""
    rows = spark.sql(f"OPTIMIZE delta.`{path}`").collect()
    metrics = rows[0]["metrics"] if rows else None
    if metrics is None:
        return 0, 0
    return int(metrics["numFilesRemoved"] or 0), int(metrics["numFilesAdded"] or 0)


def vacuum(spark: Any, path: str, hours: int) -> int:
    """VACUUM: delete files unreferenced for longer than `hours`; returns how many it deleted."""
    doomed = spark.sql(f"VACUUM delta.`{path}` RETAIN {hours} HOURS DRY RUN").count()
    if doomed:
        spark.sql(f"VACUUM delta.`{path}` RETAIN {hours} HOURS").collect()
    return doomed


@dataclass(frozen=True)
class MaintainSpec:
    """One run of `maintain`: the command's options, typed."""

    lake: Location  # a local folder or an S3 prefix
    retain_hours: int = DEFAULT_RETAIN_HOURS
    tables: tuple[str, ...] | None = None  # None: every product table present
    attempts: int = 5  # tries per operation on Delta write conflicts
    quote_retention_days: int = 0  # 0 keeps every quote
    master: str | None = None  # Spark master URL


def maintain(spec: MaintainSpec) -> int:
    """Compact, expire and vacuum the lake's tables; the exit code (1 when a table failed).
    UsageError for a missing lake or an unknown table."""
    known = tables_to_maintain(spec.lake, spec.tables)
    if not known:
        print(f"maintain: no tables in {spec.lake}: nothing to do")
        return 0
    lock = writer_lock(spec.lake)
    exclusive = _take_lock(lock, spec.lake)
    if spec.retain_hours < DEFAULT_RETAIN_HOURS:
        print(
            f"maintain: warning: --retain-hours {spec.retain_hours} is below 7 days: time travel and readers of "
            "older snapshots lose their files",
            flush=True,
        )
    # Imported here: it loads pyspark, and `market-spread --help` imports this module (DEFAULT_RETAIN_HOURS).
    from market_spread.runtime.spark import build_session

    spark = None
    try:
        spark = build_session(
            "market-spread-maintain",
            master=spec.master,
            # VACUUM lists the table with this many tasks (default 10000), far too many for a small
            # table on a few cores (measured: docs/performance.md, row 'VACUUM's file listing').
            extra_conf={"spark.sql.sources.parallelPartitionDiscovery.parallelism": "8"},
        )
        spark_jvm.bound_s3a_requests(spark, S3Config.from_env().s3a_try_seconds)  # under the lease, as the stream's
        _configure(spark, spec, lock, exclusive)
        failed = [table for table in known if not _maintain_table(spark, spec, table, exclusive)]
    finally:
        if spark is not None:
            spark.stop()
        if exclusive:
            lock.release()
    print(
        f"maintain: done: {len(known) - len(failed)} of {len(known)} tables maintained"
        + (f"; failed: {', '.join(failed)}" if failed else ""),
        flush=True,
    )
    return 1 if failed else 0


def tables_to_maintain(lake: Location, wanted: Sequence[str] | None) -> list[str]:
    """The tables present in the lake, only those `wanted` if given; UsageError for unknown ones."""
    from market_spread.lake import tables as lake_mod  # here: it loads pyspark (see maintain)

    if not lake.is_dir():
        raise UsageError(f"lake not found: {lake}")
    known = [t for t in (*lake_mod.TABLES, *EXTRA_TABLES) if lake_mod.is_delta_table(lake / t)]
    if wanted:
        unknown = sorted(set(wanted) - set(known))
        if unknown:
            raise UsageError(f"no such table in {lake}: {', '.join(unknown)} (present: {', '.join(known) or 'none'})")
        known = [t for t in known if t in wanted]
    return known


def _take_lock(lock: WriterLock | LeaseLock, lake: Location) -> bool:
    """Take the writer lock if no stream holds it: whether this run may commit (compaction, retention)."""
    try:
        lock.acquire()
    except LakeBusy as exc:
        print(
            f"maintain: {lake}: {exc}: compaction skipped (two JVMs committing to one Delta table on a local "
            "file system can overwrite each other's commit); vacuum only, without log commits",
            flush=True,
        )
        return False
    lock.record(role="maintain")
    print(f"maintain: {lake}: no stream running; holding the writer lock: compaction and vacuum", flush=True)
    return True


def _configure(spark: Any, spec: MaintainSpec, lock: WriterLock | LeaseLock, exclusive: bool) -> None:
    """Set the session for this run (vacuum logging only while this run holds the lake)."""
    if exclusive:
        # A new stream waits for this JVM to be gone before it writes (see WriterLock).
        lock.record(role="maintain", jvm_pid=spark_jvm.driver_pid(spark))
    # Vacuum logging writes two commits (VACUUM START/END): only safe while we hold the lake.
    spark.conf.set("spark.databricks.delta.vacuum.logging.enabled", "true" if exclusive else "false")
    if spec.retain_hours < DEFAULT_RETAIN_HOURS:
        spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")


def _maintain_table(spark: Any, spec: MaintainSpec, table: str, exclusive: bool) -> bool:
    """Retention, OPTIMIZE (both only when `exclusive`) and VACUUM of one table; False when it failed
    (reported): one table's failure must not stop the others' maintenance."""
    from market_spread.lake.tables import table_path  # loaded by now (tables_to_maintain)

    path = table_path(spec.lake, table)
    try:
        if table == "quotes" and spec.quote_retention_days:
            _expire(spark, spec, path, exclusive)
        if exclusive:
            began = time.monotonic()
            removed, added = with_conflict_retries(lambda: optimize(spark, path), spec.attempts, f"{table}: optimize")
            print(
                f"maintain: {table}: optimize: {removed} files compacted into {added} "
                f"({time.monotonic() - began:.1f}s)",
                flush=True,
            )
        began = time.monotonic()
        deleted = with_conflict_retries(
            lambda: vacuum(spark, path, spec.retain_hours), spec.attempts, f"{table}: vacuum"
        )
        print(
            f"maintain: {table}: vacuum: {deleted} unreferenced files deleted (retain {spec.retain_hours}h), "
            f"{_count_data_files(location(path))} data files on disk ({time.monotonic() - began:.1f}s)",
            flush=True,
        )
        return True
    except Exception as exc:  # noqa: BLE001 - one table's failure is said and the others are still maintained
        message = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        print(f"maintain: {table}: failed: {message}", file=sys.stderr, flush=True)
        return False


def _expire(spark: Any, spec: MaintainSpec, path: str, exclusive: bool) -> None:
    """Quote history retention: a DELETE is a commit, so only while this run holds the lake."""
    if not exclusive:
        print("maintain: quotes: retention skipped: a stream holds the lake (a DELETE is a commit)", flush=True)
        return
    cutoff = quote_cutoff(spec.quote_retention_days)
    deleted_rows = with_conflict_retries(lambda: expire_quotes(spark, path, cutoff), spec.attempts, "quotes: retention")
    print(
        f"maintain: quotes: retention {spec.quote_retention_days} days: {deleted_rows} rows before {cutoff} deleted",
        flush=True,
    )

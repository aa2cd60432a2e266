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

import argparse
import random
import sys
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, TypeVar

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
    today = today or datetime.now(timezone.utc).date()
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


def _count_data_files(path: Path) -> int:
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


def run(args: argparse.Namespace) -> int:
    from market_spread.lake import tables as lake_mod
    from market_spread.cli.main import UsageError
    from market_spread.lake.lock import LOCK_FILE, LakeBusy, WriterLock

    lake = Path(args.lake)
    if not lake.is_dir():
        raise UsageError(f"lake not found: {lake}")
    known = [t for t in (*lake_mod.TABLES, *EXTRA_TABLES) if lake_mod.is_delta_table(lake / t)]
    if args.tables:
        unknown = sorted(set(args.tables) - set(known))
        if unknown:
            raise UsageError(f"no such table in {lake}: {', '.join(unknown)} (present: {', '.join(known) or 'none'})")
        known = [t for t in known if t in args.tables]
    if not known:
        print(f"maintain: no tables in {lake}: nothing to do")
        return 0

    lock = WriterLock(lake / LOCK_FILE)
    try:
        lock.acquire()
        exclusive = True
        lock.record(role="maintain")
        print(f"maintain: {lake}: no stream running; holding the writer lock: compaction and vacuum", flush=True)
    except LakeBusy as exc:
        exclusive = False
        print(
            f"maintain: {lake}: {exc}: compaction skipped (two JVMs committing to one Delta table on a local "
            "file system can overwrite each other's commit); vacuum only, without log commits",
            flush=True,
        )
    if args.retain_hours < DEFAULT_RETAIN_HOURS:
        print(
            f"maintain: warning: --retain-hours {args.retain_hours} is below 7 days: time travel and readers of "
            "older snapshots lose their files",
            flush=True,
        )

    spark = None
    failed: list[str] = []
    try:
        from market_spread.runtime.spark import build_session

        spark = build_session(
            "market-spread-maintain",
            master=args.master,
            # VACUUM lists the table with this many tasks (default 10000): 80 s instead of 5 s on a
            # small table with 2 cores.
            extra_conf={"spark.sql.sources.parallelPartitionDiscovery.parallelism": "8"},
        )
        if exclusive:
            # A new stream waits for this JVM to be gone before it writes (see WriterLock).
            lock.record(role="maintain", jvm_pid=spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
        # Vacuum logging writes two commits (VACUUM START/END): only safe while we hold the lake.
        spark.conf.set("spark.databricks.delta.vacuum.logging.enabled", "true" if exclusive else "false")
        if args.retain_hours < DEFAULT_RETAIN_HOURS:
            spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
        for table in known:
            path = lake_mod.table_path(lake, table)
            try:
                if table == "quotes" and args.quote_retention_days:
                    cutoff = quote_cutoff(args.quote_retention_days)
                    if exclusive:
                        deleted_rows = with_conflict_retries(
                            lambda: expire_quotes(spark, path, cutoff), args.attempts, f"{table}: retention"
                        )
                        print(f"maintain: quotes: retention {args.quote_retention_days} days: {deleted_rows} rows "
                              f"before {cutoff} deleted", flush=True)
                    else:
                        print("maintain: quotes: retention skipped: a stream holds the lake (a DELETE is a commit)",
                              flush=True)
                if exclusive:
                    began = time.monotonic()
                    removed, added = with_conflict_retries(lambda: optimize(spark, path), args.attempts, f"{table}: optimize")
                    print(
                        f"maintain: {table}: optimize: {removed} files compacted into {added} "
                        f"({time.monotonic() - began:.1f}s)",
                        flush=True,
                    )
                began = time.monotonic()
                deleted = with_conflict_retries(
                    lambda: vacuum(spark, path, args.retain_hours), args.attempts, f"{table}: vacuum"
                )
                print(
                    f"maintain: {table}: vacuum: {deleted} unreferenced files deleted (retain {args.retain_hours}h), "
                    f"{_count_data_files(Path(path))} data files on disk ({time.monotonic() - began:.1f}s)",
                    flush=True,
                )
            except Exception as exc:  # one table's failure must not stop the others' maintenance
                failed.append(table)
                message = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
                print(f"maintain: {table}: failed: {message}", file=sys.stderr, flush=True)
    finally:
        if spark is not None:
            spark.stop()
        if exclusive:
            lock.release()
    print(f"maintain: done: {len(known) - len(failed)} of {len(known)} tables maintained"
          + (f"; failed: {', '.join(failed)}" if failed else ""), flush=True)
    return 1 if failed else 0

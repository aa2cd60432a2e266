"""The alerts a validate run checks: those appended after the high-water mark, found by Delta time
travel (`versionAsOf`) without needing the change data feed, with the batch_metrics rows they must
add up to."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from market_spread.lake import tables as lake_mod
from market_spread.quality.defaults import DEFAULT_ORPHAN_GRACE_S
from market_spread.quality.versions import _read, commit_time, latest_version

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SMALL_ROWS = 1_000_000  # below this a slice is validated on one partition: task overhead dominates


@dataclass
class _AlertSlice:
    df: DataFrame
    from_version: int | None
    to_version: int
    rows: int
    notes: list[str]
    metrics: DataFrame  # batch_metrics rows of the validated batches
    orphans: list[int] = field(default_factory=list)  # validated batches with no batch_metrics row
    to_batch: int | None = None  # the newest batch validated up to to_version (the mark's batch)


def _max_batch(df: DataFrame) -> int | None:
    value = df.agg({"batch_id": "max"}).collect()[0][0]
    return None if value is None else int(value)


def _profile(df: DataFrame) -> tuple[int, list[int]]:
    """Row count and distinct non-null batch ids in one pass."""
    from pyspark.sql import functions as F

    row = df.agg(F.count(F.lit(1)), F.collect_set("batch_id")).collect()[0]
    return int(row[0]), sorted(int(b) for b in row[1])


def _slice_alerts(spark: SparkSession, lake: str, from_version: int | None,
                  orphan_grace_s: float = DEFAULT_ORPHAN_GRACE_S, now: float | None = None,
                  from_batch: int | None = None) -> _AlertSlice:
    """The alerts appended after `from_version`, with the batch_metrics rows they must add up to.

    When that version can no longer be read (the log keeps 30 minutes, lake.tables) and the mark's
    newest batch `from_batch` is known, the alerts of later batches are the same rows: a batch's
    alerts are committed at once, and batches in order.

    Alerts of the newest batch are held back while its batch_metrics row can still come (the batch
    is in flight): no later batch has a metrics row and their commit is younger than
    `orphan_grace_s`. Past that they are validated, and reported as orphans.
    """
    alerts_path = lake_mod.table_path(lake, "alerts")
    notes: list[str] = []
    to_version = latest_version(alerts_path)
    if from_version is not None and from_version > to_version:
        notes.append(f"mark {from_version} is beyond the table's version {to_version}: validating everything")
        from_version = None
    # Read batch_metrics after pinning the alerts version: the stream writes a batch's metrics
    # after its alerts, so every batch visible in these alerts has had its chance to be counted.
    metrics_path = lake_mod.table_path(lake, "batch_metrics")
    metrics_all = _read(spark, metrics_path, latest_version(metrics_path)).select("batch_id", "alerts")

    while True:
        new = _new_alerts(spark, alerts_path, from_version, to_version, from_batch, notes)
        from_version = new.from_version
        top_batch = new.batch_ids[-1] if new.batch_ids else None
        lowest = from_version if from_version is not None else 0
        if (_in_flight(metrics_all, top_batch, alerts_path, to_version, orphan_grace_s, now, notes)
                and to_version > lowest):
            # The newest batch's metrics are not committed yet (the stream is mid-batch): leave its
            # alerts to the next run rather than report a mismatch that is about to resolve itself.
            notes.append(
                f"alerts of batch {top_batch} have no batch_metrics row yet (batch in progress): "
                f"held back from version {to_version}"
            )
            to_version -= 1
            continue
        break

    metrics, orphans = _their_metrics(metrics_all, new.batch_ids, new.base_batch, top_batch)
    return _AlertSlice(new.df, from_version, to_version, new.rows, notes, metrics, orphans,
                       top_batch if top_batch is not None else new.base_batch)


class _NewAlerts(NamedTuple):
    df: DataFrame
    from_version: int | None  # None when that version could not be read and every alert is validated
    base_batch: int | None  # the newest batch before the slice (None: from the first)
    rows: int
    batch_ids: list[int]  # sorted


def _new_alerts(spark: SparkSession, alerts_path: str, from_version: int | None, to_version: int,
                from_batch: int | None, notes: list[str]) -> _NewAlerts:
    """The alerts of `to_version` not in `from_version`; when that one is no longer readable, those
    of the batches after `from_batch`, or else every alert (said in `notes`)."""
    from pyspark.sql import functions as F

    new = _read(spark, alerts_path, to_version)
    base_batch = None
    if from_version is None:
        return _NewAlerts(new, from_version, base_batch, *_profile(new))
    try:
        old = _read(spark, alerts_path, from_version)
        base_batch = _max_batch(old)
        # Multiset difference: exact even after compaction rewrote the files. Counting here
        # reads the old version's files, so a vacuumed version fails inside this try.
        new = new.exceptAll(old)
        rows, batch_ids = _profile(new)
    except Exception as exc:  # e.g. the old version's files were vacuumed, or its log removed
        reason = f"version {from_version} of alerts is no longer readable ({str(exc).strip().splitlines()[0][:120]})"
        new = _read(spark, alerts_path, to_version)
        if from_batch is not None:
            notes.append(f"{reason}; validating the alerts of batches after {from_batch} instead")
            base_batch = from_batch
            # A row without a batch is always shown (the suite rejects it).
            new = new.where((F.col("batch_id") > from_batch) | F.col("batch_id").isNull())
        else:
            notes.append(f"{reason}; validating every alert instead")
            from_version, base_batch = None, None
        rows, batch_ids = _profile(new)
    return _NewAlerts(new, from_version, base_batch, rows, batch_ids)


def _in_flight(metrics_all: DataFrame, top_batch: int | None, alerts_path: str, to_version: int,
               orphan_grace_s: float, now: float | None, notes: list[str]) -> bool:
    """Whether the newest batch `top_batch` looks in flight: no metrics row for it nor any later
    batch, and its alerts' commit younger than the grace (past that: orphans, said in `notes`)."""
    import time as time_mod
    from pyspark.sql import functions as F

    if top_batch is None:
        return False
    newest_metrics, has_top = metrics_all.agg(
        F.max("batch_id"), F.max(F.when(F.col("batch_id") == top_batch, 1))
    ).collect()[0]
    # Missing only for the newest batch is a batch in progress; a gap before the newest
    # metrics is a real loss and is left to the count check.
    if not (has_top is None and (newest_metrics is None or top_batch > newest_metrics)):
        return False
    committed = commit_time(alerts_path, to_version)
    age = (time_mod.time() if now is None else now) - committed if committed is not None else None
    if age is None or age >= orphan_grace_s:
        # The batch cannot be in flight any more: validate its rows (the count check and the
        # orphan check fail on them) rather than hold the mark back for good.
        notes.append(
            f"alerts of batch {top_batch} have had no batch_metrics row for "
            + ("longer than the log keeps" if age is None else f"{age:.0f}s")
            + f" (grace {orphan_grace_s:g}s): validated as orphans"
        )
        return False
    return True


def _their_metrics(metrics_all: DataFrame, batch_ids: list[int], base_batch: int | None,
                   top_batch: int | None) -> tuple[DataFrame, list[int]]:
    """The batch_metrics rows the slice's alerts must add up to, and its batches without one."""
    from pyspark.sql import functions as F

    cond = F.col("batch_id").isin(batch_ids) if batch_ids else F.lit(False)
    if top_batch is not None:
        # Batches between the last validated one and the newest that wrote no alert rows must
        # have counted none: this is how lost alerts show up.
        low = F.lit(True) if base_batch is None else F.col("batch_id") > base_batch
        cond = cond | (low & (F.col("batch_id") <= top_batch))
    metrics = metrics_all.where(cond)
    orphans: list[int] = []
    if batch_ids:
        counted = {int(r[0]) for r in metrics_all.where(F.col("batch_id").isin(batch_ids)).select("batch_id").distinct().collect()}
        orphans = [b for b in batch_ids if b not in counted]
    return metrics, orphans


def _small(df: DataFrame, rows: int) -> DataFrame:
    return df.coalesce(1) if rows <= SMALL_ROWS else df

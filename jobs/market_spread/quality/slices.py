"""The alerts a validate run checks, selected by batch: those of every finished batch (one with a
batch_metrics row) that no passing run has validated yet, with the batch_metrics rows they must add
up to, plus the alerts of batches that can no longer finish (orphans) and rows without a batch.
No old table version is read: compaction and log clean-up change nothing here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from market_spread.lake import tables as lake_mod
from market_spread.quality.defaults import DEFAULT_ORPHAN_GRACE_S
from market_spread.quality.results_table import Ranges
from market_spread.quality.versions import _read, newest_data_commit, version_to_read

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

SMALL_ROWS = 1_000_000  # below this a slice is validated on one partition: task overhead dominates


@dataclass
class _AlertSlice:
    df: DataFrame
    from_version: int | None  # the newest alerts version a passing run had read (shown only)
    to_version: int  # the alerts version read
    rows: int
    notes: list[str]
    metrics: DataFrame  # batch_metrics rows of the validated batches
    batches: list[int] = field(default_factory=list)  # finished batches validated (recorded if the run passes)
    orphans: list[int] = field(default_factory=list)  # validated batches with no batch_metrics row
    held: int | None = None  # the batch in flight whose alerts wait for the next run


def _not_in(ranges: Ranges | None) -> Column:
    """Rows whose batch is not in `ranges` (None: none validated), and rows without a batch (the
    suite rejects them)."""
    from pyspark.sql import functions as F

    col = F.col("batch_id")
    done = F.lit(False)
    for lo, hi in ranges or []:
        done = done | ((col <= hi) if lo is None else col.between(lo, hi))
    return col.isNull() | ~done


def _slice_alerts(
    spark: SparkSession,
    lake: str,
    validated: Ranges | None,
    orphan_grace_s: float = DEFAULT_ORPHAN_GRACE_S,
    now: float | None = None,
    from_version: int | None = None,
) -> _AlertSlice:
    """The alerts of the batches not in `validated` (None: every alert, `--full`), with the
    batch_metrics rows they must add up to.

    Alerts of a batch without a batch_metrics row are held back only while it may be in flight:
    its alerts are the table's newest commit, younger than `orphan_grace_s`, and no later batch has a
    metrics row. Any other batch without one is validated and reported as an orphan.
    """
    from pyspark.sql import functions as F

    alerts_path = lake_mod.table_path(lake, "alerts")
    notes: list[str] = []
    to_version = version_to_read(spark, alerts_path)
    pending = _read(spark, alerts_path, to_version).where(_not_in(validated))
    per_batch = {r[0]: int(r[1]) for r in pending.groupBy("batch_id").count().collect()}
    alert_batches = sorted(int(b) for b in per_batch if b is not None)
    newest_known = max([hi for _, hi in validated or []] + alert_batches, default=None)
    # Read batch_metrics after pinning the alerts version: the stream writes a batch's metrics
    # after its alerts, so every batch visible in these alerts has had its chance to be counted.
    # Metrics of batches above the newest alert read may belong to alerts committed since: next run.
    metrics_path = lake_mod.table_path(lake, "batch_metrics")
    metrics_all = _read(spark, metrics_path, version_to_read(spark, metrics_path)).select("batch_id", "alerts")
    bound = F.lit(False) if newest_known is None else F.col("batch_id") <= newest_known
    metrics = metrics_all.where(bound & _not_in(validated) & F.col("batch_id").isNotNull())
    counted = sorted(int(r[0]) for r in metrics.select("batch_id").distinct().collect())
    missing = sorted(set(alert_batches) - set(counted))
    held = _in_flight(metrics_all, missing, alerts_path, orphan_grace_s, now, notes)
    if held is not None:
        pending = pending.where(F.col("batch_id").isNull() | (F.col("batch_id") != held))
    orphans = [b for b in missing if b != held]
    if orphans:
        notes.append(
            f"alerts of batch(es) {orphans[:20]} have no batch_metrics row and their batch can no "
            f"longer be in flight: validated as orphans"
        )
    batches = sorted(set(counted) | set(alert_batches) - {held})
    notes.append(f"batches validated: {format_batches(batches)}")
    rows = sum(n for b, n in per_batch.items() if b != held)
    return _AlertSlice(pending, from_version, to_version, rows, notes, metrics, batches, orphans, held)


def format_batches(batches: list[int]) -> str:
    from market_spread.quality.results_table import format_ranges

    return f"{len(batches)} ({format_ranges(batches)})" if batches else "none"


def _in_flight(
    metrics_all: DataFrame,
    missing: list[int],
    alerts_path: str,
    orphan_grace_s: float,
    now: float | None,
    notes: list[str],
) -> int | None:
    """The batch among `missing` (alerts, no metrics row) that may still be in flight, or None: the
    one the table's newest data commit wrote, while that commit is younger than the grace and no
    later batch has a metrics row."""
    import time as time_mod

    if not missing:
        return None
    newest = newest_data_commit(alerts_path, version_to_read(metrics_all.sparkSession, alerts_path))
    candidates = [b for b in missing if newest is not None and b in newest[1]]
    if len(candidates) != 1:
        return None
    assert newest is not None  # the candidate was found in it
    batch = candidates[0]
    later = metrics_all.where(metrics_all["batch_id"] > batch).limit(1).count()
    if later:
        return None
    age = (time_mod.time() if now is None else now) - newest[0]
    if age >= orphan_grace_s:
        # The batch cannot be in flight any more: validate its rows (the count check and the
        # orphan check fail on them) rather than hold it back for good.
        notes.append(
            f"alerts of batch {batch} have had no batch_metrics row for {age:.0f}s (grace {orphan_grace_s:g}s)"
        )
        return None
    notes.append(f"alerts of batch {batch} have no batch_metrics row yet (batch in progress): held back")
    return batch


def _small(df: DataFrame, rows: int) -> DataFrame:
    return df.coalesce(1) if rows <= SMALL_ROWS else df

"""What one micro-batch (stream.batch) carries from step to step: the settings every batch of the
stream shares, the run's own bookkeeping, its result, and its last commit, the batch_metrics row."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cached_property
from datetime import datetime, timezone
from typing import Callable

from pyspark.sql import SparkSession

from market_spread.domain.rules import Thresholds
from market_spread.lake import delta_rs
from market_spread.lake import tables as lake_mod
from market_spread.lake.compaction import Compaction
from market_spread.lake.state_mirror import StateMirror
from market_spread.lake.writes import append, literal_row, ms_since, tagged
from market_spread.runtime.spark import spark_jobs_so_far


@dataclass
class BatchResult:
    batch_id: int
    input_lines: int = 0
    quotes: int = 0
    orders: int = 0
    alerts: int = 0
    quarantined: int = 0
    late_symbols: int = 0
    seconds: float = 0.0
    spark_jobs: int | None = None  # Spark jobs the batch ran (None where the count is not available)
    phases_ms: dict[str, int] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)  # the landing files (or topic/partitions) this batch took
    last_offsets: dict[str, int] = field(default_factory=dict)  # topic/partition -> highest offset taken
    skipped: list[str] = field(default_factory=list)  # tables already written by an earlier attempt
    compaction: Compaction | None = None  # the table compacted after this batch (lake.compaction)
    on_driver: bool = False  # parsed and checked on the driver (stream.driver_batch), not by Spark's plan

    def progress_line(self) -> str:
        return (
            f"batch {self.batch_id}: {self.input_lines} lines, {self.quotes} quotes, {self.orders} orders, "
            f"{self.alerts} alerts, {self.quarantined} quarantined in {self.seconds:.2f}s"
            + (f" (replayed; already written: {', '.join(self.skipped)})" if self.skipped else "")
            + (f"; {self.compaction}" if self.compaction else "")
        )


@dataclass(frozen=True)
class BatchSettings:
    """What every batch of one stream shares: where it writes, the symbol universe, the reject rule."""

    lake: str
    symbols: list[str]  # the universe
    thresholds: Thresholds
    # Raises when the stream may no longer commit (its lease lost): called before each batch's commits.
    before_commit: Callable[[], None] | None = None

    @cached_property
    def universe(self) -> frozenset[str]:
        return frozenset(self.symbols)

    def guard(self) -> None:
        if self.before_commit is not None:
            self.before_commit()


@dataclass
class BatchRun:
    """What the steps of one batch share: its session and id, the stream's marks and state, its result."""

    spark: SparkSession
    batch_id: int
    settings: BatchSettings
    committed: dict[str, int]  # table -> last batch written (updated in place)
    state: StateMirror
    result: BatchResult
    t0: float  # time.perf_counter() at the start: the batch's own time
    jobs0: int | None  # Spark jobs run before the batch
    started_at: datetime

    def describe(self, phase: str) -> None:
        """Name the phase in the Spark UI (a job description is per thread)."""
        self.spark.sparkContext.setJobDescription(f"market-spread batch {self.batch_id}: {phase}")

    def path(self, table: str) -> str:
        return lake_mod.table_path(self.settings.lake, table)


def commit_metrics(batch: BatchRun, driver_commits: bool) -> None:
    """Commit the batch_metrics row last: a metrics row means every other write of the batch is in."""
    result, batch_id = batch.result, batch.batch_id
    result.seconds = time.perf_counter() - batch.t0
    jobs1 = spark_jobs_so_far(batch.spark)
    # A metrics commit through Spark runs a job of its own: counted too, one more.
    result.spark_jobs = None if batch.jobs0 is None or jobs1 is None else jobs1 - batch.jobs0 + (0 if driver_commits else 1)
    values = (
        batch_id, batch.started_at, datetime.now(timezone.utc), result.quotes, result.orders,
        result.alerts, result.quarantined, result.input_lines, result.late_symbols,
        result.phases_ms["parse"], result.phases_ms["check"], result.phases_ms["write"],
        result.phases_ms["merge"], result.spark_jobs,
    )
    t3 = time.perf_counter()
    batch.describe("write batch_metrics")
    if batch.committed.get("batch_metrics", -1) < batch_id:
        schema, path = lake_mod.SCHEMAS["batch_metrics"], batch.path("batch_metrics")
        if driver_commits:  # one row of Python values: a few ms with delta-rs, 0.2-0.3 s through Spark
            delta_rs.append_row(path, schema, values, batch_id)
        else:
            with tagged(batch.spark, batch_id):
                append(literal_row(batch.spark, schema, values), path)
        batch.committed["batch_metrics"] = batch_id
    else:
        result.skipped.append("batch_metrics")
    result.phases_ms["commit_metrics"] = ms_since(t3)

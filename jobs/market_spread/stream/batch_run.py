"""What one micro-batch (stream.batch, and its placement: stream.driver_batch, stream.executors)
carries from step to step: the stream's spec (stream.spec.StreamSpec), the run's own bookkeeping,
its result; and the steps both placements end with: the writes side by side, the batch_metrics
row, compaction."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
from pyspark.sql import SparkSession

from market_spread.lake import tables as lake_mod
from market_spread.lake.compaction import Compaction, Compactor
from market_spread.lake.lake_tables import LakeTables
from market_spread.lake.state_mirror import StateMirror
from market_spread.lake.writes import ms_since, run_all
from market_spread.runtime import durable
from market_spread.runtime.spark import batch_jobs, spark_jobs_so_far
from market_spread.stream.spec import StreamSpec

if TYPE_CHECKING:
    from market_spread.sources.driver_read import DriverReader


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
    on_driver: bool = False  # read, parsed and checked in the driver process (stream.driver_batch)
    placement: str = ""  # where the batch's kernel ran, and why (stream.placement)
    # Per table, the library its commits went through and why (lake.protocol): metrics and the Stream page.
    writers: dict[str, tuple[str, str]] = field(default_factory=dict)

    def progress_line(self) -> str:
        return (
            f"batch {self.batch_id}: {self.input_lines} lines, {self.quotes} quotes, {self.orders} orders, "
            f"{self.alerts} alerts, {self.quarantined} quarantined in {self.seconds:.2f}s"
            + (f" (replayed; already written: {', '.join(self.skipped)})" if self.skipped else "")
            + (f"; {self.compaction}" if self.compaction else "")
        )


@dataclass
class BatchRun:
    """What the steps of one batch share: its session and id, the stream's marks and state, its result."""

    spark: SparkSession
    batch_id: int
    settings: StreamSpec  # the stream's one spec (stream.query)
    committed: dict[str, int]  # table -> last batch written (updated in place)
    state: StateMirror
    tables: LakeTables  # the lake's tables as the stream keeps them: its commits go through them
    result: BatchResult
    t0: float  # time.perf_counter() at the start: the batch's own time
    jobs0: int | None  # Spark jobs run before the batch
    started_at: datetime
    reader: DriverReader | None = None  # the stream's reader of batches on the driver (None: one-off, serial)

    def describe(self, phase: str) -> None:
        """Name the phase in the Spark UI (a job description is per thread)."""
        self.spark.sparkContext.setJobDescription(f"market-spread batch {self.batch_id}: {phase}")

    def path(self, table: str) -> str:
        return lake_mod.table_path(self.settings.lake, table)


def commit_metrics(batch: BatchRun) -> None:
    """Commit the batch_metrics row last: a metrics row means every other write of the batch is in."""
    result, batch_id = batch.result, batch.batch_id
    result.seconds = time.perf_counter() - batch.t0
    jobs = batch_jobs(batch.spark, batch.jobs0, spark_jobs_so_far(batch.spark))
    result.spark_jobs = jobs
    values = {
        "batch_id": batch_id,
        "started_at": batch.started_at,
        "finished_at": datetime.now(UTC),
        "quotes": result.quotes,
        "orders": result.orders,
        "alerts": result.alerts,
        "quarantined": result.quarantined,
        "input_lines": result.input_lines,
        "late_symbols": result.late_symbols,
        **{f"{phase}_ms": result.phases_ms[phase] for phase in ("parse", "check", "write", "merge")},
        "spark_jobs": result.spark_jobs,
        "placement": result.placement or None,
        "state_batch": batch.state.writes.current_through(batch_id),
    }
    t3 = time.perf_counter()
    batch.describe("write batch_metrics")
    if batch.committed.get("batch_metrics", -1) < batch_id:
        # One row of Python values: far cheaper with delta-rs than through Spark (measured:
        # docs/performance.md, row 'commits from the driver with delta-rs').
        batch.tables.append("batch_metrics", one_row("batch_metrics", values), batch_id, batch.settings.before_commit)
        batch.committed["batch_metrics"] = batch_id
    else:
        result.skipped.append("batch_metrics")
    result.phases_ms["commit_metrics"] = ms_since(t3)


def one_row(table: str, values: dict[str, Any]) -> pa.Table:
    """One row of `table` from its values by column name, as Arrow (KeyError: a column without one)."""
    schema = lake_mod.arrow_schema(table)
    return pa.Table.from_arrays([pa.array([values[f.name]], type=f.type) for f in schema], schema=schema)


def run_writes(
    batch: BatchRun, planned: Mapping[str, Callable[[], object]], newest: Callable[[], object] | None
) -> list[str]:
    """Run the planned writes side by side, each table once (a replay skips the tables that already
    hold the batch), the driver's copy of the state moving on with the MERGE. Returns the tables written."""
    result, state = batch.result, batch.state
    # Each write names its table in the Spark UI (a job description is per thread). Not for the
    # driver's commits, which run no Spark job: the name is a py4j call, and the first from each
    # new write thread opens a connection to the JVM (measured: docs/performance.md, row 'the
    # driver's write threads no longer name their Spark job').
    spark_jobs = not result.on_driver

    def described(table: str, write: Callable[[], object]) -> Callable[[], None]:
        def step() -> None:
            if spark_jobs:
                batch.describe(f"write {table}")
            write()

        return step

    writes = {t: described(t, w) for t, w in planned.items()}
    for table in [t for t in writes if batch.committed.get(t, -1) >= batch.batch_id]:
        del writes[table]  # a replay: this table already holds the batch
        result.skipped.append(table)
    tasks = dict(writes)
    if result.quotes and state.enabled and newest is not None:  # not a table

        def advance_state_mirror() -> None:
            if spark_jobs:
                batch.describe("advance state mirror")
            state.take(newest())

        tasks["state_mirror"] = advance_state_mirror
    # Different tables: side by side, since a small commit is mostly waiting (and delta-rs lets go
    # of the interpreter while it works). Each commit carries the batch's mark (lake.commits).
    run_all(tasks, result.phases_ms, batch.tables.write_pool)
    for table in writes:
        batch.committed[table] = batch.batch_id
    return list(writes)


def finish(batch: BatchRun, written: list[str], compactor: Compactor | None) -> None:
    """The batch_metrics row last, then the batch made durable, then compaction (each commit proves
    the lease right before it)."""
    commit_metrics(batch)
    sync_step(batch)
    if compactor is not None:
        compact_step(batch, compactor, written)
    batch.result.seconds = time.perf_counter() - batch.t0


def sync_step(batch: BatchRun) -> None:
    """After the batch's last commit and before it returns to Spark (which then writes the
    checkpoint's `commits/B`): what it wrote on a local disk, lake and checkpoint, on stable storage
    (runtime.durable). Its time counts in the batch's, not in its metrics row (committed before)."""
    spec = batch.settings
    batch.result.phases_ms["sync"] = int(1000 * durable.make_durable((spec.lake, spec.checkpoint_path)))


def compact_step(batch: BatchRun, compactor: Compactor, written: list[str]) -> None:
    """Start compacting a table that has had enough commits, in the background; the batch's result
    names the compaction that finished since the last batch. Its time counts in the batch's, not in
    its metrics row."""
    t4 = time.perf_counter()
    batch.describe("compact")
    compactor.wrote([*written, "batch_metrics"])
    batch.result.compaction = compact_quietly(compactor, batch.committed, guard=batch.settings.guard)
    batch.result.phases_ms["compact"] = ms_since(t4)


def compact_quietly(
    compactor: Compactor, committed: dict[str, int], wait: bool = False, guard: Callable[[], object] | None = None
) -> Compaction | None:
    """`compactor.run` (and with `wait`, waiting for the compaction it starts), whose failure does
    not fail the batch: every row of the batch is committed and a failed compaction commits
    nothing. Said on stderr; the table is tried again after another `every` commits."""
    try:
        started = compactor.run(committed, guard)
        return compactor.finished(wait=True) if wait else started
    except Exception as exc:  # noqa: BLE001 - see above
        compaction_failed(compactor, exc)
        return None


def compaction_failed(compactor: Compactor, exc: BaseException) -> None:
    """Say a failed compaction in one line; its table is read from its log again."""
    compactor.tables.forget()
    first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
    print(f"warning: compaction failed (no row changed; tried again later): {first}", file=sys.stderr, flush=True)


T = TypeVar("T")


def once(compute: Callable[[], T]) -> Callable[[], T]:
    """`compute()` run by the first of the concurrent writes that needs it, shared with the others."""
    lock, box = threading.Lock(), list[T]()

    def get() -> T:
        with lock:
            if not box:
                box.append(compute())
        return box[0]

    return get

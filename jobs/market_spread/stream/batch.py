"""One micro-batch: parse both feeds, check every order as of its time, write the lake exactly once.

The batch's steps are the kernel's (market_spread.kernel), run where its placement says
(stream.placement: in the driver process, or in Spark's tasks); their rows are committed from the
driver through each table's writer (delta-rs, or delta-spark where the table's protocol needs it:
lake.protocol). Writes: quarantine, quote history, alerts and the symbol_state MERGE side by side,
then batch_metrics last (a metrics row means every other write of the batch is in).

Exactly once with Delta's own idempotency: every commit of a batch carries Delta's transaction
identifier (txn: the stream's id, the batch). Spark replays only the batch that was in flight when a
run died (its offsets are logged, its commit is not). When a stream starts, `LakeTables.marks`
reads, per table, the last batch the stream committed there; a write of a batch at or below that
mark is skipped. After that the stream is the lake's only writer of rows (the lock), so it keeps the
marks in memory.

A replay reads the lake as the interrupted attempt left it (state or history may already hold this
batch's quotes). The answers do not change: every candidate quote an order may need is still there
(history holds every earlier quote; the batch's own quotes are re-read from its files), and the
choice among candidates is a total order over their own fields (rules.quote_key), not over time of
arrival. The state MERGE only ever moves a symbol to a higher quote key, so running it twice is
harmless too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pyspark.sql import DataFrame, SparkSession

from market_spread.lake.compaction import Compactor
from market_spread.lake.lake_tables import DEFAULT_STREAM_ID, LakeTables
from market_spread.lake.state_mirror import StateMirror
from market_spread.runtime import durable
from market_spread.runtime.checkpoint_files import planned_input, query_id
from market_spread.runtime.spark import spark_jobs_so_far
from market_spread.runtime.storage import Location
from market_spread.sources.driver_read import DriverReader
from market_spread.sources.kafka_read import KafkaReader
from market_spread.stream import constrained, placement
from market_spread.stream.batch_run import BatchResult, BatchRun, compact_quietly, compaction_failed
from market_spread.stream.spec import StreamSpec

# BatchResult is defined with the steps' shared state (stream.batch_run); callers take it from here.
__all__ = ["BatchProcessor", "BatchResult", "compact_quietly", "process_batch"]


@dataclass
class BatchProcessor:
    """The foreachBatch function of the stream (callable as `processor(batch_df, batch_id)`)."""

    settings: StreamSpec
    on_batch: Callable[[BatchResult], None] = print
    # Where the query keeps its id: the stream's id in every Delta commit it makes (lake.commits).
    checkpoint: Location | None = None
    tables: LakeTables | None = None  # the lake's tables as this stream keeps them open
    # Per table, the last batch committed; read from the lake at the first batch of this process.
    committed: dict[str, int] | None = None
    state: StateMirror | None = None  # symbol_state's quotes on the driver (this process is the only writer)
    compactor: Compactor | None = None  # compacts the append-only tables every N commits (lake.compaction)
    last_lines: int | None = None  # input lines of the batch before (None: none yet in this process)
    reader: DriverReader | None = None  # what reads its batches on the driver (threads, a Kafka consumer)
    # Set once a batch's error was said in one line (stream.query): the query's failure is not said again.
    error_said: threading.Event = field(default_factory=threading.Event)
    exit_code: int = 1  # the stream's exit code when a batch failed (its error's own, if it has one)

    def settle(self) -> None:
        """At the query's end: the upkeep the last batches started (a checkpoint, a compaction) ends,
        and a compaction that finished after the last batch is said as a batch's would be."""
        if self.compactor is not None and self.compactor.running is not None:
            try:
                done = self.compactor.finished(wait=True)
            except Exception as exc:  # noqa: BLE001 - a failed compaction commits nothing: said, never raised
                compaction_failed(self.compactor, exc)
            else:
                print(f"market-spread stream: after the last batch: {done}", flush=True)
        if self.state is not None:
            self.state.writes.close()  # what is staged for symbol_state, committed before the end
        if self.tables is not None:
            self.tables.settle()
        if self.reader is not None:
            self.reader.close()
            self.reader = None

    def resume(self, spark: SparkSession) -> None:
        """Before a restarted query's first batch: stage for symbol_state the quotes its history holds
        past the table's mark (a killed process's staged rows), so that they are committed within the
        trail's time bound even if no input comes (lake.state_writes). A new checkpoint has nothing."""
        if self.checkpoint is not None and query_id(self.checkpoint) is not None:
            self._open(spark)

    def _open(self, spark: SparkSession) -> None:
        """The lake's tables, the state, the marks and the compactor, each where not open yet."""
        if self.tables is None:
            stream_id = (query_id(self.checkpoint) if self.checkpoint is not None else None) or DEFAULT_STREAM_ID
            self.tables = LakeTables(self.settings.lake, stream_id, spark)
        if self.state is None:
            knobs = self.settings.knobs
            guard = self.settings.before_commit
            self.state = StateMirror(self.tables, knobs.state_mirror_rows, knobs.state_trail_batches, guard)
        if self.committed is None:
            # A start, or the batch after a failed one: every table is read from its log again, and
            # the quotes committed past symbol_state's mark are staged for it (lake.state_writes).
            self.tables.forget()
            self.committed = self.tables.marks()
            self.state.writes.catch_up(self.committed)
        if self.compactor is None:
            self.compactor = Compactor(self.tables)

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        spark = batch_df.sparkSession
        self._open(spark)
        assert self.tables is not None and self.state is not None and self.committed is not None
        if self.reader is None:
            self.reader = DriverReader(_kafka_reader(self.settings))
        try:
            # The batch's planned input (`offsets/B`, the source log) on stable storage before its
            # first commit: a power loss can then tear only a batch that committed nothing
            # (runtime.checkpoint_files.repair_torn_tail).
            flushed = durable.fsync_files(planned_input(self.checkpoint, batch_id)) if self.checkpoint else 0.0
            # Each table's writer from its protocol as it stands (users change it at any time): a
            # feature no library can write stops the stream before this batch commits anything.
            began = time.perf_counter()
            routes = self.tables.routes()
            protocol_ms = int(1000 * (time.perf_counter() - began))
            result = process_batch(
                batch_df,
                batch_id,
                self.settings,
                self.committed,
                self.state,
                compactor=self.compactor,
                lines_before=self.last_lines,
                tables=self.tables,
                reader=self.reader,
            )
        except BaseException:
            # Some writes may be in and the copy ahead of the table: read both from the lake again.
            self.committed = None
            self.state.reset()
            raise
        self.last_lines = result.input_lines
        result.writers = {name: (r.writer, r.why) for name, r in routes.items()}
        result.phases_ms.update(sync_input=int(1000 * flushed), protocol=protocol_ms)
        self.on_batch(result)


def _kafka_reader(spec: StreamSpec) -> KafkaReader | None:
    """A Kafka stream's consumer for its batches' records (MARKET_SPREAD_KAFKA_ON_DRIVER), else None."""
    if spec.kafka is None or not spec.knobs.kafka_on_driver:
        return None
    return KafkaReader(spec.kafka)


def process_batch(
    batch_df: DataFrame,
    batch_id: int,
    settings: StreamSpec,
    committed: dict[str, int] | None = None,
    state: StateMirror | None = None,
    compactor: Compactor | None = None,
    lines_before: int | None = None,
    tables: LakeTables | None = None,
    reader: DriverReader | None = None,
) -> BatchResult:
    """Process one micro-batch. `committed` (table -> last batch written) is updated in place;
    None reads it from the lake (a one-off call, e.g. in tests). `state` likewise.
    `compactor`: after the batch's last commit, compact a table that has had enough commits.
    `lines_before`: the input lines of the batch before (None: none yet), to choose where its kernel
    runs (stream.placement). `tables`: the lake's tables as the stream keeps them (None: a one-off
    set, with the default stream id). `reader`: what reads batches on the driver, kept by the stream
    (None in a one-off call: read serially)."""
    spark = batch_df.sparkSession
    tables = tables or LakeTables(settings.lake, DEFAULT_STREAM_ID, spark)
    if committed is None:
        committed = tables.marks()
    if state is None:
        state = StateMirror(tables, settings.knobs.state_mirror_rows)
    batch = BatchRun(
        spark,
        batch_id,
        settings,
        committed,
        state,
        tables,
        BatchResult(batch_id),
        t0=time.perf_counter(),
        jobs0=spark_jobs_so_far(spark),
        started_at=datetime.now(UTC),
        reader=reader,
    )
    try:
        placement.run(batch, batch_df, compactor, lines_before, constrained.user_rules(batch))
        return batch.result
    finally:
        spark.sparkContext.setJobDescription(None)  # type: ignore[arg-type]  # None clears it; pyspark's stub says str

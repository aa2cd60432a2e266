"""One micro-batch: parse both feeds, check every order as of its time, write the lake exactly once.

Writes: quarantine, quote history, alerts and the symbol_state MERGE side by side, then
batch_metrics last (a metrics row means every other write of the batch is in). Rows that are on the
driver, or few enough to bring there (a small batch's; a larger one's quote history and alerts), are
committed there through delta-rs (lake.lake_tables); Spark computes them all, and commits the rest.

Exactly once with Delta's own idempotency: every commit of a batch carries Delta's transaction
identifier (txn: the stream's id, the batch), written by delta-rs or by Spark (`txnAppId`,
`txnVersion`). Spark replays only the batch that was in flight when a run died (its offsets are
logged, its commit is not). When a stream starts, `LakeTables.marks` reads, per table, the last
batch the stream committed there; a write of a batch at or below that mark is skipped. After that
the stream is the lake's only writer of rows (the lock), so it keeps the marks in memory.

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
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pyarrow as pa
from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from market_spread.lake import delta_rs
from market_spread.lake.compaction import Compactor
from market_spread.lake.lake_tables import DEFAULT_STREAM_ID, LakeTables
from market_spread.lake.state import merge_state, newest_of_rows, newest_per_symbol
from market_spread.lake.state_mirror import StateMirror
from market_spread.lake.writes import append, ms_since
from market_spread.runtime import durable
from market_spread.runtime.spark import kept_for_batch, sized_for, spark_jobs_so_far
from market_spread.runtime.storage import Location
from market_spread.stream import constrained, driver_batch, driver_spark, placement
from market_spread.stream.batch_run import (
    BatchResult,
    BatchRun,
    compact_quietly,
    compaction_failed,
    finish,
    once,
    run_writes,
)
from market_spread.stream.check import check_orders
from market_spread.stream.checkpoint_files import planned_input, query_id
from market_spread.stream.driver_read import DriverReader
from market_spread.stream.kafka_read import KafkaReader
from market_spread.stream.spec import StreamSpec
from market_spread.stream.summary import BatchSummary, summarize
from market_spread.transforms import parsing
from market_spread.transforms.constraints import Rules

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
    warm: driver_spark.Warm | None = None  # Spark's parse of a driver batch's uncertain lines, warmed at start
    reader: DriverReader | None = None  # what reads its batches on the driver (threads, a Kafka consumer)
    universe_table: DataFrame | None = None  # the symbols as a table in this session (transforms.parsing)
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
        if self.tables is not None:
            self.tables.settle()
        if self.reader is not None:
            self.reader.close()
            self.reader = None
        if self.warm is not None:
            # Its Spark job still running when the session stops (a stream that failed at once)
            # ends in Spark's errors of a broadcast gone, pages of them after the stream's one line.
            self.warm.wait()

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        spark = batch_df.sparkSession
        if self.tables is None:
            stream_id = (query_id(self.checkpoint) if self.checkpoint is not None else None) or DEFAULT_STREAM_ID
            self.tables = LakeTables(self.settings.lake, stream_id, spark)
        if self.committed is None:
            # A start, or the batch after a failed one: every table is read from its log again.
            self.tables.forget()
            self.committed = self.tables.marks()
        if self.state is None:
            self.state = StateMirror(self.tables, self.settings.knobs.state_mirror_rows)
        if self.compactor is None:
            self.compactor = Compactor(self.tables)
        if self.universe_table is None:
            self.universe_table = parsing.universe_table(spark, self.settings.symbols)
        if self.warm is None and driver_batch.limit_lines(spark, self.settings.knobs) and delta_rs.enabled():
            self.warm = driver_spark.Warm(spark, self.universe_table)
        if self.reader is None:
            self.reader = DriverReader(_kafka_reader(self.settings))
        try:
            # The batch's planned input (`offsets/B`, the source log) on stable storage before its
            # first commit: a power loss can then tear only a batch that committed nothing
            # (stream.checkpoint_files.repair_torn_tail).
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
                expect_small=self.last_lines is not None and self.last_lines < self.settings.knobs.small_batch_lines,
                compactor=self.compactor,
                lines_before=self.last_lines,
                tables=self.tables,
                warm=self.warm,
                reader=self.reader,
                universe_table=self.universe_table,
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


@dataclass
class _Parsed:
    """The parsed batch, its summary, and who commits its rows (decided once its size is known)."""

    parsed: DataFrame
    summary: BatchSummary
    quotes: DataFrame  # the valid quotes
    orders: DataFrame  # the valid orders
    driver_commits: bool  # delta-rs commits at all (lake.delta_rs)
    on_driver: bool  # quote history and alerts are committed from the driver
    quarantine_on_driver: bool
    rules: Rules  # a user's CHECK constraints on the checked tables (stream.constrained)
    broken: pa.Table | None = None  # quarantine rows of orders whose alerts break one of them


def process_batch(
    batch_df: DataFrame,
    batch_id: int,
    settings: StreamSpec,
    committed: dict[str, int] | None = None,
    state: StateMirror | None = None,
    expect_small: bool = False,
    compactor: Compactor | None = None,
    lines_before: int | None = None,
    tables: LakeTables | None = None,
    warm: driver_spark.Warm | None = None,
    reader: DriverReader | None = None,
    universe_table: DataFrame | None = None,
) -> BatchResult:
    """Process one micro-batch. `committed` (table -> last batch written) is updated in place;
    None reads it from the lake (a one-off call, e.g. in tests). `state` likewise. `expect_small`:
    the batch is likely small (the one before it was), so its summary carries the per-symbol rows.
    `compactor`: after the batch's last commit, compact a table that has had enough commits.
    `lines_before`: the input lines of the batch before (None: none yet), to choose where a batch
    is checked (stream.driver_batch). `tables`: the lake's tables as the stream keeps them (None: a
    one-off set, with the default stream id). `warm`, `reader`, `universe_table`: what the stream
    keeps between batches (BatchProcessor); None in a one-off call (read serially, symbols as a list)."""
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
        warm=warm,
        reader=reader,
        universe_table=universe_table,
    )
    scope = ExitStack()  # the parsed batch's cache and the size-dependent settings, until the batch ends
    try:
        rules = constrained.user_rules(batch)
        # Spark checks the rows of constrained tables: its plan takes the batch (stream.placement).
        if placement.placed(batch, batch_df, compactor, lines_before, bool(rules)):
            return batch.result
        batch.describe("parse")
        tables.committed_elsewhere()  # Spark's plan commits to the lake: kept tables read their log again
        parsed = _parse_step(batch, parsing.nonblank_lines(batch_df), scope, expect_small, rules)
        alerts, observed = _check_step(batch, parsed)
        written = _write_step(batch, parsed, alerts, observed)
        finish(batch, written, parsed.driver_commits, compactor)
        tables.committed_elsewhere()  # and after its commits, for tables read during the batch
        return batch.result
    finally:
        scope.close()
        spark.sparkContext.setJobDescription(None)  # type: ignore[arg-type]  # None clears it; pyspark's stub says str


def _parse_step(batch: BatchRun, lines: DataFrame, scope: ExitStack, expect_small: bool, rules: Rules) -> _Parsed:
    """Parse and sum up the batch in one job, then plan the rest knowing its size."""
    spark, settings, result = batch.spark, batch.settings, batch.result
    # Everything below reads the parsed batch several times: parse each input line once.
    parsing_plan = constrained.parse(batch, lines, rules) if rules else parsing.parse_lines(lines, batch.universe)
    parsed = scope.enter_context(kept_for_batch(parsing_plan))
    # One job: parses and caches the batch, counts it and sums it up per symbol (stream.summary).
    summary = summarize(parsed, settings.thresholds, per_symbol=batch.state.enabled and expect_small)
    counts = summary.counts
    result.files, result.last_offsets = summary.files, summary.last_offsets
    result.quotes, result.orders = counts.get(("quotes", True), 0), counts.get(("orders", True), 0)
    result.input_lines = sum(counts.values())
    result.quarantined = result.input_lines - result.quotes - result.orders
    result.phases_ms["parse"] = ms_since(batch.t0)
    # Everything after the parse is planned knowing the batch's size (small: one partition, interpreted).
    small = scope.enter_context(sized_for(spark, result.input_lines, settings.knobs.small_batch_lines))
    # Rows that fit the driver are committed from there by delta-rs (lake.delta_rs): a small
    # batch's, and up to DRIVER_WRITE_LINES a larger one's quote history and alerts (a few
    # fixed-size columns a row). Quarantine rows carry raw lines of any size: through the driver
    # only in a small batch.
    driver_commits = delta_rs.enabled()
    on_driver = driver_commits and (small or result.input_lines < settings.knobs.driver_write_lines)
    quarantine_on_driver = driver_commits and small

    quotes = parsing.valid_quotes(parsed, settings.thresholds)
    orders = parsing.valid_orders(parsed)
    return _Parsed(parsed, summary, quotes, orders, driver_commits, on_driver, quarantine_on_driver, rules)


def _check_step(batch: BatchRun, p: _Parsed) -> tuple[DataFrame | None, Observation]:
    """Plan the alerts: every order checked against the quote current at its time (stream.check)."""
    t1 = time.perf_counter()
    batch.describe("late check")
    alerts, observed = None, Observation(f"alerts-{batch.batch_id}")
    if batch.result.orders:
        alerts, batch.result.late_symbols = check_orders(
            batch.settings, batch.state, p.quotes, p.orders, batch.batch_id, p.summary.bounds
        )
        if p.rules.get("alerts"):
            alerts, p.broken = constrained.split_alerts(batch, p.parsed, alerts, p.rules)
        if not p.on_driver:  # counted while it is written: no separate job computes the as-of check twice
            alerts = alerts.observe(observed, F.count(F.lit(1)).alias("n"))
    batch.result.phases_ms["check"] = ms_since(t1)  # planning, and the look-up of late symbols
    return alerts, observed


def _write_step(batch: BatchRun, p: _Parsed, alerts: DataFrame | None, observed: Observation) -> list[str]:
    """Write quarantine, quote history, alerts and the state MERGE side by side, each table once
    (a replay skips the tables that already hold the batch). Returns the tables written."""
    result = batch.result
    t2 = time.perf_counter()
    appended: dict[str, int] = {}  # table -> rows committed from the driver
    planned, newest = _planned_writes(batch, p, alerts, appended)
    writes = run_writes(batch, planned, newest)
    if "alerts" in appended:
        result.alerts = appended["alerts"]
    elif "alerts" in writes:
        result.alerts = int(observed.get.get("n", 0))
    elif alerts is not None:  # written by the interrupted attempt: count what it wrote
        result.alerts = (
            batch.spark.read.format("delta")
            .load(batch.path("alerts"))
            .where(F.col("batch_id") == batch.batch_id)
            .count()
        )
    result.phases_ms["write"] = ms_since(t2)
    result.phases_ms.setdefault("merge", 0)
    return writes


def _planned_writes(
    batch: BatchRun,
    p: _Parsed,
    alerts: DataFrame | None,
    appended: dict[str, int],
) -> tuple[dict[str, Callable[[], None]], Callable[[], DataFrame | pa.Table] | None]:
    """The batch's writes, by table, not run yet; and its newest quote per symbol, computed once
    when first needed (None without quotes)."""
    batch_id, quotes = batch.batch_id, p.quotes

    def append_to(table: str, frame: DataFrame, rows: Callable[[], pa.Table] | None = None) -> None:
        if p.quarantine_on_driver if table == "quarantine" else p.on_driver:
            rows_now = rows() if rows else delta_rs.arrow_rows(table, frame)
            appended[table] = batch.tables.append(table, rows_now, batch_id, batch.settings.before_commit)
        else:
            frame = batch.tables.widened(table, frame)
            append(frame, batch.path(table), batch.tables.mark(batch_id), batch.settings.before_commit)

    writes: dict[str, Callable[[], None]] = {}
    newest = None
    if batch.result.quarantined:
        bad = parsing.quarantined(p.parsed)
        if p.broken is not None and p.broken.num_rows:
            bad = bad.unionByName(batch.spark.createDataFrame(p.broken, schema=bad.schema))
        quarantine = bad.select(
            "stream",
            "raw",
            "reason",
            "source_file",
            F.current_timestamp().alias("detected_at"),
            F.lit(batch_id).cast("bigint").alias("batch_id"),
        )
        writes["quarantine"] = lambda: append_to("quarantine", quarantine)
    if batch.result.quotes:
        history = quotes.select(
            "symbol",
            "bid",
            "offer",
            "quote_time",
            "seq",
            F.lit(batch_id).cast("bigint").alias("batch_id"),
            "should_reject_trades",
            F.to_date("quote_time").alias("quote_date"),
        )
        # On the driver, the history rows also give the newest quote per symbol (no job of its own).
        history_rows = once(lambda: delta_rs.arrow_rows("quotes", history)) if p.on_driver else None
        writes["quotes"] = lambda: append_to("quotes", history, history_rows)
        newest = once(lambda: newest_quotes(quotes, p.summary.newest, batch.state.enabled, history_rows))
        writes["symbol_state"] = lambda: merge_state(batch.tables, newest(), batch_id, batch.settings.before_commit)
    if alerts is not None:
        writes["alerts"] = lambda: append_to("alerts", alerts)
    return writes, newest


def newest_quotes(
    quotes: DataFrame,
    from_summary: pa.Table | None,
    on_driver: bool,
    history_rows: Callable[[], pa.Table] | None = None,
) -> DataFrame | pa.Table:
    """One row per symbol, for the MERGE and the driver's copy of the state (`on_driver`: the state
    mirror is on, so the rows are wanted as Arrow). From the batch's summary when it has them (a
    small batch), else from its quote history rows if they come to the driver (`history_rows`),
    else a job of its own."""
    if not on_driver:
        return newest_per_symbol(quotes)
    return (
        from_summary
        if from_summary is not None
        else (newest_of_rows(history_rows()) if history_rows is not None else newest_per_symbol(quotes).toArrow())
    )

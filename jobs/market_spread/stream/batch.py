"""One micro-batch: parse both feeds, check every order as of its time, write the lake exactly once.

Writes: quarantine, quote history, alerts and the symbol_state MERGE side by side, then
batch_metrics last (a metrics row means every other write of the batch is in). Each commit carries
the batch id in its commitInfo.userMetadata (`lake.batch_tag`). Rows that are on the driver, or few
enough to bring there (a small batch's; a larger one's quote history and alerts), are committed
there with delta-rs (`lake.delta_rs`); Spark computes them all.

Exactly once without Delta's txn tags: Spark replays only the batch that was in flight when a run
died (its offsets are logged, its commit is not). When a stream starts, `lake.committed_batches`
reads, per table, the last batch that wrote it; a write of a batch at or below that mark is
skipped. After that the stream is the lake's only writer (the lock), so it keeps the marks in
memory. Delta's own `txnAppId/txnVersion` did the same, but every tagged commit read the table's
whole set of transactions (a state reconstruction, several Spark jobs) on every batch.

A replay reads the lake as the interrupted attempt left it (state or history may already hold this
batch's quotes). The answers do not change: every candidate quote an order may need is still there
(history holds every earlier quote; the batch's own quotes are re-read from its files), and the
choice among candidates is a total order over their own fields (rules.quote_key), not over time of
arrival. The state MERGE only ever moves a symbol to a higher quote key, so running it twice is
harmless too.
"""
from __future__ import annotations

import sys
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, TypeVar

import pyarrow as pa
from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from market_spread.domain.rules import Thresholds
from market_spread.lake import delta_rs
from market_spread.lake import tables as lake_mod
from market_spread.lake.compaction import Compaction, Compactor
from market_spread.lake.state import merge_state, newest_of_rows, newest_per_symbol
from market_spread.lake.state_mirror import StateMirror
from market_spread.lake.writes import append, literal_row, ms_since, run_all, tagged
from market_spread.runtime import spark as runtime_spark
from market_spread.runtime.spark import SMALL_BATCH_LINES, kept_for_batch, sized_for, spark_jobs_so_far
from market_spread.stream.check import check_orders
from market_spread.stream.summary import summarize
from market_spread.transforms import parsing


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


@dataclass
class BatchProcessor:
    """The foreachBatch function of the stream (callable as `processor(batch_df, batch_id)`)."""

    settings: BatchSettings
    on_batch: Callable[[BatchResult], None] = print
    # Per table, the last batch committed; read from the lake at the first batch of this process.
    committed: dict[str, int] | None = None
    state: StateMirror | None = None  # symbol_state's quotes on the driver (this process is the only writer)
    compactor: Compactor | None = None  # compacts the append-only tables every N commits (lake.compaction)
    last_lines: int | None = None  # input lines of the batch before (None: none yet in this process)

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        spark = batch_df.sparkSession
        if self.committed is None:
            # A start, or the batch after a failed one: every table is read from its log again.
            delta_rs.forget_tables()
            self.committed = lake_mod.committed_batches(spark, self.settings.lake)
        if self.state is None:
            self.state = StateMirror(spark, self.settings.lake)
        if self.compactor is None:
            self.compactor = Compactor(self.settings.lake)
        try:
            result = process_batch(batch_df, batch_id, self.settings, self.committed, self.state,
                                   expect_small=self.last_lines is not None and self.last_lines < SMALL_BATCH_LINES,
                                   compactor=self.compactor)
        except BaseException:
            # Some writes may be in and the copy ahead of the table: read both from the lake again.
            self.committed = None
            self.state.reset()
            raise
        self.last_lines = result.input_lines
        self.on_batch(result)


T = TypeVar("T")


def compact_quietly(compactor: Compactor, committed: dict[str, int]) -> Compaction | None:
    """`compactor.run`, whose failure does not fail the batch: every row of the batch is committed
    and a failed compaction commits nothing. Said on stderr; the table is tried again after another
    `every` commits."""
    try:
        return compactor.run(committed)
    except Exception as exc:  # noqa: BLE001 - see above
        delta_rs.forget_tables()  # the failed table is read from its log again
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        print(f"warning: compaction failed (no row changed; tried again later): {first}", file=sys.stderr, flush=True)
        return None


def once(compute: Callable[[], T]) -> Callable[[], T]:
    """`compute()` run by the first of the concurrent writes that needs it, shared with the others."""
    lock, box = threading.Lock(), []

    def get() -> T:
        with lock:
            if not box:
                box.append(compute())
        return box[0]

    return get


def newest_quotes(quotes: DataFrame, from_summary: pa.Table | None, on_driver: bool,
                  history_rows: Callable[[], pa.Table] | None = None) -> DataFrame | pa.Table:
    """One row per symbol, for the MERGE and the driver's copy of the state (`on_driver`: the state
    mirror is on, so the rows are wanted as Arrow). From the batch's summary when it has them (a
    small batch), else from its quote history rows if they come to the driver (`history_rows`),
    else a job of its own."""
    if not on_driver:
        return newest_per_symbol(quotes)
    return from_summary if from_summary is not None else (
        newest_of_rows(history_rows()) if history_rows is not None else newest_per_symbol(quotes).toArrow())


def process_batch(
    batch_df: DataFrame,
    batch_id: int,
    settings: BatchSettings,
    committed: dict[str, int] | None = None,
    state: StateMirror | None = None,
    expect_small: bool = False,
    compactor: Compactor | None = None,
) -> BatchResult:
    """Process one micro-batch. `committed` (table -> last batch written) is updated in place;
    None reads it from the lake (a one-off call, e.g. in tests). `state` likewise. `expect_small`:
    the batch is likely small (the one before it was), so its summary carries the per-symbol rows.
    `compactor`: after the batch's last commit, compact a table that has had enough commits."""
    spark = batch_df.sparkSession
    lake, symbols = settings.lake, settings.symbols
    if committed is None:
        committed = lake_mod.committed_batches(spark, lake)
    if state is None:
        state = StateMirror(spark, lake)
    t0 = time.perf_counter()
    jobs0 = spark_jobs_so_far(spark)
    started_at = datetime.now(timezone.utc)
    result = BatchResult(batch_id)
    path = lambda name: lake_mod.table_path(lake, name)  # noqa: E731

    describe = lambda phase: spark.sparkContext.setJobDescription(f"market-spread batch {batch_id}: {phase}")  # noqa: E731
    describe("parse")
    lines = parsing.nonblank_lines(batch_df)
    scope = ExitStack()
    try:
        # Everything below reads the parsed batch several times: parse each input line once.
        parsed = scope.enter_context(kept_for_batch(parsing.parse_lines(lines, symbols)))
        # One job: parses and caches the batch, counts it and sums it up per symbol (stream.summary).
        summary = summarize(parsed, settings.thresholds, per_symbol=state.enabled and expect_small)
        counts = summary.counts
        result.files, result.last_offsets = summary.files, summary.last_offsets
        result.quotes, result.orders = counts.get(("quotes", True), 0), counts.get(("orders", True), 0)
        result.input_lines = sum(counts.values())
        result.quarantined = result.input_lines - result.quotes - result.orders
        result.phases_ms["parse"] = ms_since(t0)
        # Everything after the parse is planned knowing the batch's size (small: one partition, interpreted).
        small = scope.enter_context(sized_for(spark, result.input_lines))
        # Rows that fit the driver are committed from there by delta-rs (lake.delta_rs): a small
        # batch's, and up to DRIVER_WRITE_LINES a larger one's quote history and alerts (a few
        # fixed-size columns a row). Quarantine rows carry raw lines of any size: through the driver
        # only in a small batch.
        driver_commits = delta_rs.enabled()
        on_driver = driver_commits and (small or result.input_lines < runtime_spark.DRIVER_WRITE_LINES)
        quarantine_on_driver = driver_commits and small

        quotes = parsing.valid_quotes(parsed, settings.thresholds)
        orders = parsing.valid_orders(parsed)

        t1 = time.perf_counter()
        describe("late check")
        alerts, observed = None, Observation(f"alerts-{batch_id}")
        if result.orders:
            alerts, result.late_symbols = check_orders(settings, state, quotes, orders, batch_id, summary.bounds)
            if not on_driver:  # counted while it is written: no separate job computes the as-of check twice
                alerts = alerts.observe(observed, F.count(F.lit(1)).alias("n"))
        result.phases_ms["check"] = ms_since(t1)  # planning, and the look-up of late symbols

        t2 = time.perf_counter()
        appended: dict[str, int] = {}

        def append_to(table: str, frame: DataFrame, rows: Callable[[], pa.Table] | None = None) -> None:
            if quarantine_on_driver if table == "quarantine" else on_driver:
                rows_now = rows() if rows else delta_rs.arrow_rows(lake_mod.SCHEMAS[table], frame)
                appended[table] = delta_rs.append_rows(path(table), rows_now, batch_id)
            else:
                append(frame, path(table))

        writes: dict[str, Callable[[], None]] = {}
        if result.quarantined:
            quarantine = parsing.quarantined(parsed).select(
                "stream", "raw", "reason", "source_file",
                F.current_timestamp().alias("detected_at"), F.lit(batch_id).cast("bigint").alias("batch_id"),
            )
            writes["quarantine"] = lambda: append_to("quarantine", quarantine)
        if result.quotes:
            history = quotes.select(
                "symbol", "bid", "offer", "quote_time", "seq",
                F.lit(batch_id).cast("bigint").alias("batch_id"), "should_reject_trades",
                F.to_date("quote_time").alias("quote_date"),
            )
            # On the driver, the history rows also give the newest quote per symbol (no job of its own).
            history_rows = once(lambda: delta_rs.arrow_rows(lake_mod.SCHEMAS["quotes"], history)) if on_driver else None
            writes["quotes"] = lambda: append_to("quotes", history, history_rows)
            newest = once(lambda: newest_quotes(quotes, summary.newest, state.enabled, history_rows))
            writes["symbol_state"] = lambda: merge_state(spark, lake, newest(), batch_id)
        if alerts is not None:
            writes["alerts"] = lambda: append_to("alerts", alerts)
        # Each write names its table in the Spark UI (a job description is per thread).
        writes = {t: (lambda t=t, w=w: (describe(f"write {t}"), w())) for t, w in writes.items()}
        for table in [t for t in writes if committed.get(t, -1) >= batch_id]:
            del writes[table]  # a replay: this table already holds the batch
            result.skipped.append(table)
        tasks = dict(writes)
        if result.quotes and state.enabled:  # not a table: the driver's copy of the state moves on with the MERGE
            tasks["state_mirror"] = lambda: (describe("advance state mirror"), state.take(newest()))
        with tagged(spark, batch_id):
            # Four different tables: side by side, since a small commit is mostly waiting.
            run_all(tasks, result.phases_ms)
        for table in writes:
            committed[table] = batch_id
        if "alerts" in appended:
            result.alerts = appended["alerts"]
        elif "alerts" in writes:
            result.alerts = int(observed.get.get("n", 0))
        elif alerts is not None:  # written by the interrupted attempt: count what it wrote
            result.alerts = (
                spark.read.format("delta").load(path("alerts")).where(F.col("batch_id") == batch_id).count()
            )
        result.phases_ms["write"] = ms_since(t2)
        result.phases_ms.setdefault("merge", 0)

        result.seconds = time.perf_counter() - t0
        jobs1 = spark_jobs_so_far(spark)
        # A metrics commit through Spark runs a job of its own: counted too, one more.
        result.spark_jobs = None if jobs0 is None or jobs1 is None else jobs1 - jobs0 + (0 if driver_commits else 1)
        values = (
            batch_id, started_at, datetime.now(timezone.utc), result.quotes, result.orders,
            result.alerts, result.quarantined, result.input_lines, result.late_symbols,
            result.phases_ms["parse"], result.phases_ms["check"], result.phases_ms["write"],
            result.phases_ms["merge"], result.spark_jobs,
        )
        t3 = time.perf_counter()
        describe("write batch_metrics")
        if committed.get("batch_metrics", -1) < batch_id:
            if driver_commits:  # one row of Python values: a few ms with delta-rs, 0.2-0.3 s through Spark
                delta_rs.append_row(path("batch_metrics"), lake_mod.SCHEMAS["batch_metrics"], values, batch_id)
            else:
                with tagged(spark, batch_id):
                    append(literal_row(spark, lake_mod.SCHEMAS["batch_metrics"], values), path("batch_metrics"))
            committed["batch_metrics"] = batch_id
        else:
            result.skipped.append("batch_metrics")
        result.phases_ms["commit_metrics"] = ms_since(t3)
        if compactor is not None:
            t4 = time.perf_counter()
            describe("compact")
            compactor.wrote([*writes, "batch_metrics"])
            result.compaction = compact_quietly(compactor, committed)
            result.phases_ms["compact"] = ms_since(t4)  # in the batch's time, not in its metrics row
        result.seconds = time.perf_counter() - t0
        return result
    finally:
        scope.close()
        spark.sparkContext.setJobDescription(None)

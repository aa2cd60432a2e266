"""A small batch checked on the driver: its lines read from its landing files (from Kafka, brought
over in one Spark job), parsed and checked in this process (kernel.layout in Arrow's kernels
for lines in the product's own layout, kernel.line_rows line by line for other certainly valid
ones), its rows committed with delta-rs.

Why: through Spark even a small batch with a warm JVM pays for building, analysing and planning
the parse and the as-of check, and their jobs, which alone spends most of issue 43's one-second
budget; on the driver the same batch costs a small fraction of that (measured: docs/performance.md,
row 'small batches of certainly valid lines').
The answers are the same: a batch is taken here only when every line is certainly valid (else it
goes to Spark whole, which alone decides quarantine reasons), the candidates of each order are those
of stream.check (the batch's quotes, the driver's copy of symbol_state, history for late orders) and
the choice among them is transforms.asof's. Which batches: while the batch before had fewer than
MARKET_SPREAD_DRIVER_BATCH_LINES lines, or, for the first one of a process, when the files it reads
(or the Kafka records its offset ranges hold, when they are read on the driver) are few enough.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import cast

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from market_spread.kernel import layout, line_rows, steps
from market_spread.lake import delta_rs
from market_spread.lake import tables as lake_mod
from market_spread.lake.compaction import Compactor
from market_spread.lake.state import NEWEST_COLUMNS, merge_state
from market_spread.lake.writes import ms_since
from market_spread.stream import candidates, driver_read, driver_spark, kafka_read
from market_spread.stream.batch_run import BatchRun, finish, run_writes
from market_spread.stream.spec import BatchKnobs

SCHEMAS = {t: lake_mod.arrow_schema(t) for t in ("quotes", "alerts", "quarantine")}


CLUSTER_BATCH_LINES = 200_000  # on a cluster with more cores than the driver, larger batches go to them
_ANY_SIZE = 1 << 40


def limit_lines(spark: SparkSession | None, knobs: BatchKnobs) -> int:
    """Batches of fewer lines than this are checked on the driver under `--placement auto`
    (MARKET_SPREAD_DRIVER_BATCH_LINES; unset: CLUSTER_BATCH_LINES on a cluster whose executors have
    more cores than this machine, any size otherwise). Executors on the driver's own cores do a large
    batch many times slower than the driver's columnar path (measured: docs/performance.md, row 'the
    cluster part')."""
    if knobs.driver_batch_lines is not None:
        return knobs.driver_batch_lines
    return CLUSTER_BATCH_LINES if spark is not None and executors_outnumber_driver(spark) else _ANY_SIZE


def executors_outnumber_driver(spark: SparkSession) -> bool:
    """Whether the application's executors have more cores than this machine (never on a local
    master). Spark's default parallelism: the cores of the executors registered so far (at least
    2), or `spark.default.parallelism` where a user set it."""
    context = spark.sparkContext
    if cast(str, context.master).startswith("local"):
        return False
    return context.defaultParallelism > (os.cpu_count() or 1)


def likely_small(batch_df: DataFrame, knobs: BatchKnobs, lines_before: int | None, kafka: bool = False) -> bool:
    """Whether to try the batch on the driver: by the batch before, else by the files' size or (a
    Kafka stream whose records are read on the driver) the records its offset ranges hold."""
    limit = limit_lines(batch_df.sparkSession, knobs)
    if limit == 0 or not delta_rs.enabled():
        return False
    if lines_before is not None:
        return lines_before < limit
    if kafka:
        ranges = kafka_read.offset_ranges(batch_df)
        return ranges is not None and sum(r.records for r in ranges) < limit
    size = driver_read.plan_bytes(batch_df)
    return size is not None and size < limit * driver_read._BYTES_PER_LINE


def driver_steps(batch: BatchRun, batch_df: DataFrame, compactor: Compactor | None, any_size: bool = False) -> bool:
    """The whole batch on the driver (stream.driver_batch); False, having committed nothing, when
    its lines are not UTF-8 or too many are outside the product's own layout: Spark then takes the
    batch (the attempt's time counts in its parse, which is timed from the batch's start)."""
    batch.describe("read lines")
    limit = _ANY_SIZE if any_size else limit_lines(batch_df.sparkSession, batch.settings.knobs)
    read = driver_read.read_batch(batch_df, batch.settings.universe_array, limit, batch.reader)
    collected = ms_since(batch.t0)
    t1 = time.perf_counter()
    if read is None:
        return False
    parsed = parse_lines(batch, read[1])
    if parsed is None:
        return False
    columns, bad = parsed
    _column_steps(batch, layout.concat([*read[0], columns]), bad, collected, t1, compactor)
    return True


def parse_lines(batch: BatchRun, lines: pa.Table) -> tuple[layout.ColumnBatch, pa.Table | None] | None:
    """The batch's valid lines as columns and its bad ones as quarantine rows (stream, raw, reason,
    source_file), by the kernel's parse (kernel.steps.parse); the few it is not certain of through
    Spark's parse of those lines alone (stream.driver_spark). None: Spark's plan takes the batch."""
    parsed = steps.parse(lines, batch.settings.universe_array, batch.settings.universe)
    if parsed is None:
        return None
    if parsed.quarantine.num_rows == 0 and parsed.uncertain.num_rows == 0:
        return parsed.columns, None
    parts, bad = [parsed.columns], [parsed.quarantine]
    if parsed.uncertain.num_rows:
        if batch.warm is not None:
            batch.warm.wait()
        batch.describe("parse uncertain lines")
        by_spark, spark_bad = driver_spark.parse(batch.spark, parsed.uncertain, batch.universe)
        parts.append(by_spark)
        bad.append(spark_bad)
    return layout.concat(parts), pa.concat_tables(bad)


def _counted(
    batch: BatchRun,
    quotes: int,
    orders: int,
    quarantined: int,
    sources: tuple[list[str], dict[str, int]],
    collected: int,
    t1: float,
) -> None:
    result = batch.result
    result.on_driver = True
    result.quotes, result.orders, result.quarantined = quotes, orders, quarantined
    result.input_lines = quotes + orders + quarantined
    result.files, result.last_offsets = sources
    result.phases_ms.update(collect=collected, parse=ms_since(t1))


def _column_steps(
    batch: BatchRun,
    cols: layout.ColumnBatch,
    bad: pa.Table | None,
    collected: int,
    t1: float,
    compactor: Compactor | None,
) -> None:
    result, settings = batch.result, batch.settings
    quarantined = bad.num_rows if bad is not None else 0
    _counted(
        batch,
        cols.quotes.num_rows,
        cols.orders.num_rows,
        quarantined,
        line_rows.sources(set(cols.sources)),
        collected,
        t1,
    )
    t2 = time.perf_counter()
    alerts = None
    if cols.orders.num_rows:
        quotes_of, result.late_symbols = candidates.candidates(cols, batch.state, batch.tables)
        alerts = steps.check(
            cols.orders, quotes_of, settings.thresholds, batch.batch_id, datetime.now(UTC), SCHEMAS["alerts"]
        )
    result.phases_ms["check"] = ms_since(t2)
    t3 = time.perf_counter()
    history = newest = None
    if cols.quotes.num_rows:
        history = steps.history(cols.quotes, batch.batch_id, settings.thresholds, SCHEMAS["quotes"])
        newest = steps.newest(cols.quotes, settings.thresholds, SCHEMAS["quotes"], list(NEWEST_COLUMNS))
    quarantine = quarantine_rows(bad, batch.batch_id) if quarantined else None
    write_rows(batch, history, alerts, newest, quarantine, t3, compactor)


def quarantine_rows(bad: pa.Table, batch_id: int) -> pa.Table:
    """Quarantine rows (stream, raw, reason, source_file) stamped with the time and the batch."""
    n = bad.num_rows
    stamp = pa.array([datetime.now(UTC)] * n, SCHEMAS["quarantine"].field("detected_at").type)
    return (
        bad.append_column("detected_at", stamp)
        .append_column("batch_id", pa.array([batch_id] * n, pa.int64()))
        .cast(SCHEMAS["quarantine"])
    )


def write_rows(
    batch: BatchRun,
    history: pa.Table | None,
    alerts: pa.Table | None,
    newest: pa.Table | None,
    quarantine: pa.Table | None,
    t3: float,
    compactor: Compactor | None,
) -> None:
    written = run_writes(batch, _writes(batch, history, alerts, newest, quarantine), newest=lambda: newest)
    batch.result.alerts = alerts.num_rows if alerts is not None else 0
    batch.result.phases_ms["write"] = ms_since(t3)
    batch.result.phases_ms.setdefault("merge", 0)
    finish(batch, written, True, compactor)


def _writes(
    batch: BatchRun,
    history: pa.Table | None,
    alerts: pa.Table | None,
    newest: pa.Table | None,
    quarantine: pa.Table | None,
) -> dict[str, Callable[[], object]]:
    """The driver's batch's writes, by table, not run yet (as stream.batch._planned_writes for Spark's)."""
    tables, guard, batch_id = batch.tables, batch.settings.before_commit, batch.batch_id
    writes: dict[str, Callable[[], object]] = {}
    if history is not None:
        writes["quotes"] = lambda: tables.append("quotes", history, batch_id, guard)
        writes["symbol_state"] = lambda: merge_state(tables, newest, batch_id, guard)
    if alerts is not None:
        writes["alerts"] = lambda: tables.append("alerts", alerts, batch_id, guard)
    if quarantine is not None:
        writes["quarantine"] = lambda: tables.append("quarantine", quarantine, batch_id, guard)
    return writes

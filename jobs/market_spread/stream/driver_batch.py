"""A batch with its kernel in the driver process (`--placement driver`, and `auto`'s choice but for
large batches on a cluster): its lines read here (landing files by Arrow, Kafka records by the
stream's consumer or in one Spark job), parsed and checked by the kernel (kernel.steps), its rows
committed through each table's writer.

Why: through Spark even a small batch with a warm JVM pays for building, analysing and planning
its jobs, which alone spends most of a one-second latency budget; in the driver's Arrow kernels the
same batch costs a small fraction of that (measured: docs/performance.md, row 'small batches of
certainly valid lines'). The candidates of each order are the batch's quotes, the driver's copy of
symbol_state and history for late orders (stream.candidates).
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
from market_spread.lake import tables as lake_mod
from market_spread.lake.compaction import Compactor
from market_spread.lake.state import NEWEST_COLUMNS
from market_spread.lake.writes import ms_since
from market_spread.sources import driver_read, kafka_read
from market_spread.stream import candidates, constrained
from market_spread.stream.batch_run import BatchRun, finish, run_writes
from market_spread.stream.constrained import Rules
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
    if limit == 0:
        return False
    if lines_before is not None:
        return lines_before < limit
    if kafka:
        ranges = kafka_read.offset_ranges(batch_df)
        return ranges is not None and sum(r.records for r in ranges) < limit
    size = driver_read.plan_bytes(batch_df)
    return size is not None and size < limit * driver_read._BYTES_PER_LINE


def driver_steps(batch: BatchRun, batch_df: DataFrame, compactor: Compactor | None, rules: Rules) -> None:
    """The whole batch in the driver process: its lines read here, parsed and checked by the kernel,
    its rows committed. `rules`: a user's CHECK constraints on the checked tables (stream.constrained)."""
    batch.describe("read lines")
    # Files read whole (kernel.file_json) keep no line's text, which a constraint's quarantine needs.
    universe = None if rules else batch.settings.universe
    read = driver_read.read_batch(batch_df, universe, batch.reader)
    collected = ms_since(batch.t0)
    t1 = time.perf_counter()
    parsed = steps.parse(read[1], batch.settings.universe, keep_text=bool(rules))
    cols = layout.concat([*read[0], parsed.columns])
    bad = [parsed.quarantine]
    if rules:
        cols, broken = constrained.screen_quotes(batch, cols, rules)
        bad.append(broken)
    batch.result.phases_ms.update(collect=collected, parse=ms_since(t1))
    _column_steps(batch, cols, bad, compactor, rules)


def _counted(batch: BatchRun, cols: layout.ColumnBatch, quarantined: int) -> None:
    result = batch.result
    result.on_driver = True
    result.quotes, result.orders, result.quarantined = cols.quotes.num_rows, cols.orders.num_rows, quarantined
    result.input_lines = result.quotes + result.orders + quarantined
    result.files, result.last_offsets = line_rows.sources(set(cols.sources))


def _column_steps(
    batch: BatchRun, cols: layout.ColumnBatch, bad: list[pa.Table | None], compactor: Compactor | None, rules: Rules
) -> None:
    """Check the orders, make the quotes' rows, commit."""
    result, settings = batch.result, batch.settings
    t2 = time.perf_counter()
    alerts = None
    if cols.orders.num_rows:
        quotes_of, result.late_symbols = candidates.candidates(cols, batch.state, batch.tables)
        alerts = steps.check(
            cols.orders, quotes_of, settings.thresholds, batch.batch_id, datetime.now(UTC), SCHEMAS["alerts"]
        )
        if rules:
            cols, alerts, broken = constrained.screen_alerts(batch, cols, alerts, rules)
            bad.append(broken)
    result.phases_ms["check"] = ms_since(t2)
    t3 = time.perf_counter()
    history = newest = None
    if cols.quotes.num_rows:
        history = steps.history(cols.quotes, batch.batch_id, settings.thresholds, SCHEMAS["quotes"])
        newest = steps.newest(cols.quotes, settings.thresholds, SCHEMAS["quotes"], list(NEWEST_COLUMNS))
    found = [b for b in bad if b is not None and b.num_rows]
    lines = pa.concat_tables(found) if found else None
    _counted(batch, cols, lines.num_rows if lines is not None else 0)
    quarantine = quarantine_rows(lines, batch.batch_id) if lines is not None else None
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
    finish(batch, written, compactor)


def write_state(batch: BatchRun, newest: pa.Table | None) -> None:
    """Stage the batch's newest quotes for symbol_state, and commit what is staged once it is due
    (lake.state_writes: the table trails the checks by at most 10 batches or 5 seconds)."""
    writes = batch.state.writes
    if newest is not None:
        writes.stage(newest, batch.batch_id)
    if writes.due(batch.batch_id):
        writes.flush()


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
    # Every batch: one without quotes may find the staged ones due.
    writes["symbol_state"] = lambda: write_state(batch, newest)
    if history is not None:
        writes["quotes"] = lambda: tables.append("quotes", history, batch_id, guard)
    if alerts is not None:
        writes["alerts"] = lambda: tables.append("alerts", alerts, batch_id, guard)
    if quarantine is not None:
        writes["quarantine"] = lambda: tables.append("quarantine", quarantine, batch_id, guard)
    return writes

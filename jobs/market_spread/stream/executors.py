"""A batch with its kernel inside Spark's tasks (`--placement executors`): the same steps as the
driver placement (kernel.steps), run by `mapInArrow` over the batch's lines and by
`cogroup(...).applyInArrow` over hash buckets of the symbol (a call handles many symbols: the
partitioned state of Wallaroo's design). The driver adds what only it holds (its copy of the state,
the history of symbols with late orders), takes the results back as Arrow and commits them through each table's writer, as the driver
placement does (stream.driver_batch.write_rows).

Two Spark jobs a batch: the parse, whose small outcome comes back whole (per kind and symbol counts
and order times, bad lines, the files read), and the check with the history rows and the newest
quote per symbol, in one cogroup."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from market_spread.kernel import line_rows
from market_spread.lake.compaction import Compactor
from market_spread.lake.state import NEWEST_COLUMNS
from market_spread.lake.writes import ms_since
from market_spread.runtime.spark import kept_for_batch
from market_spread.stream import candidates, driver_batch
from market_spread.stream import task_functions as tf
from market_spread.stream.batch_run import BatchRun

SCHEMAS = driver_batch.SCHEMAS
_SMALL = "kind IN ('bad', 'source')"  # the parse's rows that come back to the driver whole


def executors_steps(batch: BatchRun, batch_df: DataFrame, compactor: Compactor | None) -> None:
    """Parse, check and sum up the batch in Spark's tasks, then commit its rows from the driver."""
    batch.describe("parse in tasks")
    lines = batch_df.select("stream", "value", "source_file")
    parse = tf.parse_task(batch.settings.symbols)
    with kept_for_batch(lines.mapInArrow(parse, _spark(tf.PARSED))) as parsed:
        overview = _overview(parsed)
        _counted(batch, overview)
        t2 = time.perf_counter()
        checked = _checked(batch, parsed, overview) if batch.result.quotes or batch.result.orders else None
        batch.result.phases_ms["check"] = ms_since(t2)
        t3 = time.perf_counter()
        alerts, history, newest = _split(checked, batch.result.orders, batch.result.quotes)
        quarantine = _quarantine(batch, overview)
        driver_batch.write_rows(batch, history, alerts, newest, quarantine, t3, compactor)


def _spark(schema: pa.Schema):  # noqa: ANN202 - pyspark's StructType
    return from_arrow_schema(schema)


def _overview(parsed: DataFrame) -> pa.Table:
    """One job: per kind and symbol of the valid rows their count and first and last time, and the
    parse's small rows whole (bad lines, the files read)."""
    counted = (
        parsed.where("kind IN ('quote', 'order')")
        .groupBy("kind", "symbol")
        .agg(F.count(F.lit(1)).alias("n"), F.min("time").alias("first"), F.max("time").alias("last"))
    )
    small = parsed.where(_SMALL).select("kind", "stream", "value", "reason", "source_file", F.lit(1).alias("n"))
    return tf.plain(counted.unionByName(small, allowMissingColumns=True).toArrow())


def _of(overview: pa.Table, kind: str) -> pa.Table:
    return overview.filter(pc.equal(overview["kind"], kind))


def _count(overview: pa.Table, kind: str) -> int:
    return int(pc.sum(_of(overview, kind)["n"]).as_py() or 0)


def _counted(batch: BatchRun, overview: pa.Table) -> None:
    result = batch.result
    result.quotes = _count(overview, "quote")
    result.orders = _count(overview, "order")
    result.quarantined = _count(overview, "bad")
    result.input_lines = result.quotes + result.orders + result.quarantined
    named = overview.filter(pc.is_valid(overview["source_file"]))["source_file"].to_pylist()
    result.files, result.last_offsets = line_rows.sources(set(named))
    result.phases_ms.update(collect=0, parse=ms_since(batch.t0))


def _bucket(spark: SparkSession) -> Column:
    """A hash bucket of the symbol: as many as the cores Spark runs tasks on."""
    return F.pmod(F.hash("symbol"), F.lit(max(1, spark.sparkContext.defaultParallelism)))


def _checked(batch: BatchRun, rows: DataFrame, overview: pa.Table) -> pa.Table:
    """In tasks, by bucket: every order against its as-of quote among the batch's quotes and the
    stored ones (the driver's copy of the state, history for late orders), the quotes' history rows
    and each symbol's newest quote (tf.OUT rows)."""
    batch.describe("check in tasks")
    spans = _of(overview, "order").select(["symbol", "first", "last"])
    stored, batch.result.late_symbols = candidates.stored_quotes(spans, batch.state, batch.tables)
    spark, bucket = batch.spark, _bucket(batch.spark)
    orders = rows.where("kind = 'order'").select(*tf.ORDER.names).withColumn("bucket", bucket)
    own = rows.where("kind = 'quote'").select(*tf.CANDIDATE.names, F.lit(True).alias("own"))
    stored_df = spark.createDataFrame(tf.stored_rows(stored), schema=_spark(tf.KNOWN))
    known = own.unionByName(stored_df).withColumn("bucket", bucket)
    settings = batch.settings
    task = tf.check_task(settings.thresholds, batch.batch_id, datetime.now(UTC), SCHEMAS["alerts"], SCHEMAS["quotes"])
    out = tf.out_schema(SCHEMAS["alerts"], SCHEMAS["quotes"])
    grouped = orders.groupBy("bucket").cogroup(known.groupBy("bucket"))
    return grouped.applyInArrow(task, _spark(out)).toArrow().cast(out)


def _split(checked: pa.Table | None, orders: int, quotes: int) -> tuple[pa.Table | None, ...]:
    """The check's rows as alerts, quote history and state rows (None for what the batch has not)."""
    if checked is None:
        return None, None, None

    def kind(name: str, schema: list[str]) -> pa.Table:
        return checked.filter(pc.equal(checked["kind"], name)).select(schema)

    alerts = kind("alert", SCHEMAS["alerts"].names).cast(SCHEMAS["alerts"]) if orders else None
    history = kind("history", SCHEMAS["quotes"].names).cast(SCHEMAS["quotes"]) if quotes else None
    newest = kind("newest", list(NEWEST_COLUMNS)) if quotes else None
    return alerts, history, newest


def _quarantine(batch: BatchRun, overview: pa.Table) -> pa.Table | None:
    """The bad lines as quarantine rows."""
    if not batch.result.quarantined:
        return None
    bad = _of(overview, "bad").select(["stream", "value", "reason", "source_file"])
    rows = bad.rename_columns(list(line_rows.QUARANTINE)).cast(
        pa.schema([(n, pa.string()) for n in line_rows.QUARANTINE])
    )
    return driver_batch.quarantine_rows(rows, batch.batch_id)

"""A batch with its kernel inside Spark's tasks (`--placement executors`): the same steps as the
driver placement (kernel.steps), run by `mapInArrow` over the batch's lines and by
`cogroup(...).applyInArrow` over hash buckets of the symbol (a call handles many symbols: the
partitioned state of Wallaroo's design). The driver adds what only it holds (its copy of the state,
the history of symbols with late orders, Spark's parse of the few lines the kernel cannot judge),
takes the results back as Arrow and commits them through each table's writer, as the driver
placement does (stream.driver_batch.write_rows)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from market_spread.kernel import line_rows, steps
from market_spread.lake.compaction import Compactor
from market_spread.lake.state import NEWEST_COLUMNS
from market_spread.lake.writes import ms_since
from market_spread.runtime.spark import kept_for_batch
from market_spread.stream import candidates, driver_batch, driver_spark
from market_spread.stream.batch_run import BatchRun
from market_spread.stream.task_functions import (
    CANDIDATE,
    ORDER,
    PARSED,
    as_parsed,
    check_task,
    history_task,
    parse_task,
    plain,
)

SCHEMAS = driver_batch.SCHEMAS


def executors_steps(batch: BatchRun, batch_df: DataFrame, compactor: Compactor | None) -> None:
    """Parse, check and sum up the batch in Spark's tasks, then commit its rows from the driver."""
    spec = batch.settings
    batch.describe("parse in tasks")
    lines = batch_df.select("stream", "value", "source_file")
    with kept_for_batch(lines.mapInArrow(parse_task(spec.symbols), _spark(PARSED))) as parsed:
        overview = plain(
            parsed.groupBy("kind", "symbol", "source_file")
            .agg(F.count(F.lit(1)).alias("n"), F.min("time").alias("first"), F.max("time").alias("last"))
            .toArrow()
        )
        rows, extra = _judged(batch, parsed, overview)
        _counted(batch, overview, extra)
        t2 = time.perf_counter()
        alerts = _alerts(batch, rows, overview, extra) if batch.result.orders else None
        batch.result.phases_ms["check"] = ms_since(t2)
        t3 = time.perf_counter()
        history, newest = _history(batch, rows) if batch.result.quotes else (None, None)
        bad = rows.where("kind = 'bad'").select("stream", F.col("value").alias("raw"), "reason", "source_file")
        quarantine = _quarantine(batch, bad)
        driver_batch.write_rows(batch, history, alerts, newest, quarantine, t3, compactor)


def _spark(schema: pa.Schema):  # noqa: ANN202 - pyspark's StructType
    return from_arrow_schema(schema)


def _judged(batch: BatchRun, parsed: DataFrame, overview: pa.Table) -> tuple[DataFrame, steps.Parsed | None]:
    """The parsed rows, with the lines only Spark's JSON reader can judge parsed by it on the driver
    (stream.driver_spark: few, where any) and returned to the batch as PARSED rows."""
    if not _count(overview, "uncertain"):
        return parsed, None
    uncertain = plain(parsed.where("kind = 'uncertain'").select("stream", "value", "source_file").toArrow())
    if batch.warm is not None:
        batch.warm.wait()
    batch.describe("parse uncertain lines")
    columns, bad = driver_spark.parse(batch.spark, uncertain, batch.universe)
    extra = steps.Parsed(columns, bad, uncertain.slice(0, 0))
    frame = batch.spark.createDataFrame(as_parsed(extra), schema=_spark(PARSED))
    return parsed.where("kind <> 'uncertain'").unionByName(frame), extra


def _count(overview: pa.Table, kind: str) -> int:
    return int(pc.sum(overview.filter(pc.equal(overview["kind"], kind))["n"]).as_py() or 0)


def _counted(batch: BatchRun, overview: pa.Table, extra: steps.Parsed | None) -> None:
    result = batch.result
    more = extra.columns if extra is not None else None
    result.quotes = _count(overview, "quote") + (more.quotes.num_rows if more else 0)
    result.orders = _count(overview, "order") + (more.orders.num_rows if more else 0)
    result.quarantined = _count(overview, "bad") + (extra.quarantine.num_rows if extra else 0)
    result.input_lines = result.quotes + result.orders + result.quarantined
    named = pc.is_valid(overview["source_file"])
    files = set(overview.filter(named)["source_file"].to_pylist()) | set(more.sources if more else [])
    result.files, result.last_offsets = line_rows.sources(files)
    result.phases_ms.update(collect=0, parse=ms_since(batch.t0))


def _bucket(spark: SparkSession) -> Column:
    """A hash bucket of the symbol: as many as the cores Spark runs tasks on."""
    return F.pmod(F.hash("symbol"), F.lit(max(1, spark.sparkContext.defaultParallelism)))


def _alerts(batch: BatchRun, rows: DataFrame, overview: pa.Table, extra: steps.Parsed | None) -> pa.Table:
    """Every order against its as-of quote, in tasks: the batch's quotes and the stored ones (the
    driver's copy of the state, history for late orders) cogrouped with the orders by bucket."""
    batch.describe("check in tasks")
    spans = _spans(overview, extra)
    stored, batch.result.late_symbols = candidates.stored_quotes(spans, batch.state, batch.tables)
    bucket = _bucket(batch.spark)
    orders = rows.where("kind = 'order'").select(*ORDER.names).withColumn("bucket", bucket)
    quotes = rows.where("kind = 'quote'").select(*CANDIDATE.names)
    stored_df = batch.spark.createDataFrame(stored.cast(CANDIDATE), schema=_spark(CANDIDATE))
    known = quotes.unionByName(stored_df).withColumn("bucket", bucket)
    check = check_task(batch.settings.thresholds, batch.batch_id, datetime.now(UTC), SCHEMAS["alerts"])
    grouped = orders.groupBy("bucket").cogroup(known.groupBy("bucket"))
    return grouped.applyInArrow(check, _spark(SCHEMAS["alerts"])).toArrow().cast(SCHEMAS["alerts"])


def _spans(overview: pa.Table, extra: steps.Parsed | None) -> pa.Table:
    """Per symbol with orders, the first and last order's time (symbol, first, last)."""
    orders = overview.filter(pc.equal(overview["kind"], "order")).select(["symbol", "first", "last"])
    if extra is not None and extra.columns.orders.num_rows:
        more = extra.columns.orders.group_by("symbol").aggregate([("time", "min"), ("time", "max")])
        orders = pa.concat_tables([orders, more.rename_columns(["symbol", "first", "last"])])
    merged = orders.group_by("symbol").aggregate([("first", "min"), ("last", "max")])
    return merged.rename_columns(["symbol", "first", "last"])


def _history(batch: BatchRun, rows: DataFrame) -> tuple[pa.Table, pa.Table]:
    """The quotes' history rows and each symbol's newest quote as state rows, in tasks by bucket."""
    batch.describe("quote history in tasks")
    schema = SCHEMAS["quotes"]
    out = schema.append(pa.field("is_newest", pa.bool_()))
    quotes = rows.where("kind = 'quote'").select(*CANDIDATE.names).withColumn("bucket", _bucket(batch.spark))
    task = history_task(batch.settings.thresholds, batch.batch_id, schema)
    done = quotes.groupBy("bucket").applyInArrow(task, _spark(out)).toArrow().cast(out)
    flag = done["is_newest"]
    history = done.filter(pc.invert(flag)).drop_columns(["is_newest"])
    newest = done.filter(flag).select(list(NEWEST_COLUMNS))
    return history, newest


def _quarantine(batch: BatchRun, bad: DataFrame) -> pa.Table | None:
    """The bad lines (those Spark's parse judged too: stream.executors._judged) as quarantine rows."""
    if not batch.result.quarantined:
        return None
    batch.describe("quarantine rows")
    rows = plain(bad.toArrow()).cast(pa.schema([(n, pa.string()) for n in line_rows.QUARANTINE]))
    return driver_batch.quarantine_rows(rows, batch.batch_id)

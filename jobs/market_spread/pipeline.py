"""One micro-batch: parse both feeds, check every order as of its time, write the lake exactly once.

Writes, in this order, each a Delta commit made idempotent by the session settings
`spark.databricks.delta.write.txnAppId/txnVersion` (= query id, batch id): quarantine, quote
history, alerts, the symbol_state MERGE, and last batch_metrics. When Spark replays a batch after a
crash, commits that already happened are skipped by Delta and the missing ones are made.

A replay reads the lake as the interrupted attempt left it (state or history may already hold this
batch's quotes). The answers do not change: every candidate quote an order may need is still there
(history holds every earlier quote; the batch's own quotes are re-read from its files), and the
choice among candidates is a total order over their own fields (rules.quote_key), not over time of
arrival.
"""
from __future__ import annotations

import contextlib
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal
from typing import Callable, Iterator

from delta.tables import DeltaTable
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from . import lake as lake_mod
from . import parsing
from .rules import quote_key_sql, reject_sql

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"


@contextlib.contextmanager
def idempotent_write(spark: SparkSession, app_id: str, version: int) -> Iterator[None]:
    """Tag the next Delta commit with (app_id, version) so that a replay of it is skipped.

    The settings stick to the session until unset: unset them at once, or a later, unrelated write
    would be skipped as a duplicate.
    """
    spark.conf.set(TXN_APP_ID, app_id)
    spark.conf.set(TXN_VERSION, str(version))
    try:
        yield
    finally:
        spark.conf.unset(TXN_APP_ID)
        spark.conf.unset(TXN_VERSION)


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
    phases_ms: dict[str, int] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)  # the landing files this batch took

    def progress_line(self) -> str:
        return (
            f"batch {self.batch_id}: {self.input_lines} lines, {self.quotes} quotes, {self.orders} orders, "
            f"{self.alerts} alerts, {self.quarantined} quarantined in {self.seconds:.2f}s"
        )


@dataclass
class BatchProcessor:
    """The foreachBatch function of the stream (callable as `processor(batch_df, batch_id)`)."""

    lake: str
    symbols: list[str]  # the universe
    max_spread: Decimal
    max_spread_ratio: Decimal
    app_id_source: Callable[[], str]  # the query id, known once the query has started
    on_batch: Callable[[BatchResult], None] = print

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        result = process_batch(
            batch_df, batch_id, self.lake, self.symbols, self.max_spread, self.max_spread_ratio,
            self.app_id_source(),
        )
        self.on_batch(result)


def _ms(start: float) -> int:
    return int((time.perf_counter() - start) * 1000)


def process_batch(
    batch_df: DataFrame,
    batch_id: int,
    lake: str,
    symbols: list[str],
    max_spread: Decimal,
    max_spread_ratio: Decimal,
    app_id: str,
) -> BatchResult:
    spark = batch_df.sparkSession
    t0 = time.perf_counter()
    started_at = datetime.now(timezone.utc)
    result = BatchResult(batch_id)
    path = lambda name: lake_mod.table_path(lake, name)  # noqa: E731

    lines = parsing.nonblank_lines(batch_df)
    # Everything below reads the parsed batch several times: parse each input line once.
    parsed = parsing.parse_lines(lines, symbols).persist(StorageLevel.MEMORY_AND_DISK)
    cached: list[DataFrame] = [parsed]
    try:
        groups = parsed.groupBy("stream", F.col("reason").isNull().alias("valid")).agg(
            F.count(F.lit(1)).alias("n"), F.collect_set("source_file").alias("files")
        ).collect()
        counts = {(r["stream"], r["valid"]): r["n"] for r in groups}
        result.files = sorted({f for r in groups for f in r["files"]})
        result.quotes, result.orders = counts.get(("quotes", True), 0), counts.get(("orders", True), 0)
        result.input_lines = sum(counts.values())
        result.quarantined = result.input_lines - result.quotes - result.orders
        result.phases_ms["parse"] = _ms(t0)

        quotes = parsing.valid_quotes(parsed, max_spread, max_spread_ratio)
        orders = parsing.valid_orders(parsed)

        t1 = time.perf_counter()
        alerts = None
        if result.orders:
            alerts, result.late_symbols = check_orders(
                spark, lake, quotes, orders, max_spread, max_spread_ratio, batch_id
            )
            alerts = alerts.persist(StorageLevel.MEMORY_AND_DISK)
            cached.append(alerts)
            result.alerts = alerts.count()
        result.phases_ms["check"] = _ms(t1)

        t2 = time.perf_counter()
        writes: dict[str, Callable[[], None]] = {}
        if result.quarantined:
            quarantine = parsing.quarantined(parsed).select(
                "stream", "raw", "reason", "source_file",
                F.current_timestamp().alias("detected_at"), F.lit(batch_id).cast("bigint").alias("batch_id"),
            )
            writes["quarantine"] = lambda: _append(quarantine, path("quarantine"))
        if result.quotes:
            history = quotes.select(
                "symbol", "bid", "offer", "quote_time", "seq",
                F.lit(batch_id).cast("bigint").alias("batch_id"), "should_reject_trades",
                F.to_date("quote_time").alias("quote_date"),
            )
            writes["quotes"] = lambda: _append(history, path("quotes"))
            writes["symbol_state"] = lambda: merge_state(spark, lake, quotes, batch_id)
        if result.alerts:
            writes["alerts"] = lambda: _append(alerts, path("alerts"))
        # The writes go to four different tables and share one (app id, batch id) tag, so they run
        # side by side: a small commit is mostly waiting, and they would otherwise queue.
        with idempotent_write(spark, app_id, batch_id):
            _run_all(writes, result.phases_ms)
        result.phases_ms["write"] = _ms(t2)
        result.phases_ms.setdefault("merge", 0)

        result.seconds = time.perf_counter() - t0
        values = (
            batch_id, started_at, datetime.now(timezone.utc), result.quotes, result.orders,
            result.alerts, result.quarantined, result.input_lines, result.late_symbols,
            result.phases_ms["parse"], result.phases_ms["check"], result.phases_ms["write"],
            result.phases_ms["merge"],
        )
        metrics = literal_row(spark, lake_mod.SCHEMAS["batch_metrics"], values)
        # Last: a metrics row means every other write of the batch is in.
        t3 = time.perf_counter()
        with idempotent_write(spark, app_id, batch_id):
            _append(metrics, path("batch_metrics"))
        result.phases_ms["commit_metrics"] = _ms(t3)
        result.seconds = time.perf_counter() - t0
        return result
    finally:
        for df in cached:
            df.unpersist()


def literal_row(spark: SparkSession, schema: str, values: tuple) -> DataFrame:
    """A one-row DataFrame of literals. Unlike createDataFrame of Python rows, it needs no Python
    worker on the executors: they stay JVM-only."""
    fields = [f.strip().split(" ", 1) for f in schema.split(",")]
    return spark.range(1).select(
        *[F.lit(v).cast(t).alias(n) for (n, t), v in zip(fields, values)]
    )


def _append(df: DataFrame, path: str) -> None:
    df.write.format("delta").mode("append").save(path)


def _run_all(writes: dict[str, Callable[[], None]], phases_ms: dict[str, int]) -> None:
    """Run the writes concurrently; re-raise the first failure after all have finished."""
    if not writes:
        return

    def timed(name: str) -> None:
        start = time.perf_counter()
        writes[name]()
        # Each write's own time (they overlap: "write" is the wall time of all of them).
        phases_ms["merge" if name == "symbol_state" else f"append_{name}"] = _ms(start)

    workers = int(os.environ.get("MARKET_SPREAD_WRITE_THREADS", "4"))
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(writes))), thread_name_prefix="delta-write") as pool:
        futures = [pool.submit(timed, name) for name in writes]
    for future in futures:
        future.result()


def check_orders(
    spark: SparkSession,
    lake: str,
    quotes: DataFrame,
    orders: DataFrame,
    max_spread: Decimal,
    max_spread_ratio: Decimal,
    batch_id: int,
) -> tuple[DataFrame, int]:
    """Alerts for the batch's orders, each checked against the quote current at its time.

    Candidates: this batch's quotes, the stored state, and, only for symbols with orders older than
    their stored state ("late"), the quote history up to those orders' times. The as-of choice is a
    sort within each symbol with the last quote carried forward (no range join: that would go
    quadratic on hot symbols).
    """
    bounds = orders.groupBy("symbol").agg(
        F.min("order_time").alias("first_order"), F.max("order_time").alias("last_order")
    )
    state = spark.read.format("delta").load(lake_mod.table_path(lake, "symbol_state"))
    state_quotes = state.select("symbol", "bid", "offer", "quote_time", "seq")
    late = (
        bounds.join(state_quotes.select("symbol", "quote_time"), "symbol")
        .where("quote_time > first_order")
        .select("symbol", "last_order")
        .collect()
    )
    candidates = (
        quotes.select("symbol", "bid", "offer", "quote_time", "seq")
        .unionByName(state_quotes)
        .join(F.broadcast(bounds.select("symbol")), "symbol", "left_semi")
    )
    if late:
        history = spark.read.format("delta").load(lake_mod.table_path(lake, "quotes"))
        late_symbols = [r["symbol"] for r in late]
        newest = max(r["last_order"] for r in late)
        older = (
            history.where(F.col("symbol").isin(late_symbols))
            # Day partitions after the newest late order are never read.
            .where(F.col("quote_date") <= F.to_date(F.lit(newest)))
            .join(F.broadcast(bounds.where(F.col("symbol").isin(late_symbols)).select("symbol", "last_order")), "symbol")
            .where("quote_time <= last_order")
            .select("symbol", "bid", "offer", "quote_time", "seq")
        )
        candidates = candidates.unionByName(older)

    return asof_alerts(candidates, orders, max_spread, max_spread_ratio, batch_id), len(late)


def asof_alerts(candidates: DataFrame, orders: DataFrame, max_spread: Decimal, max_spread_ratio: Decimal,
                batch_id: int) -> DataFrame:
    """The alerts of `orders` given every quote (`candidates`) an order may be checked against."""
    quote_events = candidates.select(
        "symbol",
        F.col("quote_time").alias("ts"),
        F.lit(0).alias("kind"),  # at equal times quotes sort first: a quote at the order's time counts
        F.expr(quote_key_sql()).alias("quote_key"),
        F.struct("bid", "offer", "quote_time", "seq").alias("quote"),
        *[F.lit(None).cast(t).alias(c) for c, t in ORDER_COLUMNS],
    )
    order_events = orders.select(
        "symbol",
        F.col("order_time").alias("ts"),
        F.lit(1).alias("kind"),
        F.lit(None).cast(quote_events.schema["quote_key"].dataType).alias("quote_key"),
        F.lit(None).cast(quote_events.schema["quote"].dataType).alias("quote"),
        *[F.col(src).cast(t).alias(c) for (c, t), src in zip(ORDER_COLUMNS, ORDER_SOURCES)],
    )
    window = (
        Window.partitionBy("symbol")
        .orderBy("ts", "kind", "quote_key")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    checked = (
        quote_events.unionByName(order_events)
        .withColumn("asof", F.last("quote", ignorenulls=True).over(window))
        .where("kind = 1")
    )
    rejects = reject_sql("asof.bid", "asof.offer", max_spread, max_spread_ratio)
    alerts = checked.select(
        "order_id", "account", "symbol", "side", "qty", "price", "order_time",
        F.expr(f"CASE WHEN asof IS NULL THEN 'no_market_data' WHEN {rejects} THEN 'wide_spread' END").alias("reason"),
        F.col("asof.bid").alias("bid"),
        F.col("asof.offer").alias("offer"),
        F.col("asof.quote_time").alias("quote_time"),
        F.current_timestamp().alias("detected_at"),
        F.lit(batch_id).cast("bigint").alias("batch_id"),
        "order_seq",
        F.col("asof.seq").alias("quote_seq"),
    ).where("reason IS NOT NULL")
    return alerts


ORDER_COLUMNS = (
    ("order_id", "string"), ("account", "bigint"), ("side", "string"), ("qty", "decimal(18,8)"),
    ("price", "decimal(18,8)"), ("order_time", "timestamp"), ("order_seq", "bigint"),
)
ORDER_SOURCES = ("order_id", "account", "side", "qty", "price", "order_time", "seq")


def merge_state(spark: SparkSession, lake: str, quotes: DataFrame, batch_id: int) -> None:
    """Upsert the newest quote per symbol; an older quote (by rules.quote_key) never overwrites.

    Call inside `idempotent_write`: the MERGE takes its txn tag from the session settings."""
    newest = (
        quotes.groupBy("symbol")
        .agg(F.max_by(F.struct("bid", "offer", "quote_time", "seq", "should_reject_trades"), F.expr(quote_key_sql())).alias("q"))
        .select(
            "symbol", "q.bid", "q.offer", "q.quote_time", "q.seq", "q.should_reject_trades",
            F.current_timestamp().alias("updated_at"), F.lit(batch_id).cast("bigint").alias("batch_id"),
        )
    )
    target = DeltaTable.forPath(spark, lake_mod.table_path(lake, "symbol_state"))
    columns = {c: f"s.{c}" for c in newest.columns}
    (
        target.alias("t")
        .merge(newest.alias("s"), "t.symbol = s.symbol")
        .whenMatchedUpdate(condition=f"{quote_key_sql('s.')} > {quote_key_sql('t.')}", set=columns)
        .whenNotMatchedInsert(values=columns)
        .execute()
    )

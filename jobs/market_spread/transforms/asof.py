"""The as-of check as a DataFrame transform: each order against the quote current at its time.

Not a range join (quadratic on hot symbols): quotes and orders are unioned, ordered by time within
each symbol, and the last quote is carried forward with a window. Candidates are whatever quotes an
order may be checked against (the batch's, the stored state's, late history): choosing them is the
stream's business (stream/batch.py), not this module's.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from market_spread.domain.rules import Thresholds, quote_key_sql, reject_sql

STATE_QUOTE_COLUMNS = ("symbol", "bid", "offer", "quote_time", "seq")


def asof_alerts(candidates: DataFrame, orders: DataFrame, thresholds: Thresholds, batch_id: int) -> DataFrame:
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
    rejects = reject_sql("asof.bid", "asof.offer", thresholds)
    alerts = checked.select(
        "order_id",
        "account",
        "symbol",
        "side",
        "qty",
        "price",
        "order_time",
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
    ("order_id", "string"),
    ("account", "bigint"),
    ("side", "string"),
    ("qty", "decimal(18,8)"),
    ("price", "decimal(18,8)"),
    ("order_time", "timestamp"),
    ("order_seq", "bigint"),
)
ORDER_SOURCES = ("order_id", "account", "side", "qty", "price", "order_time", "seq")

"""Reading and updating the quote state: the symbol_state table (newest quote per symbol, kept by a
Delta MERGE) and the quote history read for late orders."""
from __future__ import annotations

from datetime import datetime, timezone

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from market_spread.domain.rules import quote_key_sql
from market_spread.lake import tables as lake_mod
from market_spread.transforms.asof import STATE_QUOTE_COLUMNS

def read_state_quotes(spark: SparkSession, lake: str) -> DataFrame:
    return spark.read.format("delta").load(lake_mod.table_path(lake, "symbol_state")).select(*STATE_QUOTE_COLUMNS)


# How far before its first late order a symbol's history is read first (see late_history).
LATE_LOOKBACK_DAYS = 1


def late_history(spark: SparkSession, lake: str, late: list) -> DataFrame:
    """The history quotes that late orders (older than their symbol's state) may be checked against.

    Read with a lower time bound: from the day before a symbol's first late order. A symbol that
    has a quote at or before its first late order inside that window needs nothing older (every
    one of its late orders is at or after that quote). Only the symbols without one (no quote for a
    day or more) are looked up further back, and only then is the older history read.
    """
    history = spark.read.format("delta").load(lake_mod.table_path(lake, "quotes"))
    spans = {r["symbol"]: (r["first_order"], r["last_order"]) for r in late}
    # Dates in Spark (the session's UTC), not in Python: collected timestamps are in local time.
    floor = F.date_sub(F.to_date(F.lit(min(f for f, _ in spans.values()))), LATE_LOOKBACK_DAYS)
    ceiling = F.to_date(F.lit(max(l for _, l in spans.values())))
    span_rows = spark.range(1).select(F.explode(F.array(*[
        F.struct(F.lit(s).alias("symbol"), F.lit(f).alias("first_order"), F.lit(l).alias("last_order"))
        for s, (f, l) in spans.items()
    ])).alias("b")).select("b.*")

    def upto_last_order(frame: DataFrame) -> DataFrame:
        return frame.join(F.broadcast(span_rows), "symbol").where("quote_time <= last_order")

    recent = upto_last_order(
        history.where(F.col("symbol").isin(list(spans)))
        # Day partitions outside [floor, ceiling] are never read.
        .where((F.col("quote_date") >= floor) & (F.col("quote_date") <= ceiling))
    )
    covered = {r["symbol"] for r in recent.where("quote_time <= first_order").select("symbol").distinct().collect()}
    result = recent.select(*STATE_QUOTE_COLUMNS)
    uncovered = [s for s in spans if s not in covered]
    if uncovered:
        older = upto_last_order(
            history.where(F.col("symbol").isin(uncovered)).where(F.col("quote_date") < floor)
        )
        result = result.unionByName(older.select(*STATE_QUOTE_COLUMNS))
    return result


def merge_state(spark: SparkSession, lake: str, quotes: DataFrame, batch_id: int) -> None:
    """Upsert the newest quote per symbol; an older quote (by rules.quote_key) never overwrites.

    The source is at most one row per symbol, computed from the cached batch, and not materialised
    again by Delta (the session sets `merge.materializeSource=none`: the source is deterministic,
    the update time a literal). No broadcast hint: Delta's MERGE joins drop it (a full outer join
    cannot build the left side)."""
    updated_at = datetime.now(timezone.utc)
    newest = (
        quotes.groupBy("symbol")
        .agg(F.max_by(F.struct("bid", "offer", "quote_time", "seq", "should_reject_trades"), F.expr(quote_key_sql())).alias("q"))
        .select(
            "symbol", "q.bid", "q.offer", "q.quote_time", "q.seq", "q.should_reject_trades",
            F.lit(updated_at).cast("timestamp").alias("updated_at"), F.lit(batch_id).cast("bigint").alias("batch_id"),
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

"""Reading and updating the quote state: the symbol_state table (newest quote per symbol, kept by a
Delta MERGE) and the quote history read for late orders."""
from __future__ import annotations

import os
from datetime import datetime, timezone

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from market_spread.domain.rules import quote_key_sql
from market_spread.lake import tables as lake_mod
from market_spread.transforms.asof import STATE_QUOTE_COLUMNS

def read_state_quotes(spark: SparkSession, lake: str) -> DataFrame:
    return spark.read.format("delta").load(lake_mod.table_path(lake, "symbol_state")).select(*STATE_QUOTE_COLUMNS)


def newest_per_symbol(quotes: DataFrame, extra: tuple[str, ...] = ("should_reject_trades",)) -> DataFrame:
    """The highest quote (by rules.quote_key) of each symbol: STATE_QUOTE_COLUMNS and the `extra` ones."""
    fields = [c for c in STATE_QUOTE_COLUMNS if c != "symbol"] + list(extra)
    return (
        quotes.groupBy("symbol")
        .agg(F.max_by(F.struct(*fields), F.expr(quote_key_sql())).alias("q"))
        .select("symbol", *[f"q.{c}" for c in fields])
    )


# Past this many symbols the state is read from the table each batch instead of kept on the driver.
MIRROR_MAX_ROWS = int(os.environ.get("MARKET_SPREAD_STATE_MIRROR_ROWS", "200000"))


class StateMirror:
    """symbol_state's quotes, kept on the driver by the lake's only writer (the lock).

    Each read of the table costs Delta a snapshot and a file listing: two or three Spark jobs and
    ~0.8 s of a 2,000-event batch, twice a batch (the late check and the as-of). The mirror costs one
    small job a batch. It is a local relation (rows in the driver, shipped with the tasks), so
    losing an executor loses nothing. It is read from the table at the first batch of a process and
    again after a failed batch, and it advances as the MERGE does (a symbol only ever moves to a
    higher quote key), so after each batch it holds what the table holds.
    """

    def __init__(self, spark: SparkSession, lake: str) -> None:
        self.spark, self.lake = spark, lake
        self._df: DataFrame | None = None
        self.enabled = MIRROR_MAX_ROWS > 0

    def quotes(self) -> DataFrame:
        """The state's quotes (STATE_QUOTE_COLUMNS)."""
        if not self.enabled:
            return read_state_quotes(self.spark, self.lake)
        if self._df is None:
            self._df = self._local(read_state_quotes(self.spark, self.lake))
        return self._df if self._df is not None else read_state_quotes(self.spark, self.lake)

    def newest(self, quotes: DataFrame) -> DataFrame:
        """The batch's newest quote per symbol (`newest_per_symbol`), computed once for both the MERGE
        and `advance`: held on the driver while the mirror is in use, else left to Spark."""
        newest = newest_per_symbol(quotes)
        if not self.enabled:
            return newest
        return local_copy(newest, MIRROR_MAX_ROWS) or newest

    def advance(self, newest: DataFrame) -> None:
        """Take in a batch's newest quotes (`newest`), as the state MERGE does."""
        if not self.enabled or self._df is None:
            return
        self._df = self._local(newest_per_symbol(self._df.unionByName(newest.select(*STATE_QUOTE_COLUMNS)), extra=()))

    def reset(self) -> None:
        """Forget the copy: the next batch reads the table (after a failure, the copy may be ahead)."""
        self._df = None

    def _local(self, df: DataFrame) -> DataFrame | None:
        local = local_copy(df, MIRROR_MAX_ROWS)
        if local is None:
            self.enabled = False
        return local


def local_copy(df: DataFrame, max_rows: int) -> DataFrame | None:
    """`df` computed once and kept as a local relation (rows in the driver, shipped with the tasks
    that read it), or None when it has more than `max_rows` rows. Collected and rebuilt inside the
    JVM: the rows never pass through Python."""
    jdf = df._jdf
    rows = jdf.collectAsList()
    if rows.size() > max_rows:
        return None
    return DataFrame(df.sparkSession._jsparkSession.createDataFrame(rows, jdf.schema()), df.sparkSession)


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


def merge_state(spark: SparkSession, lake: str, newest: DataFrame, batch_id: int) -> None:
    """Upsert the batch's newest quote per symbol (`newest`: one row per symbol, as
    `newest_per_symbol` gives); an older quote (by rules.quote_key) never overwrites.

    The source is not materialised again by Delta (the session sets `merge.materializeSource=none`:
    it is deterministic, a local copy or an aggregate of the cached batch, the update time a
    literal). No broadcast hint: Delta's MERGE joins drop it (a full outer join cannot build the
    left side)."""
    updated_at = datetime.now(timezone.utc)
    newest = newest.select(
        "*", F.lit(updated_at).cast("timestamp").alias("updated_at"), F.lit(batch_id).cast("bigint").alias("batch_id"),
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

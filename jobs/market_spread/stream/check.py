"""The as-of check of a batch's orders: which quotes each order may be checked against (the batch's,
the stored state's, and history for late orders), then the as-of choice (transforms.asof)."""

from __future__ import annotations

from datetime import UTC
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from market_spread.lake.state import late_history_rows, local_copy
from market_spread.lake.state_mirror import StateMirror
from market_spread.transforms.asof import STATE_QUOTE_COLUMNS, asof_alerts

if TYPE_CHECKING:
    from market_spread.stream.spec import StreamSpec


def check_orders(
    settings: StreamSpec,
    state: StateMirror,
    quotes: DataFrame,
    orders: DataFrame,
    batch_id: int,
    bounds_rows: pa.Table | None = None,
) -> tuple[DataFrame, int]:
    """Alerts for the batch's orders, each checked against the quote current at its time.

    Candidates: this batch's quotes, the stored state (`state`), and, only for symbols with orders
    older than their stored state ("late"), the quote history up to those orders' times. The as-of
    choice is a sort within each symbol with the last quote carried forward (no range join: that
    would go quadratic on hot symbols). `bounds_rows`: the orders' first and last time per symbol,
    if the batch's summary has them already (stream.summary).
    """
    spark = quotes.sparkSession

    def spans() -> DataFrame:
        return orders.groupBy("symbol").agg(
            F.min("order_time").alias("first_order"), F.max("order_time").alias("last_order")
        )

    if state.ready():
        # On the driver (one job, unless the summary brought them); the late check runs against the
        # driver's copy, and only the stored quotes of symbols with orders go to Spark. The batch's
        # own quotes go whole: a quote of a symbol without orders only costs a row in the sort.
        on_driver = spans().toArrow() if bounds_rows is None else bounds_rows
        late: list[Any] = state.late(on_driver)  # dicts here, Rows from Spark below
        candidates = quotes.select(*STATE_QUOTE_COLUMNS).unionByName(state.quotes(on_driver["symbol"].to_pylist()))
        history = late_history_rows(state.tables, late) if late else None
        if history is not None and history.num_rows:
            candidates = candidates.unionByName(spark.createDataFrame(history))
    else:
        state_quotes = state.quotes()
        # Read twice (late symbols, candidates): computed once, kept on the driver unless very large.
        bounds = spans()
        bounds = local_copy(bounds, state.max_rows) or bounds
        late = (
            bounds.join(state_quotes.select("symbol", "quote_time"), "symbol")
            .where("quote_time > first_order")
            .select("symbol", "first_order", "last_order")
            .collect()
        )
        candidates = (
            quotes.select(*STATE_QUOTE_COLUMNS)
            .unionByName(state_quotes)
            .join(F.broadcast(bounds.select("symbol")), "symbol", "left_semi")
        )
        if late:
            # Collected timestamps are naive, in this process's local time: made aware for delta-rs.
            late_spans = [
                {
                    "symbol": r["symbol"],
                    "first_order": r["first_order"].astimezone(UTC),
                    "last_order": r["last_order"].astimezone(UTC),
                }
                for r in late
            ]
            history = late_history_rows(state.tables, late_spans)
            if history.num_rows:
                candidates = candidates.unionByName(spark.createDataFrame(history))
    return asof_alerts(candidates, orders, settings.thresholds, batch_id), len(late)

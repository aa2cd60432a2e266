"""A checked batch's output rows, in the lake's schemas: alerts (each order with its chosen quote and
the reject rule's answer) and quote history rows. Pure: Arrow columns in, Arrow tables out."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from market_spread.domain.rules import Thresholds
from market_spread.kernel.columns import TIME, rejects

_DAY_US = 86_400_000_000


def quote_days(micros: pa.Array) -> pa.Array:
    """The UTC date of each time (µs since the epoch), as the quote history's partition."""
    days = np.floor_divide(micros.to_numpy(zero_copy_only=False), _DAY_US).astype(np.int32)
    return pa.array(days, pa.int32()).cast(pa.date32())


def timestamps(micros: pa.Array | pa.ChunkedArray) -> pa.Array:
    return pc.cast(micros, pa.int64()).cast(TIME)


def alerts(
    orders: pa.Table, chosen: pa.Table, thresholds: Thresholds, batch_id: int, detected_at: datetime, schema: pa.Schema
) -> pa.Table:
    """The alerts of the orders checked against their chosen quotes (kernel.columns.as_of's columns)."""
    no_quote = pc.is_null(chosen["time"])
    wide = pc.fill_null(rejects(chosen["bid"], chosen["offer"], thresholds), False)
    reason = pc.if_else(no_quote, "no_market_data", pc.if_else(wide, "wide_spread", pa.scalar(None, pa.string())))
    hit = pc.is_valid(reason)
    o, q = orders.filter(hit), chosen.filter(hit)
    n = o.num_rows
    at = int(detected_at.timestamp() * 1_000_000)
    columns = {
        "order_id": o["order_id"],
        "account": o["account"],
        "symbol": o["symbol"],
        "side": o["side"],
        "qty": o["qty"],
        "price": o["price"],
        "order_time": timestamps(o["time"]),
        "reason": reason.filter(hit),
        "bid": q["bid"],
        "offer": q["offer"],
        "quote_time": timestamps(q["time"]),
        "detected_at": timestamps(pa.array([at] * n, pa.int64())),
        "batch_id": pa.array([batch_id] * n, pa.int64()),
        "order_seq": o["seq"],
        "quote_seq": q["seq"],
    }
    return pa.table({f.name: pc.cast(columns[f.name], f.type) for f in schema}, schema=schema)


def history(quotes: pa.Table, batch_id: int, thresholds: Thresholds, schema: pa.Schema) -> pa.Table:
    """The quotes' history rows (driver_batch.quote_rows), in the quotes table's schema."""
    time = quotes["time"].combine_chunks() if quotes.num_rows else pa.array([], pa.int64())
    columns = {
        "symbol": quotes["symbol"],
        "bid": quotes["bid"],
        "offer": quotes["offer"],
        "quote_time": timestamps(time),
        "seq": quotes["seq"],
        "batch_id": pa.array([batch_id] * quotes.num_rows, pa.int64()),
        "should_reject_trades": rejects(quotes["bid"], quotes["offer"], thresholds),
        "quote_date": quote_days(time),
    }
    return pa.table({f.name: pc.cast(columns[f.name], f.type) for f in schema}, schema=schema)

"""The quotes a batch's orders may be checked against: the batch's own, the driver's copy of
symbol_state, and the history of symbols with late orders (read from the lake)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from market_spread.kernel.columns import PRICE
from market_spread.kernel.layout import ColumnBatch
from market_spread.lake.lake_tables import LakeTables
from market_spread.lake.state import late_history_rows
from market_spread.lake.state_mirror import StateMirror


def candidates(cols: ColumnBatch, state: StateMirror, tables: LakeTables) -> tuple[pa.Table, int]:
    """The quotes the orders may be checked against, as one table (symbol, bid, offer, time, seq):
    the batch's own of the orders' symbols, and `stored`'s; and how many symbols had late orders."""
    orders = cols.orders
    spans = orders.group_by("symbol").aggregate([("time", "min"), ("time", "max")])
    spans = spans.rename_columns(["symbol", "first", "last"])
    own = cols.quotes.filter(pc.is_in(cols.quotes["symbol"], value_set=spans["symbol"]))
    stored, late = stored_quotes(spans, state, tables)
    return pa.concat_tables([own, stored]), late


def stored_quotes(spans: pa.Table, state: StateMirror, tables: LakeTables) -> tuple[pa.Table, int]:
    """For the symbols of `spans` (symbol, first, last: their orders' first and last time, in µs),
    the quotes committed before the batch that their orders may need: the state's, and the history
    of symbols whose stored quote is newer than their first order (late orders). And how many
    symbols had late orders."""
    # One look-up for both (past the mirror's size a read of the table).
    stored = state.stored(spans["symbol"].to_pylist())
    parts = [state.as_quotes(stored)]
    bounds = pa.table({"symbol": spans["symbol"], "first_order": spans["first"], "last_order": spans["last"]})
    late = state.late(bounds, stored)
    if late:
        parts.append(_state_rows(late_history_rows(tables, late)))
    return pa.concat_tables(parts), len(late)


def _state_rows(table: pa.Table) -> pa.Table:
    """STATE_QUOTE_COLUMNS rows (the history read for late orders) as kernel.columns' quotes (time in µs)."""
    return pa.table(
        {
            "symbol": table["symbol"],
            "bid": pc.cast(table["bid"], PRICE),
            "offer": pc.cast(table["offer"], PRICE),
            "time": pc.cast(table["quote_time"], pa.int64()),
            "seq": pc.cast(table["seq"], pa.int64()),
        }
    )

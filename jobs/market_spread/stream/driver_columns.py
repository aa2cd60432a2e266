"""A driver batch parsed and checked as Arrow columns, in C++ kernels instead of a Python loop.

Why: at 50,000 events/s the per-line Python of stream.driver_batch (about 35 µs a line: JSON
decode, Decimal prices, quote keys, rows built from Python objects) could not keep up, and the
batches it gave up on went to Spark's plan at 3-5 s each. Here one regex over every line (RE2)
takes the fields of lines in the layout the product's own writers use (`generate`, `replay`, the
Kafka producer: `json.dumps`'s separators, the contract's key order), Arrow casts them, and the as-of
choice is a sorted search in NumPy.

Certain-or-nothing, as domain.certain_lines: `parse` takes a batch only when every non-blank line
matches its feed's layout and every field converts (a stricter subset of what certain_lines takes,
with the same values: zone `Z` only, no escapes, prices as plain decimals with at most 8 fractional
digits); for anything else it returns None and driver_batch parses line by line (stream.driver_rows,
into the same columns). The check is domain.columns' (the as-of choice and the reject rule in
Arrow's kernels, exact in DECIMAL128), for both.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from market_spread.domain.columns import PRICE, as_of, newest, rejects, sort_by_key  # noqa: F401 - the driver's check
from market_spread.domain.rules import Thresholds
from market_spread.lake.state import late_history_rows
from market_spread.lake.lake_tables import LakeTables
from market_spread.lake.state_mirror import StateMirror

_TIME = pa.timestamp("us", tz="UTC")
_DAY_US = 86_400_000_000

_TEXT = r'"[\x20\x21\x23-\x5b\x5d-\x7e]+"'  # printable ASCII, no quote, no backslash: no escapes
_NUMBER = r"(?:0|[1-9][0-9]{0,9})(?:\.[0-9]{1,8})?"  # below 1e10, at most 8 fractional digits
_INTEGER = r"-?(?:0|[1-9][0-9]{0,18})"  # within 64 bits once cast (a wider one fails the cast)
# certain_lines' times with zone Z only, hours 00-23, minutes and seconds 00-59, years 1000-9998.
_TIME_TEXT = (r'"(?:[1-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])-[0-9]{2}-[0-9]{2}'
              r'T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?Z"')


def _field(name: str, pattern: str, group: str | None = None) -> str:
    """`"name": value`, the value captured as `group` (quotes excluded for text)."""
    if pattern.startswith('"'):
        return f'"{name}": ?"(?P<{group or name}>{pattern[1:-1]})"'
    return f'"{name}": ?(?P<{group or name}>{pattern})'


def _line(*fields: str) -> str:
    seq = r'(?:, ?"seq": ?(?:null|(?P<seq>' + _INTEGER + r')))?'
    return r"^\{" + ", ?".join(fields) + seq + r"\}$"


QUOTE_LINE = _line(_field("symbol", _TEXT), _field("transact_time", _TIME_TEXT, "time"),
                   _field("bid", _NUMBER), _field("offer", _NUMBER))
ORDER_LINE = _line(_field("order_id", _TEXT), _field("account", _INTEGER), _field("symbol", _TEXT),
                   _field("side", '"(?:BUY|SELL)"'), _field("qty", _NUMBER), _field("price", _NUMBER),
                   _field("transact_time", _TIME_TEXT, "time"))
_BLANK = r"^[ \t\n\x0b\f\r]*$"  # Java's \s, as parsing.nonblank_lines drops lines


@dataclass
class ColumnBatch:
    """A batch's quotes (symbol, bid, offer, time in µs, seq) and orders (order_id, account,
    symbol, side, qty, price, time, seq) as Arrow tables, and the sources of its lines."""

    quotes: pa.Table
    orders: pa.Table
    sources: list[str]


def parse(lines: pa.Table, universe: pa.Array) -> ColumnBatch | None:
    """The lines (stream, value, source_file) as columns; None unless every line is certain here."""
    try:
        lines.column("value").validate(full=True)  # UTF-8: a line that is not goes elsewhere
        # Spark's Arrow hands over large strings (Kafka); the state's and history's symbols are not.
        lines = pa.table({c: pc.cast(lines.column(c), pa.string()) for c in ("stream", "value", "source_file")})
        keep = pc.invert(pc.match_substring_regex(lines.column("value"), _BLANK))
        lines = lines.filter(keep)
        is_quote = pc.equal(lines.column("stream"), "quotes")
        quotes = _quotes(lines.filter(is_quote).column("value"), universe)
        orders = _orders(lines.filter(pc.invert(is_quote)).column("value"), universe)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, _NotCertain):
        return None
    sources = pc.unique(lines.column("source_file")).to_pylist()
    return ColumnBatch(quotes, orders, sources)


class _NotCertain(Exception):
    """A line outside this module's layout: driver_batch parses the batch line by line."""


def _fields(values: pa.ChunkedArray, pattern: str) -> pa.StructArray:
    fields = pc.extract_regex(values.combine_chunks() if len(values) else pa.array([], pa.string()), pattern)
    if fields.null_count:
        raise _NotCertain
    return fields


def _symbols(fields: pa.StructArray, universe: pa.Array) -> pa.Array:
    symbol = fields.field("symbol")
    if not pc.all(pc.is_in(symbol, value_set=universe)).as_py() and len(symbol):
        raise _NotCertain
    return symbol


def _price(fields: pa.StructArray, name: str) -> pa.Array:
    price = pc.cast(fields.field(name), PRICE)
    if len(price) and not pc.all(pc.greater(price, pa.scalar(Decimal(0), PRICE))).as_py():
        raise _NotCertain  # zero: not a price (certain_lines wants > 0)
    return price


def _micros(fields: pa.StructArray) -> pa.Array:
    return pc.cast(pc.cast(fields.field("time"), _TIME), pa.int64())


def _seq(fields: pa.StructArray) -> pa.Array:
    text = fields.field("seq")
    return pc.cast(pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text), pa.int64())


def _quotes(values: pa.ChunkedArray, universe: pa.Array) -> pa.Table:
    f = _fields(values, QUOTE_LINE)
    return pa.table({"symbol": _symbols(f, universe), "bid": _price(f, "bid"), "offer": _price(f, "offer"),
                     "time": _micros(f), "seq": _seq(f)})


def _orders(values: pa.ChunkedArray, universe: pa.Array) -> pa.Table:
    f = _fields(values, ORDER_LINE)
    return pa.table({"order_id": f.field("order_id"), "account": pc.cast(f.field("account"), pa.int64()),
                     "symbol": _symbols(f, universe), "side": f.field("side"), "qty": _price(f, "qty"),
                     "price": _price(f, "price"), "time": _micros(f), "seq": _seq(f)})


def quote_days(micros: pa.Array) -> pa.Array:
    """The UTC date of each time (µs since the epoch), as the quote history's partition."""
    days = np.floor_divide(micros.to_numpy(zero_copy_only=False), _DAY_US).astype(np.int32)
    return pa.array(days, pa.int32()).cast(pa.date32())


def timestamps(micros: pa.Array | pa.ChunkedArray) -> pa.Array:
    return pc.cast(micros, pa.int64()).cast(_TIME)


def alerts(orders: pa.Table, chosen: pa.Table, thresholds: Thresholds, batch_id: int, detected_at: datetime,
           schema: pa.Schema) -> pa.Table:
    """The alerts of the orders checked against their chosen quotes (transforms.asof's columns)."""
    no_quote = pc.is_null(chosen["time"])
    wide = pc.fill_null(rejects(chosen["bid"], chosen["offer"], thresholds), False)
    reason = pc.if_else(no_quote, "no_market_data", pc.if_else(wide, "wide_spread", pa.scalar(None, pa.string())))
    hit = pc.is_valid(reason)
    o, q = orders.filter(hit), chosen.filter(hit)
    n = o.num_rows
    at = int(detected_at.timestamp() * 1_000_000)
    columns = {
        "order_id": o["order_id"], "account": o["account"], "symbol": o["symbol"], "side": o["side"],
        "qty": o["qty"], "price": o["price"], "order_time": timestamps(o["time"]), "reason": reason.filter(hit),
        "bid": q["bid"], "offer": q["offer"], "quote_time": timestamps(q["time"]),
        "detected_at": timestamps(pa.array([at] * n, pa.int64())), "batch_id": pa.array([batch_id] * n, pa.int64()),
        "order_seq": o["seq"], "quote_seq": q["seq"],
    }
    return pa.table({f.name: pc.cast(columns[f.name], f.type) for f in schema}, schema=schema)


def history(quotes: pa.Table, batch_id: int, thresholds: Thresholds, schema: pa.Schema) -> pa.Table:
    """The quotes' history rows (driver_batch.quote_rows), in the quotes table's schema."""
    time = quotes["time"].combine_chunks() if quotes.num_rows else pa.array([], pa.int64())
    columns = {
        "symbol": quotes["symbol"], "bid": quotes["bid"], "offer": quotes["offer"], "quote_time": timestamps(time),
        "seq": quotes["seq"], "batch_id": pa.array([batch_id] * quotes.num_rows, pa.int64()),
        "should_reject_trades": rejects(quotes["bid"], quotes["offer"], thresholds), "quote_date": quote_days(time),
    }
    return pa.table({f.name: pc.cast(columns[f.name], f.type) for f in schema}, schema=schema)


def candidates(cols: ColumnBatch, state: StateMirror, tables: LakeTables) -> tuple[pa.Table, int]:
    """The quotes the orders may be checked against (as `candidates`), as one table (symbol, bid,
    offer, time, seq); and how many symbols had late orders."""
    orders = cols.orders
    symbols = pc.unique(orders["symbol"])
    parts = [cols.quotes.filter(pc.is_in(cols.quotes["symbol"], value_set=symbols))]
    names = symbols.to_pylist()
    parts.append(_state_rows(state.stored_table(names)))
    spans = orders.group_by("symbol").aggregate([("time", "min"), ("time", "max")])
    late = state.late(pa.table({"symbol": spans["symbol"], "first_order": spans["time_min"],
                                "last_order": spans["time_max"]}))
    if late:
        parts.append(_state_rows(late_history_rows(tables, late)))
    return pa.concat_tables(parts), len(late)


def _state_rows(table: pa.Table) -> pa.Table:
    """STATE_QUOTE_COLUMNS rows as driver_columns' quotes (time in µs)."""
    return pa.table({"symbol": table["symbol"], "bid": pc.cast(table["bid"], PRICE),
                     "offer": pc.cast(table["offer"], PRICE),
                     "time": pc.cast(table["quote_time"], pa.int64()), "seq": pc.cast(table["seq"], pa.int64())})

"""A driver batch parsed and checked as Arrow columns, in C++ kernels instead of a Python loop.

Why: at 50,000 events/s the per-line Python of stream.driver_batch (JSON decode, Decimal prices,
quote keys, rows built from Python objects) could not keep up (measured: docs/performance.md, row
'driver batches in Arrow's kernels'). Here one regex over every line (RE2)
takes the fields of lines in the layout the product's own writers use (`generate`, `replay`, the
Kafka producer: `json.dumps`'s separators, the contract's key order), Arrow casts them, and the as-of
choice is a sorted search in NumPy.

Certain-or-nothing, as kernel.certain_lines: `split` takes a line only when it matches its feed's
layout and every field converts (a stricter subset of what certain_lines takes,
with the same values: zone `Z` only, no escapes, prices as plain decimals with at most 8 fractional
digits); the other lines (a line that is not UTF-8 among them) go on to kernel.line_rows, which
judges each one, into the same columns. The check is kernel.columns' (the
as-of choice and the reject rule in Arrow's kernels, exact in DECIMAL128), for both.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from market_spread.kernel.columns import PRICE, TIME

_DAY_US = 86_400_000_000

_TEXT = r'"[\x20\x21\x23-\x5b\x5d-\x7e]+"'  # printable ASCII, no quote, no backslash: no escapes
_NUMBER = r"(?:0|[1-9][0-9]{0,9})(?:\.[0-9]{1,8})?"  # below 1e10, at most 8 fractional digits
_INTEGER = r"-?(?:0|[1-9][0-9]{0,18})"  # within 64 bits once cast (a wider one fails the cast)
# certain_lines' times with zone Z only, hours 00-23, minutes and seconds 00-59, years 1000-9998.
_TIME_TEXT = (
    r'"(?:[1-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])-[0-9]{2}-[0-9]{2}'
    r'T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?Z"'
)


def _field(name: str, pattern: str, group: str | None = None) -> str:
    """`"name": value`, the value captured as `group` (quotes excluded for text)."""
    if pattern.startswith('"'):
        return f'"{name}": ?"(?P<{group or name}>{pattern[1:-1]})"'
    return f'"{name}": ?(?P<{group or name}>{pattern})'


def _line(*fields: str) -> str:
    seq = r'(?:, ?"seq": ?(?:null|(?P<seq>' + _INTEGER + r")))?"
    return r"^\{" + ", ?".join(fields) + seq + r"\}$"


QUOTE_LINE = _line(
    _field("symbol", _TEXT),
    _field("transact_time", _TIME_TEXT, "time"),
    _field("bid", _NUMBER),
    _field("offer", _NUMBER),
)
ORDER_LINE = _line(
    _field("order_id", _TEXT),
    _field("account", _INTEGER),
    _field("symbol", _TEXT),
    _field("side", '"(?:BUY|SELL)"'),
    _field("qty", _NUMBER),
    _field("price", _NUMBER),
    _field("transact_time", _TIME_TEXT, "time"),
)
_BLANK = r"^[ \t\n\x0b\f\r]*$"  # Java's \s: blank lines are dropped


QUOTE_TYPES = {"symbol": pa.string(), "bid": PRICE, "offer": PRICE, "time": pa.int64(), "seq": pa.int64()}
ORDER_TYPES = {
    "order_id": pa.string(),
    "account": pa.int64(),
    "symbol": pa.string(),
    "side": pa.string(),
    "qty": PRICE,
    "price": PRICE,
    "time": pa.int64(),
    "seq": pa.int64(),
}


TEXT = pa.schema([("raw", pa.string()), ("source_file", pa.string())])


@dataclass
class ColumnBatch:
    """A batch's quotes (symbol, bid, offer, time in µs, seq) and orders (order_id, account,
    symbol, side, qty, price, time, seq) as Arrow tables, and the sources of its lines. `texts`,
    when asked for (a batch under CHECK constraints: a row that breaks one sends its line to
    quarantine), holds per feed each row's line (TEXT), row for row."""

    quotes: pa.Table
    orders: pa.Table
    sources: list[str]
    texts: dict[str, pa.Table] | None = None

    @staticmethod
    def of(feed: str, rows: pa.Table, sources: list[str]) -> "ColumnBatch":
        """One feed's rows (the other feed none)."""
        empty = {"quotes": QUOTE_TYPES, "orders": ORDER_TYPES}
        other = pa.schema(list(empty["orders" if feed == "quotes" else "quotes"].items())).empty_table()
        return ColumnBatch(rows, other, sources) if feed == "quotes" else ColumnBatch(other, rows, sources)


def known(symbols: pa.Array | pa.ChunkedArray, universe: frozenset[str]) -> pa.Array:
    """Which of `symbols` are in the universe (null: not). Each distinct symbol of the batch is looked
    up in the set: `is_in` against the whole universe built a hash table of it at every call, a cost
    that grew with the universe, not the batch (measured: docs/performance.md, row 'symbols looked
    up by the batch's distinct names')."""
    distinct = pc.unique(symbols).to_pylist()
    return pc.is_in(symbols, value_set=pa.array([s for s in distinct if s in universe], pa.string()))


def split(lines: pa.Table, universe: frozenset[str], keep_text: bool = False) -> tuple[ColumnBatch, pa.Table]:
    """The lines (stream, value, source_file) in the product's own layout as columns (with their
    `texts` if `keep_text`), and the other non-blank lines as they came (for kernel.line_rows), a
    line that is not UTF-8 among them."""
    # Spark's Arrow hands over large strings (Kafka); the state's and history's symbols are not.
    lines = pa.table({c: pc.cast(lines.column(c), pa.string()) for c in ("stream", "value", "source_file")})
    unreadable = _not_utf8(lines.column("value"))
    if unreadable is not None:  # rare: only then a look at each line
        lines, unread = lines.filter(pc.invert(unreadable)), lines.filter(unreadable)
    lines = lines.filter(pc.invert(pc.match_substring_regex(lines.column("value"), _BLANK)))
    is_quote = pc.equal(lines.column("stream"), "quotes")
    quote_lines, order_lines = lines.filter(is_quote), lines.filter(pc.invert(is_quote))
    quotes, quote_taken = _quotes(quote_lines.column("value"), universe)
    orders, order_taken = _orders(order_lines.column("value"), universe)
    taken = pa.concat_tables([quote_lines.filter(quote_taken), order_lines.filter(order_taken)])
    rest = [quote_lines.filter(pc.invert(quote_taken)), order_lines.filter(pc.invert(order_taken))]
    rest += [unread] if unreadable is not None else []
    texts = None
    if keep_text:
        texts = {"quotes": _text(quote_lines.filter(quote_taken)), "orders": _text(order_lines.filter(order_taken))}
    sources = pc.unique(taken.column("source_file")).to_pylist()
    return ColumnBatch(quotes, orders, sources, texts), pa.concat_tables(rest)


def _text(lines: pa.Table) -> pa.Table:
    return pa.Table.from_arrays([lines["value"], lines["source_file"]], schema=TEXT)


def _not_utf8(values: pa.ChunkedArray) -> pa.Array | None:
    """Which values are not UTF-8 (Spark's text source hands over a line's bytes as they are), or
    None when all are: the one full validation is the fast check."""
    try:
        values.validate(full=True)
        return None
    except pa.ArrowInvalid:
        raw = values.cast(pa.large_binary()).to_pylist()
        return pa.array([v is not None and not _is_utf8(v) for v in raw])


def _is_utf8(value: bytes) -> bool:
    try:
        value.decode()
    except UnicodeDecodeError:
        return False
    return True


def concat(parts: list[ColumnBatch]) -> ColumnBatch:
    """One batch of several parts' columns (each part's tables in the same columns and types; the
    texts kept when every part has them)."""
    texts = None
    if all(p.texts is not None for p in parts):
        texts = {f: pa.concat_tables([p.texts[f] for p in parts if p.texts is not None]) for f in ("quotes", "orders")}
    return ColumnBatch(
        pa.concat_tables([p.quotes for p in parts]),
        pa.concat_tables([p.orders for p in parts]),
        sorted({s for p in parts for s in p.sources}),
        texts,
    )


def _fields(values: pa.ChunkedArray, pattern: str) -> tuple[pa.StructArray, np.ndarray]:
    """The pattern's fields of the lines it matches, and those lines' positions."""
    fields = pc.extract_regex(values.combine_chunks() if len(values) else pa.array([], pa.string()), pattern)
    at = pc.indices_nonzero(pc.is_valid(fields))
    return fields.take(at), at.to_numpy()


def _taken(size: int, at: np.ndarray, ok: pa.Array) -> pa.Array:
    """Over all `size` lines, which were taken: matched (at `at`) and `ok`."""
    taken = np.zeros(size, bool)
    taken[at[ok.to_numpy(zero_copy_only=False)]] = True
    return pa.array(taken)


def _cast(text: pa.Array, kind: pa.DataType) -> pa.Array:
    """`text` cast to `kind`; a value that does not convert (February 30th, a 64-bit overflow) null,
    found one at a time only when the whole cast fails."""
    try:
        return pc.cast(text, kind)
    except pa.ArrowInvalid:

        def one(value: pa.Scalar) -> object:
            try:
                return pc.cast(pa.array([value.as_py()], text.type), kind)[0].as_py()
            except pa.ArrowInvalid:
                return None

        return pa.array([one(v) for v in text], kind)


def _positive(price: pa.Array) -> pa.Array:
    return pc.fill_null(pc.greater(price, pa.scalar(Decimal(0), PRICE)), False)  # zero: not a price


def _micros(fields: pa.StructArray) -> pa.Array:
    return pc.cast(_cast(fields.field("time"), TIME), pa.int64())


def _seq(fields: pa.StructArray) -> pa.Array:
    text = fields.field("seq")
    return _cast(pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text), pa.int64())


def _ok(*masks: pa.Array) -> pa.Array:
    out = pc.fill_null(masks[0], False)
    for mask in masks[1:]:
        out = pc.and_(out, pc.fill_null(mask, False))
    return out


def _seq_ok(f: pa.StructArray, seq: pa.Array) -> pa.Array:
    """A seq that converted, or none given."""
    return pc.or_(pc.is_valid(seq), pc.equal(pc.fill_null(f.field("seq"), ""), ""))


def _quotes(values: pa.ChunkedArray, universe: frozenset[str]) -> tuple[pa.Table, pa.Array]:
    f, at = _fields(values, QUOTE_LINE)
    bid, offer, time, seq = pc.cast(f.field("bid"), PRICE), pc.cast(f.field("offer"), PRICE), _micros(f), _seq(f)
    ok = _ok(
        known(f.field("symbol"), universe),
        _positive(bid),
        _positive(offer),
        pc.is_valid(time),
        _seq_ok(f, seq),
    )
    table = pa.table({"symbol": f.field("symbol"), "bid": bid, "offer": offer, "time": time, "seq": seq})
    return table.filter(ok), _taken(len(values), at, ok)


def _orders(values: pa.ChunkedArray, universe: frozenset[str]) -> tuple[pa.Table, pa.Array]:
    f, at = _fields(values, ORDER_LINE)
    account, qty, price, time, seq = (
        _cast(f.field("account"), pa.int64()),
        pc.cast(f.field("qty"), PRICE),
        pc.cast(f.field("price"), PRICE),
        _micros(f),
        _seq(f),
    )
    ok = _ok(
        known(f.field("symbol"), universe),
        pc.is_valid(account),
        _positive(qty),
        _positive(price),
        pc.is_valid(time),
        _seq_ok(f, seq),
    )
    table = pa.table(
        {
            "order_id": f.field("order_id"),
            "account": account,
            "symbol": f.field("symbol"),
            "side": f.field("side"),
            "qty": qty,
            "price": price,
            "time": time,
            "seq": seq,
        }
    )
    return table.filter(ok), _taken(len(values), at, ok)

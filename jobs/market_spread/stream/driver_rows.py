"""A driver batch's lines parsed one by one in Python (domain.certain_lines) into the columns
stream.driver_columns makes: for batches of certainly valid lines that are not all in the layout
driver_columns' regex takes (another key order, a zone offset, an escape, `1.0` for an integer
field). The check that follows is the same for both (domain.columns, in driver_batch); only the
parse differs, at about 20 µs a line here.
"""
from __future__ import annotations

import re

import pyarrow as pa

from market_spread.domain.certain_lines import Order, Quote, is_blank, parse_order, parse_quote
from market_spread.domain.columns import PRICE
from market_spread.stream.driver_columns import ColumnBatch

_OFFSET = re.compile(r"(.*)/([0-9]+)", re.DOTALL)


def parse(table: pa.Table, universe: frozenset[str]) -> ColumnBatch | None:
    """The lines (stream, value, source_file) as columns (blank ones dropped, as
    parsing.nonblank_lines does); None when a line is not certainly valid."""
    quotes: list[Quote] = []
    orders: list[Order] = []
    seen: set[str] = set()
    try:
        columns = [table[c].to_pylist() for c in ("stream", "value", "source_file")]
    except UnicodeDecodeError:  # Spark hands over the bytes of a line that is not UTF-8 as they are
        return None
    for stream, line, source in zip(*columns):
        line = line.removeprefix("\ufeff")
        if is_blank(line):
            continue
        record = parse_quote(line, universe) if stream == "quotes" else parse_order(line, universe)
        if record is None:
            return None
        (quotes if stream == "quotes" else orders).append(record)
        seen.add(source)
    return ColumnBatch(_table(quotes, QUOTE_TYPES), _table(orders, ORDER_TYPES), sorted(seen))


QUOTE_TYPES = {"symbol": pa.string(), "bid": PRICE, "offer": PRICE, "time": pa.int64(), "seq": pa.int64()}
ORDER_TYPES = {"order_id": pa.string(), "account": pa.int64(), "symbol": pa.string(), "side": pa.string(),
               "qty": PRICE, "price": PRICE, "time": pa.int64(), "seq": pa.int64()}


def _table(records: list, types: dict[str, pa.DataType]) -> pa.Table:
    return pa.table({name: pa.array([getattr(r, name) for r in records], kind) for name, kind in types.items()})


def sources(names: set[str]) -> tuple[list[str], dict[str, int]]:
    """Files as they are; Kafka records (`topic/partition/offset`) as partitions and their last offset."""
    files, last = set(), {}
    for name in names:
        kafka = _OFFSET.fullmatch(name)  # stream.summary's regexes, the same names
        if kafka:
            where, offset = kafka[1], int(kafka[2])
            last[where] = max(offset, last.get(where, -1))
        files.add(kafka[1] if kafka else name)
    return sorted(files), last

"""A driver batch parsed and checked line by line in Python (domain.certain_lines,
domain.order_check): what stream.driver_batch does with a batch of certainly valid lines that are
not all in the layout stream.driver_columns takes (another key order, a zone offset, an escape).
The same answers as Spark's plan (transforms.parsing, transforms.asof), at about 35 µs a line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

import pyarrow as pa

from market_spread.domain import order_check
from market_spread.domain.certain_lines import Order, Quote, is_blank, parse_order, parse_quote
from market_spread.domain.rules import Thresholds, should_reject
from market_spread.lake import delta_rs
from market_spread.lake import tables as lake_mod
from market_spread.lake.state import NEWEST_COLUMNS, late_history_rows
from market_spread.lake.lake_tables import LakeTables
from market_spread.lake.state_mirror import StateMirror, micros

_DAY_US = 86_400_000_000
_OFFSET = re.compile(r"(.*)/([0-9]+)", re.DOTALL)
SCHEMAS = {t: delta_rs.arrow_schema(lake_mod.SCHEMAS[t]) for t in ("quotes", "alerts")}


@dataclass
class DriverBatch:
    """A batch's certainly valid lines, parsed, and where they came from (stream.summary's figures)."""

    quotes: list[Quote] = field(default_factory=list)
    orders: list[Order] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # landing files, or Kafka topic/partition
    last_offsets: dict[str, int] = field(default_factory=dict)  # Kafka topic/partition -> highest offset


def parse(table: pa.Table, universe: frozenset[str]) -> DriverBatch | None:
    """The lines parsed (blank ones dropped, as parsing.nonblank_lines does); None when a line is
    not certainly valid."""
    batch, seen = DriverBatch(), set()
    try:
        columns = [table[c].to_pylist() for c in ("stream", "value", "source_file")]
    except UnicodeDecodeError:  # Spark hands over the bytes of a line that is not UTF-8 as they are
        return None
    for stream, line, source in zip(*columns):
        if line.startswith("\ufeff"):
            line = line[1:]
        if is_blank(line):
            continue
        record = parse_quote(line, universe) if stream == "quotes" else parse_order(line, universe)
        if record is None:
            return None
        (batch.quotes if stream == "quotes" else batch.orders).append(record)
        seen.add(source)
    batch.files, batch.last_offsets = sources(seen)
    return batch


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


def candidates(batch: DriverBatch, state: StateMirror, tables: LakeTables) -> tuple[dict[str, list[Quote]], int]:
    """Per symbol with orders, the quotes its orders may be checked against; and how many symbols
    had late orders (older than their stored state: history read for them, as stream.check does)."""
    spans = order_check.spans(batch.orders)
    out: dict[str, list[Quote]] = {s: [] for s in spans}
    for q in batch.quotes:
        if q.symbol in out:
            out[q.symbol].append(q)
    for symbol, q in state.stored(list(spans)).items():
        out[symbol].append(Quote(symbol, *q))
    late = state.late(_bounds(spans))
    if late:
        history = late_history_rows(tables, late)
        for row in zip(history["symbol"].to_pylist(), history["bid"].to_pylist(), history["offer"].to_pylist(),
                       micros(history["quote_time"]), history["seq"].to_pylist()):
            out[row[0]].append(Quote(*row))
    return out, len(late)


def _bounds(spans: dict[str, tuple[int, int]]) -> pa.Table:
    time = pa.timestamp("us", tz="UTC")
    return pa.table({"symbol": list(spans), "first_order": pa.array([s[0] for s in spans.values()], time),
                     "last_order": pa.array([s[1] for s in spans.values()], time)})


def _rejects(q: Quote, thresholds: Thresholds) -> bool:
    return should_reject(q.bid, q.offer, thresholds.max_spread, thresholds.max_spread_ratio)


def _table(schema: pa.Schema, columns: dict[str, list]) -> pa.Table:
    arrays = []
    for f in schema:
        values = columns[f.name]
        arrays.append(pa.array(values, pa.int64()).cast(f.type) if pa.types.is_timestamp(f.type) else pa.array(values, f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def quote_rows(quotes: list[Quote], batch_id: int, thresholds: Thresholds) -> pa.Table:
    """The batch's quote history rows, as Spark's path writes them."""
    return _table(SCHEMAS["quotes"], {
        "symbol": [q.symbol for q in quotes], "bid": [q.bid for q in quotes], "offer": [q.offer for q in quotes],
        "quote_time": [q.time for q in quotes], "seq": [q.seq for q in quotes], "batch_id": [batch_id] * len(quotes),
        "should_reject_trades": [_rejects(q, thresholds) for q in quotes],
        "quote_date": pa.array([q.time // _DAY_US for q in quotes], pa.int32()).cast(pa.date32()).to_pylist(),
    })


def newest_rows(quotes: list[Quote], thresholds: Thresholds) -> pa.Table:
    """Each symbol's highest quote of the batch (lake.state.NEWEST_COLUMNS): the state MERGE's source."""
    newest = list(order_check.newest_by_symbol(quotes).values())
    rows = quote_rows(newest, 0, thresholds)
    return rows.select(list(NEWEST_COLUMNS))


def alert_rows(orders: list[Order], chosen: list[Quote | None], thresholds: Thresholds, batch_id: int,
               detected_at: datetime) -> pa.Table:
    """The alerts of the orders checked against their chosen quotes (transforms.asof's columns)."""
    hits = [(o, q, r) for o, q in zip(orders, chosen) if (r := order_check.reason(q, thresholds)) is not None]
    at = int(detected_at.timestamp() * 1_000_000)

    def quote_field(name: str) -> list:
        return [getattr(q, name) if q is not None else None for _, q, _ in hits]

    return _table(SCHEMAS["alerts"], {
        "order_id": [o.order_id for o, _, _ in hits], "account": [o.account for o, _, _ in hits],
        "symbol": [o.symbol for o, _, _ in hits], "side": [o.side for o, _, _ in hits],
        "qty": [o.qty for o, _, _ in hits], "price": [o.price for o, _, _ in hits],
        "order_time": [o.time for o, _, _ in hits], "reason": [r for _, _, r in hits],
        "bid": quote_field("bid"), "offer": quote_field("offer"), "quote_time": quote_field("time"),
        "detected_at": [at] * len(hits), "batch_id": [batch_id] * len(hits),
        "order_seq": [o.seq for o, _, _ in hits], "quote_seq": quote_field("seq"),
    })

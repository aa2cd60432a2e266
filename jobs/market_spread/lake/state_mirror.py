"""symbol_state's quotes kept on the driver, in Python, by the lake's only writer (the lock).

Each read of the table costs a snapshot and a scan. Here the copy is a dict (symbol -> quote)
advanced with the batch's newest quotes by the same total order as the MERGE
(kernel.columns.newest), read from the table with delta-rs when a process starts and again after any
failed batch (measured: docs/performance.md, row 'commits from the driver with delta-rs'). The late
check (which symbols have orders older than their state) runs against it in Python.

Above MARKET_SPREAD_STATE_MIRROR_ROWS symbols (200,000) no copy is kept: each batch reads the stored
quotes of its orders' symbols from the table (delta-rs's query engine).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc

from market_spread.kernel import columns
from market_spread.lake.lake_tables import LakeTables
from market_spread.lake.state import ARROW_SCHEMA, IN_LIMIT, STATE_QUOTE_COLUMNS, in_lists
from market_spread.lake.state_writes import StateWrites, merge_into

_TIME = ARROW_SCHEMA.field("quote_time").type

Quote = tuple[Decimal, Decimal, int, "int | None"]  # bid, offer, quote time (µs since the epoch), seq


def micros(column: Any) -> list[int | None]:
    """A timestamp column of an Arrow table as microseconds since the epoch."""
    return pc.cast(column, pa.int64()).to_pylist()


class StateMirror:
    """The quotes of symbol_state, on the driver. `enabled` is False past `max_rows` symbols
    (MARKET_SPREAD_STATE_MIRROR_ROWS, resolved into the stream's spec): the table is read instead."""

    def __init__(
        self, tables: LakeTables, max_rows: int, trail_batches: int = 1, guard: Callable[[], object] | None = None
    ) -> None:
        self.tables, self.max_rows = tables, max_rows
        self._quotes: dict[str, Quote] | None = None
        self.enabled = self.max_rows > 0
        # The table's writes, which trail this copy by up to `trail_batches` (lake.state_writes).
        self.writes = StateWrites(tables, trail_batches, guard)

    def _load(self) -> None:
        staged = self.writes.overlay()  # before the read: a commit in between is in the table then
        table = self._read()
        if table.num_rows > self.max_rows:
            self.enabled = False
            return
        self._quotes = {}
        self.take(table)
        if staged is not None:
            self.take(staged)

    def _read(self, symbols: list[str] | None = None) -> pa.Table:
        """The table's quotes (of `symbols` only, if given). Through delta-rs's own query engine (or
        Spark, for a feature it cannot read): a process that read with pyarrow's dataset scanner
        sometimes aborted at exit ("terminate called without an active exception", 1 of 2 runs here)."""
        sql = f"SELECT {', '.join(STATE_QUOTE_COLUMNS)} FROM {{t}}"
        if symbols is None:
            return self.tables.query("symbol_state", sql).cast(ARROW_SCHEMA)
        if not symbols:
            return ARROW_SCHEMA.empty_table()
        if len(symbols) > IN_LIMIT:
            # One scan of the table, filtered here, rather than a query per IN_LIMIT names (each a scan).
            rows = self.tables.query("symbol_state", sql).cast(ARROW_SCHEMA)
            return rows.filter(pc.is_in(rows["symbol"], pa.array(symbols, pa.string())))
        (names,) = in_lists(symbols)
        return self.tables.query("symbol_state", f"{sql} WHERE symbol IN ({names})").cast(ARROW_SCHEMA)

    def ready(self) -> bool:
        """Read the table into the copy if it is not yet; whether the copy is in use (`enabled`)."""
        if self.enabled and self._quotes is None:
            self._load()
        return self.enabled

    def _loaded(self) -> dict[str, Quote]:
        """The copy, once `ready()` has answered True (enabled means loaded)."""
        assert self._quotes is not None, "the state mirror is read before ready()"
        return self._quotes

    @staticmethod
    def _arrow(q: dict[str, Quote]) -> pa.Table:
        columns = [
            list(q),
            [v[0] for v in q.values()],
            [v[1] for v in q.values()],
            [v[2] for v in q.values()],
            [v[3] for v in q.values()],
        ]
        arrays = [
            pa.array(c, type=pa.int64() if f.name == "quote_time" else f.type) for c, f in zip(columns, ARROW_SCHEMA)
        ]
        arrays[3] = arrays[3].cast(_TIME)
        return pa.Table.from_arrays(arrays, schema=ARROW_SCHEMA)

    def take(self, newest: pa.Table) -> None:
        """Take in quotes (an Arrow table with STATE_QUOTE_COLUMNS, at most one row per symbol), as
        the state MERGE does: a symbol only ever moves to a higher quote key (kernel.columns)."""
        if self._quotes is None:
            return  # not loaded (or dropped after a failure): the next use reads the table
        incoming = pa.table(
            {
                "symbol": newest["symbol"],
                "bid": newest["bid"],
                "offer": newest["offer"],
                "time": pc.cast(newest["quote_time"], pa.int64()),
                "seq": newest["seq"],
            }
        )
        stored = self.as_quotes(self.stored(newest["symbol"].to_pylist()))
        winners = columns.newest(pa.concat_tables([stored, incoming.cast(stored.schema)]))
        for symbol, bid, offer, time, seq in zip(*(winners[c].to_pylist() for c in winners.column_names)):
            self._quotes[symbol] = (bid, offer, time, seq)
        if len(self._quotes) > self.max_rows:
            self.enabled, self._quotes = False, None

    @staticmethod
    def as_quotes(q: dict[str, Quote]) -> pa.Table:
        """Stored quotes (as `stored` gives them) as kernel.columns' quotes (time in µs)."""
        return pa.table(
            {
                "symbol": pa.array(list(q), pa.string()),
                "bid": pa.array([v[0] for v in q.values()], ARROW_SCHEMA.field("bid").type),
                "offer": pa.array([v[1] for v in q.values()], ARROW_SCHEMA.field("offer").type),
                "time": pa.array([v[2] for v in q.values()], pa.int64()),
                "seq": pa.array([v[3] for v in q.values()], pa.int64()),
            }
        )

    def stored(self, symbols: list[str]) -> dict[str, Quote]:
        """The stored quote (bid, offer, time in µs, seq) of each of `symbols` that has one: from the
        copy, or past `max_rows` from the table."""
        if not self.ready():
            staged = self.writes.overlay()
            rows = self._read(symbols)
            if staged is not None:
                mine = staged.filter(pc.is_in(staged["symbol"], pa.array(symbols, pa.string())))
                rows = merge_into(rows, mine.cast(rows.schema))
            values = zip(
                rows["bid"].to_pylist(), rows["offer"].to_pylist(), micros(rows["quote_time"]), rows["seq"].to_pylist()
            )
            return dict(zip(rows["symbol"].to_pylist(), values))
        quotes = self._loaded()
        return {s: quotes[s] for s in symbols if s in quotes}

    def stored_table(self, symbols: list[str]) -> pa.Table:
        """`stored` as an Arrow table (STATE_QUOTE_COLUMNS)."""
        return self._arrow(self.stored(symbols))

    @staticmethod
    def late(bounds: pa.Table, quotes: dict[str, Quote]) -> list[dict[str, Any]]:
        """The symbols whose stored quote (in `quotes`, as `stored` gives them for the symbols of
        `bounds`) is newer than their first order in `bounds` (Arrow: symbol, first_order,
        last_order), with those bounds as UTC datetimes."""
        out = []
        # Bounds of order times, which are never null.
        firsts, lasts = micros(bounds["first_order"]), micros(bounds["last_order"])
        for symbol, first, last in zip(bounds["symbol"].to_pylist(), cast(list[int], firsts), cast(list[int], lasts)):
            stored = quotes.get(symbol)
            if stored is not None and stored[2] > first:
                out.append({"symbol": symbol, "first_order": _utc(first), "last_order": _utc(last)})
        return out

    def reset(self) -> None:
        """Forget the copy: the next batch reads the table (after a failure, the copy may be ahead)."""
        self._quotes = None
        self.enabled = self.max_rows > 0


def _utc(us: int) -> datetime:
    return datetime.fromtimestamp(us // 1_000_000, tz=UTC).replace(microsecond=us % 1_000_000)

"""symbol_state's quotes kept on the driver, in Python, by the lake's only writer (the lock).

Each read of the table through Spark costs Delta a snapshot and a file listing (two or three Spark
jobs), and keeping the copy as a Spark local relation cost a job a batch to advance it. Here the copy
is a dict (symbol -> quote) advanced with the batch's newest quotes by the same total order as the
MERGE (kernel.columns.newest), read from the table with delta-rs when a process starts and again after any
failed batch, and handed to Spark as a local relation built from Arrow (no job; measured:
docs/performance.md, row 'commits from the driver with delta-rs'). The late check (which symbols
have orders older than their state) runs against it in Python.

Above MARKET_SPREAD_STATE_MIRROR_ROWS symbols (200,000) the copy is dropped and Spark reads the table.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from market_spread.kernel import columns
from market_spread.lake.lake_tables import LakeTables
from market_spread.lake.state import ARROW_SCHEMA, read_state_quotes
from market_spread.transforms.asof import STATE_QUOTE_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_TIME = ARROW_SCHEMA.field("quote_time").type

Quote = tuple[Decimal, Decimal, int, "int | None"]  # bid, offer, quote time (µs since the epoch), seq


def micros(column: Any) -> list[int | None]:
    """A timestamp column of an Arrow table as microseconds since the epoch."""
    return pc.cast(column, pa.int64()).to_pylist()


class StateMirror:
    """The quotes of symbol_state, on the driver. `enabled` is False past `max_rows` symbols
    (MARKET_SPREAD_STATE_MIRROR_ROWS, resolved into the stream's spec)."""

    def __init__(self, tables: LakeTables, max_rows: int) -> None:
        # The stream's tables: made with the batch's Spark session (stream.batch).
        self.tables, self.spark, self.lake = tables, cast("SparkSession", tables.spark), tables.lake
        self.max_rows = max_rows
        self._quotes: dict[str, Quote] | None = None
        self._df: DataFrame | None = None
        self.enabled = self.max_rows > 0

    def _load(self) -> None:
        # Through delta-rs's own query engine (or Spark, for a feature it cannot read): a process that
        # read with pyarrow's dataset scanner sometimes aborted at exit ("terminate called without an
        # active exception", 1 of 2 runs here).
        table = self.tables.query("symbol_state", f"SELECT {', '.join(STATE_QUOTE_COLUMNS)} FROM {{t}}")
        if table.num_rows > self.max_rows:
            self.enabled = False
            return
        self._quotes = {}
        self.take(table)

    def ready(self) -> bool:
        """Read the table into the copy if it is not yet; whether the copy is in use (`enabled`)."""
        if self.enabled and self._quotes is None:
            self._load()
        return self.enabled

    def quotes(self, only: list[str] | None = None) -> DataFrame:
        """The state's quotes (STATE_QUOTE_COLUMNS) as a Spark DataFrame: a local relation while
        enabled (of the symbols in `only`, if given), else the table itself."""
        if not self.ready():
            return read_state_quotes(self.spark, self.lake)
        quotes = self._loaded()
        if only is not None:
            return self.spark.createDataFrame(self._arrow({s: quotes[s] for s in only if s in quotes}))
        if self._df is None:
            self._df = self.spark.createDataFrame(self._arrow(quotes))
        return self._df

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
        stored = self._keyed(self.stored(newest["symbol"].to_pylist()))
        winners = columns.newest(pa.concat_tables([stored, incoming.cast(stored.schema)]))
        for symbol, bid, offer, time, seq in zip(*(winners[c].to_pylist() for c in winners.column_names)):
            self._quotes[symbol] = (bid, offer, time, seq)
        self._df = None
        if len(self._quotes) > self.max_rows:
            self.enabled, self._quotes = False, None

    @staticmethod
    def _keyed(q: dict[str, Quote]) -> pa.Table:
        """Stored quotes as kernel.columns' quotes (time in µs)."""
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
        """The stored quote (bid, offer, time in µs, seq) of each of `symbols` that has one (`ready()` first)."""
        quotes = self._loaded()
        return {s: quotes[s] for s in symbols if s in quotes}

    def stored_table(self, symbols: list[str]) -> pa.Table:
        """`stored` as an Arrow table (STATE_QUOTE_COLUMNS)."""
        return self._arrow(self.stored(symbols))

    def late(self, bounds: pa.Table) -> list[dict[str, Any]]:
        """The symbols whose stored quote is newer than their first order in `bounds` (Arrow:
        symbol, first_order, last_order), with those bounds as UTC datetimes."""
        out = []
        quotes = self._loaded()
        # Bounds of order times, which are never null.
        firsts, lasts = micros(bounds["first_order"]), micros(bounds["last_order"])
        for symbol, first, last in zip(bounds["symbol"].to_pylist(), cast(list[int], firsts), cast(list[int], lasts)):
            stored = quotes.get(symbol)
            if stored is not None and stored[2] > first:
                out.append({"symbol": symbol, "first_order": _utc(first), "last_order": _utc(last)})
        return out

    def reset(self) -> None:
        """Forget the copy: the next batch reads the table (after a failure, the copy may be ahead)."""
        self._quotes, self._df = None, None
        self.enabled = self.max_rows > 0


def _utc(us: int) -> datetime:
    return datetime.fromtimestamp(us // 1_000_000, tz=UTC).replace(microsecond=us % 1_000_000)

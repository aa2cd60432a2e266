"""What Spark runs inside its tasks for the executors placement (stream.executors): the kernel's
steps (kernel.steps) wrapped as the functions of `mapInArrow` and `cogroup(...).applyInArrow`.
They import the kernel only: no Spark, Delta or lake, so an executor needs the package and pyarrow.

Rows cross between Spark and the kernel as one wide layout (PARSED) tagged by `kind`: a quote, an
order, a bad line with its quarantine reason, a line only Spark's JSON reader can judge, or a file
the task read. Times cross as microseconds since the epoch (no time zone to agree on)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc

from market_spread.domain.rules import Thresholds
from market_spread.kernel import columns, steps
from market_spread.kernel.layout import ORDER_TYPES, QUOTE_TYPES

PRICE = columns.PRICE
PARSED = pa.schema(
    [
        ("kind", pa.string()),  # quote, order, bad, uncertain, source
        ("symbol", pa.string()),
        ("bid", PRICE),
        ("offer", PRICE),
        ("time", pa.int64()),
        ("seq", pa.int64()),
        ("order_id", pa.string()),
        ("account", pa.int64()),
        ("side", pa.string()),
        ("qty", PRICE),
        ("price", PRICE),
        ("stream", pa.string()),
        ("value", pa.string()),  # a bad line's raw text, or a line left to Spark
        ("reason", pa.string()),
        ("source_file", pa.string()),
    ]
)
CANDIDATE = pa.schema(list(QUOTE_TYPES.items()))
ORDER = pa.schema(list(ORDER_TYPES.items()))
_ANY = 1 << 62


def plain(table: pa.Table) -> pa.Table:
    """Spark hands strings over as large strings: as the kernel's plain ones."""
    return table.cast(
        pa.schema([pa.field(f.name, pa.string() if f.type == pa.large_string() else f.type) for f in table.schema])
    )


def as_parsed(parsed: steps.Parsed) -> pa.Table:
    """A parse's outcome as PARSED rows."""
    cols = parsed.columns
    bad = parsed.quarantine.rename_columns(["stream", "value", "reason", "source_file"])
    parts = [
        _tagged("quote", cols.quotes),
        _tagged("order", cols.orders),
        _tagged("bad", bad),
        _tagged("uncertain", parsed.uncertain),
        _tagged("source", pa.table({"source_file": pa.array(cols.sources, pa.string())})),
    ]
    return pa.concat_tables(parts)


def _tagged(kind: str, rows: pa.Table) -> pa.Table:
    n = rows.num_rows
    return pa.table(
        {f.name: _column(kind, f, rows, n) for f in PARSED},
        schema=PARSED,
    )


def _column(kind: str, field: pa.Field, rows: pa.Table, n: int) -> pa.Array:
    if field.name == "kind":
        return pa.array([kind] * n, pa.string())
    if field.name in rows.column_names:
        return pc.cast(rows[field.name], field.type)
    return pa.nulls(n, field.type)


def parse_task(universe: list[str]) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """`mapInArrow`'s function: (stream, value, source_file) lines to PARSED rows (kernel.steps.parse;
    a slice with a line that is not UTF-8 goes to Spark's parse whole)."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        array, names = pa.array(sorted(universe), pa.string()), frozenset(universe)
        for batch in batches:
            lines = pa.Table.from_batches([batch])
            parsed = steps.parse(lines, array, names, max_rows=_ANY)
            if parsed is None:
                yield from _tagged("uncertain", lines.select(["stream", "value", "source_file"])).to_batches()
            else:
                yield from as_parsed(parsed).to_batches()

    return run


def check_task(
    thresholds: Thresholds, batch_id: int, detected_at: datetime, schema: pa.Schema
) -> Callable[[pa.Table, pa.Table], pa.Table]:
    """`cogroup(...).applyInArrow`'s function: one bucket's orders against its candidate quotes
    (kernel.steps.check), as alert rows."""

    def run(orders: pa.Table, candidates: pa.Table) -> pa.Table:
        if orders.num_rows == 0:
            return schema.empty_table()
        orders = plain(orders.select(ORDER.names)).cast(ORDER)
        candidates = plain(candidates.select(CANDIDATE.names)).cast(CANDIDATE)
        return steps.check(orders, candidates, thresholds, batch_id, detected_at, schema)

    return run


def history_task(thresholds: Thresholds, batch_id: int, schema: pa.Schema) -> Callable[[pa.Table], pa.Table]:
    """`groupBy(...).applyInArrow`'s function: one bucket's quotes as history rows, each symbol's
    newest one flagged (`is_newest`) for the state."""

    def run(quotes: pa.Table) -> pa.Table:
        quotes = plain(quotes.select(CANDIDATE.names)).cast(CANDIDATE)
        history = steps.history(quotes, batch_id, thresholds, schema)
        top = columns.newest(quotes)
        flagged = steps.history(top, batch_id, thresholds, schema)
        return pa.concat_tables(
            [
                history.append_column("is_newest", pa.array([False] * history.num_rows)),
                flagged.append_column("is_newest", pa.array([True] * flagged.num_rows)),
            ]
        )

    return run

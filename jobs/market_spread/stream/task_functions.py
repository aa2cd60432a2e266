"""What Spark runs inside its tasks for the executors placement (stream.executors): the kernel's
steps (kernel.steps) wrapped as the functions of `mapInArrow` and `cogroup(...).applyInArrow`.
They import the kernel only: no Spark, Delta or lake, so an executor needs the package and pyarrow.

Rows cross between Spark and the kernel as one wide layout (PARSED) tagged by `kind`: a quote, an
order, a bad line with its quarantine reason, or a file the task read. Times cross as microseconds since the epoch (no time zone to agree on)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc

from market_spread.domain.rules import Thresholds
from market_spread.kernel import steps
from market_spread.kernel.layout import ORDER_TYPES, QUOTE_TYPES

# kind: quote, order, bad or source; then both feeds' typed columns; then a bad line's raw text with
# its reason, and the file (or record) it came from.
PARSED = pa.schema(
    [
        ("kind", pa.string()),
        *{**QUOTE_TYPES, **ORDER_TYPES}.items(),
        *[(name, pa.string()) for name in ("stream", "value", "reason", "source_file")],
    ]
)
CANDIDATE = pa.schema(list(QUOTE_TYPES.items()))
KNOWN = CANDIDATE.append(pa.field("own", pa.bool_()))  # a candidate quote, and whether it is the batch's
ORDER = pa.schema(list(ORDER_TYPES.items()))


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
        _tagged("source", pa.table({"source_file": pa.array(cols.sources, pa.string())})),
    ]
    return pa.concat_tables(parts)


def _tagged(kind: str, rows: pa.Table, schema: pa.Schema = PARSED) -> pa.Table:
    """`rows` in `schema`'s layout, tagged with their `kind`; columns they lack are null."""
    n = rows.num_rows
    return pa.table({f.name: _column(kind, f, rows, n) for f in schema}, schema=schema)


def _column(kind: str, field: pa.Field, rows: pa.Table, n: int) -> pa.Array:
    if field.name == "kind":
        return pa.array([kind] * n, pa.string())
    if field.name in rows.column_names:
        return pc.cast(rows[field.name], field.type)
    return pa.nulls(n, field.type)


def parse_task(universe: list[str]) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """`mapInArrow`'s function: (stream, value, source_file) lines to PARSED rows (kernel.steps.parse)."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        names = frozenset(universe)
        for batch in batches:
            yield from as_parsed(steps.parse(pa.Table.from_batches([batch]), names)).to_batches()

    return run


def stored_rows(stored: pa.Table) -> pa.Table:
    """Candidate quotes committed before the batch (not its own: no history rows of theirs), as KNOWN."""
    return stored.cast(CANDIDATE).append_column("own", pa.array([False] * stored.num_rows, pa.bool_()))


def out_schema(alerts: pa.Schema, quotes: pa.Schema) -> pa.Schema:
    """The check's rows: alerts, history and state rows in one layout, `kind` telling them apart (the
    two tables share their common columns' names and types)."""
    fields = [pa.field("kind", pa.string()), *alerts]
    fields += [f for f in quotes if f.name not in alerts.names]
    return pa.schema([f.with_nullable(True) for f in fields])


def check_task(
    thresholds: Thresholds, batch_id: int, detected_at: datetime, alerts: pa.Schema, quotes: pa.Schema
) -> Callable[[pa.Table, pa.Table], pa.Table]:
    """`cogroup(...).applyInArrow`'s function for one bucket: its orders against their candidate
    quotes (kernel.steps.check) as alert rows; the batch's own quotes as history rows, and each
    symbol's newest of them as state rows (out_schema)."""
    out = out_schema(alerts, quotes)

    def run(orders: pa.Table, known: pa.Table) -> pa.Table:
        known = plain(known.select(KNOWN.names)).cast(KNOWN)
        candidates = known.select(CANDIDATE.names)
        own = known.filter(known["own"]).select(CANDIDATE.names)
        parts = []
        if orders.num_rows:
            orders = plain(orders.select(ORDER.names)).cast(ORDER)
            parts.append(("alert", steps.check(orders, candidates, thresholds, batch_id, detected_at, alerts)))
        if own.num_rows:
            parts.append(("history", steps.history(own, batch_id, thresholds, quotes)))
            parts.append(("newest", steps.newest(own, thresholds, quotes, quotes.names)))
        return pa.concat_tables([_tagged(kind, rows, out) for kind, rows in parts] or [out.empty_table()])

    return run

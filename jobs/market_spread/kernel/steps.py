"""A micro-batch's steps over Arrow, each written once and called by both placements (the driver
process, stream.driver_batch; Spark's tasks, stream.executors): lines to typed rows or quarantine
reasons, the orders' alerts against their candidate quotes, the quotes' history rows and the newest
quote per symbol."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa

from market_spread.domain.rules import Thresholds
from market_spread.kernel import columns, layout, line_rows, rows

# Line by line in Python a batch's cost grows with its lines: past this many lines outside the
# product's own layout, Spark's plan is faster (measured: docs/performance.md, row 'driver batches
# in Arrow's kernels').
ROWS_MAX_LINES = 50_000


@dataclass
class Parsed:
    """A batch's lines, sorted: valid ones as columns, bad ones with their quarantine reason (every
    line judged as Spark's parse would; `uncertain` is always empty now)."""

    columns: layout.ColumnBatch
    quarantine: pa.Table  # stream, raw, reason, source_file
    uncertain: pa.Table  # stream, value, source_file


def parse(lines: pa.Table, universe: pa.Array, names: frozenset[str], max_rows: int = ROWS_MAX_LINES) -> Parsed | None:
    """The lines (stream, value, source_file): those in the product's own layout through Arrow's
    kernels (layout), the others one by one (line_rows), a line that is not UTF-8 among them. None
    when more than `max_rows` lines are outside the product's layout."""
    split = layout.split(lines, universe)
    if split is None:
        return None
    own, rest = split
    if rest.num_rows == 0:
        return Parsed(own, _no_quarantine(), _no_lines())
    if rest.num_rows > max_rows:
        return None
    sorted_lines = line_rows.sort_lines(rest, names)
    if sorted_lines is None:
        return None
    return Parsed(layout.concat([own, sorted_lines.columns]), sorted_lines.quarantine, sorted_lines.uncertain)


def _no_quarantine() -> pa.Table:
    return pa.schema([(n, pa.string()) for n in line_rows.QUARANTINE]).empty_table()


def _no_lines() -> pa.Table:
    return pa.schema([(n, pa.string()) for n in line_rows.LINE_COLUMNS]).empty_table()


def check(
    orders: pa.Table,
    candidates: pa.Table,
    thresholds: Thresholds,
    batch_id: int,
    detected_at: datetime,
    schema: pa.Schema,
) -> pa.Table:
    """The orders' alerts: each order against its as-of quote among `candidates` (columns.as_of),
    the reject rule on that quote (columns.rejects), as rows of the alerts table's `schema`."""
    chosen = columns.as_of(orders, candidates)
    return rows.alerts(orders, chosen, thresholds, batch_id, detected_at, schema)


def history(quotes: pa.Table, batch_id: int, thresholds: Thresholds, schema: pa.Schema) -> pa.Table:
    """The quotes as quote history rows (the quotes table's `schema`)."""
    return rows.history(quotes, batch_id, thresholds, schema)


def newest(quotes: pa.Table, thresholds: Thresholds, schema: pa.Schema, names: list[str]) -> pa.Table:
    """Each symbol's newest quote (columns.newest) as state rows: the `names` columns of its history row."""
    return rows.history(columns.newest(quotes), 0, thresholds, schema).select(names)

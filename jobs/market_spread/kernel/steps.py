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


@dataclass
class Parsed:
    """A batch's lines, sorted: valid ones as columns, bad ones with their quarantine reason."""

    columns: layout.ColumnBatch
    quarantine: pa.Table  # stream, raw, reason, source_file


def parse(lines: pa.Table, universe: frozenset[str], keep_text: bool = False) -> Parsed:
    """The lines (stream, value, source_file), every one judged: those in the product's own layout
    through Arrow's kernels (layout), the others one by one (line_rows), a line that is not UTF-8
    among them. With `keep_text`, the valid rows' lines too (ColumnBatch.texts)."""
    own, rest = layout.split(lines, universe, keep_text)
    if rest.num_rows == 0:
        return Parsed(own, pa.schema([(n, pa.string()) for n in line_rows.QUARANTINE]).empty_table())
    sorted_lines = line_rows.sort_lines(rest, universe, keep_text)
    return Parsed(layout.concat([own, sorted_lines.columns]), sorted_lines.quarantine)


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

"""A driver batch's lines that are not in the product's own layout, one by one in Python: the
certainly valid ones (kernel.certain_lines: another key order, a zone offset, an escape, keys Spark
ignores) into the columns kernel.layout makes, the certainly bad ones with the quarantine
reason Spark's parse would give (kernel.bad_lines), the rest left to Spark's parse. The check that
follows is the same for all (kernel.columns, in driver_batch); only the parse differs, slower here
than in Arrow's kernels (measured: docs/performance.md, row 'the line-by-line parse of other
layouts').
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa

from market_spread.kernel.bad_lines import certain_reason
from market_spread.kernel.certain_lines import Order, Quote, is_blank, parse_order, parse_quote
from market_spread.kernel.layout import ORDER_TYPES, QUOTE_TYPES, ColumnBatch

_OFFSET = re.compile(r"(.*)/([0-9]+)", re.DOTALL)


@dataclass
class Lines:
    """A batch's lines as the driver sorts them: certainly valid ones as columns, certainly bad ones
    with their quarantine reason, and the few only Spark's parse can judge."""

    columns: ColumnBatch
    quarantine: pa.Table  # stream, raw, reason, source_file
    uncertain: pa.Table  # stream, value, source_file


def sort_lines(table: pa.Table, universe: frozenset[str]) -> Lines | None:
    """The lines (stream, value, source_file) one by one: parsed (kernel.certain_lines), given their
    quarantine reason (kernel.bad_lines), or left to Spark; blank ones dropped, as
    parsing.nonblank_lines does. None when a line is not UTF-8 (Spark reads the batch)."""
    quotes: list[Quote] = []
    orders: list[Order] = []
    bad: list[tuple[str, str, str, str]] = []
    unsure: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    try:
        columns = [table[c].to_pylist() for c in ("stream", "value", "source_file")]
    except UnicodeDecodeError:  # Spark hands over the bytes of a line that is not UTF-8 as they are
        return None
    for stream, line, source in zip(*columns):
        line = line.removeprefix("\ufeff")
        if is_blank(line):
            continue
        seen.add(source)
        record = parse_quote(line, universe) if stream == "quotes" else parse_order(line, universe)
        if isinstance(record, Quote):
            quotes.append(record)
        elif record is not None:
            orders.append(record)
        elif (reason := certain_reason(stream, line, universe)) is not None:
            bad.append((stream, line, reason, source))
        else:
            unsure.append((stream, line, source))
    return Lines(
        ColumnBatch(_table(quotes, QUOTE_TYPES), _table(orders, ORDER_TYPES), sorted(seen)),
        pa.table({n: pa.array([b[i] for b in bad], pa.string()) for i, n in enumerate(QUARANTINE)}),
        pa.table({n: pa.array([u[i] for u in unsure], pa.string()) for i, n in enumerate(LINE_COLUMNS)}),
    )


QUARANTINE = ("stream", "raw", "reason", "source_file")
LINE_COLUMNS = ("stream", "value", "source_file")


def parse(table: pa.Table, universe: frozenset[str]) -> ColumnBatch | None:
    """The lines as columns; None unless every line is certainly valid."""
    lines = sort_lines(table, universe)
    if lines is not None and lines.quarantine.num_rows == 0 and lines.uncertain.num_rows == 0:
        return lines.columns
    return None


def _table(records: list, types: dict[str, pa.DataType]) -> pa.Table:
    return pa.table({name: pa.array([getattr(r, name) for r in records], kind) for name, kind in types.items()})


def sources(names: set[str]) -> tuple[list[str], dict[str, int]]:
    """Files as they are; Kafka records (`topic/partition/offset`) as partitions and their last offset."""
    files: set[str] = set()
    last: dict[str, int] = {}
    for name in names:
        kafka = _OFFSET.fullmatch(name)  # stream.summary's regexes, the same names
        if kafka:
            where, offset = kafka[1], int(kafka[2])
            last[where] = max(offset, last.get(where, -1))
        files.add(kafka[1] if kafka else name)
    return sorted(files), last

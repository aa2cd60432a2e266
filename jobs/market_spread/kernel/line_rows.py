"""A driver batch's lines that are not in the product's own layout, one by one in Python, each
judged as Spark's parse judged it when the product parsed with Spark SQL: the certainly valid ones (kernel.certain_lines:
another key order, a zone offset, an escape, keys Spark ignores) into the columns kernel.layout makes,
the certainly bad ones with their quarantine reason (kernel.bad_lines), and the rest, in the forms
only Spark's lenient JSON reader takes, by kernel.lenient_json, which repeats that reader. A line
that is not UTF-8 is judged too, with U+FFFD for its bad bytes. The check that follows is the same
for all (kernel.columns, in driver_batch); only the parse differs, slower here than in Arrow's kernels
(measured: docs/performance.md, row 'the line-by-line parse of other layouts').
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa

from market_spread.kernel.bad_lines import certain_reason
from market_spread.kernel.certain_lines import Order, Quote, is_blank, parse_order, parse_quote
from market_spread.kernel.layout import ORDER_TYPES, QUOTE_TYPES, TEXT, ColumnBatch
from market_spread.kernel.lenient_json import decode, judge

_OFFSET = re.compile(r"(.*)/([0-9]+)", re.DOTALL)


@dataclass
class Lines:
    """A batch's lines as the driver sorts them: valid ones as columns, bad ones with their
    quarantine reason."""

    columns: ColumnBatch
    quarantine: pa.Table  # stream, raw, reason, source_file


def sort_lines(table: pa.Table, universe: frozenset[str], keep_text: bool = False) -> Lines:
    """The lines (stream, value, source_file) one by one: parsed (kernel.certain_lines), given their
    quarantine reason (kernel.bad_lines), or judged by kernel.lenient_json; blank ones dropped (Java's
    six blank characters; a byte-order mark at a line's start is no part of it). With `keep_text`,
    the valid rows' lines too (ColumnBatch.texts)."""
    quotes: list[Quote] = []
    orders: list[Order] = []
    bad: list[tuple[str, str, str, str]] = []
    texts: dict[str, list[tuple[str, str]]] = {"quotes": [], "orders": []}
    seen: set[str] = set()
    for stream, value, source in zip(*_columns(table)):
        # Not UTF-8 (Spark hands over a line's bytes as they are): the text Spark's JSON reader sees
        # is judged, the text make_valid_utf8 gives is what quarantine keeps.
        line, shown = decode(value) if isinstance(value, bytes) else (value.removeprefix("\ufeff"),) * 2
        if is_blank(line):
            continue
        seen.add(source)
        record: Quote | Order | str | None = (
            parse_quote(line, universe) if stream == "quotes" else parse_order(line, universe)
        )
        if record is None:
            record = certain_reason(stream, line, universe) or judge(stream, line, universe)
        if isinstance(record, str):
            bad.append((stream, shown, record, source))
            continue
        if isinstance(record, Quote):
            quotes.append(record)
        else:
            orders.append(record)
        if keep_text:
            texts[stream].append((shown, source))
    columns = ColumnBatch(_table(quotes, QUOTE_TYPES), _table(orders, ORDER_TYPES), sorted(seen))
    if keep_text:
        columns.texts = {f: pa.table([[t[0] for t in r], [t[1] for t in r]], schema=TEXT) for f, r in texts.items()}
    return Lines(columns, pa.table({n: pa.array([b[i] for b in bad], pa.string()) for i, n in enumerate(QUARANTINE)}))


def _columns(table: pa.Table) -> list[list]:
    """stream, value, source_file as Python lists; values that are not UTF-8 as their bytes."""
    columns = [table[c].to_pylist() for c in ("stream", "source_file")]
    try:
        values = table["value"].to_pylist()
    except UnicodeDecodeError:
        raw = table["value"].cast(pa.large_binary()).to_pylist()
        values = [_text_or_bytes(v) for v in raw]
    return [columns[0], values, columns[1]]


def _text_or_bytes(value: bytes) -> str | bytes:
    try:
        return value.decode()
    except UnicodeDecodeError:
        return value


QUARANTINE = ("stream", "raw", "reason", "source_file")


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

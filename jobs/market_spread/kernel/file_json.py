"""A landing file parsed whole by Arrow's JSON reader (C++, on every core), certain-or-nothing: the
driver's fast parse of a large batch, many times faster than a regular expression per line.

A file is read this way only when its bytes have the shape whose reading by Arrow is certainly
Spark's: one JSON object a line (every line starts with `{` and ends with `}`; no blank line, no
carriage return), no escape, no NaN or Infinity, and no number given as a string (Arrow reads "7"
as the integer 7, Spark does not). Anything else, or a file Arrow refuses, returns None: its lines
go the line-at-a-time way (kernel.layout, kernel.line_rows). Rows Arrow reads but that are
not certainly valid (a missing field, a zero price, an unknown symbol, a time in another layout)
come back as lines for that way too.
"""

from __future__ import annotations

import io
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from market_spread.kernel.columns import PRICE, TIME
from market_spread.kernel.layout import _TIME_TEXT, _cast, known

_SCHEMAS = {
    "quotes": pa.schema(
        [("symbol", pa.string()), ("transact_time", pa.string()), ("bid", PRICE), ("offer", PRICE), ("seq", pa.int64())]
    ),
    "orders": pa.schema(
        [
            ("order_id", pa.string()),
            ("account", pa.int64()),
            ("symbol", pa.string()),
            ("side", pa.string()),
            ("qty", PRICE),
            ("price", PRICE),
            ("transact_time", pa.string()),
            ("seq", pa.int64()),
        ]
    ),
}
_NUMBERS = {"quotes": ("bid", "offer", "seq"), "orders": ("account", "qty", "price", "seq")}
_TIME_PATTERN = "^" + _TIME_TEXT[1:-1] + "$"  # driver_columns' time, zone Z: a plain string
_PRICE_MAX = pa.scalar(Decimal("9999999999.99999999"), PRICE)  # below 1e10: DECIMAL(18,8)


def parse_file(feed: str, data: bytes, universe: frozenset[str]) -> tuple[pa.Table, pa.Array] | None:
    """The file's rows in driver_columns' columns (time in µs) and the lines (as a string array) of
    the rows that are not certainly valid; None when the file is not of the shape read here."""
    if not data:
        return None
    ends = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)  # where each line ends
    if not _plain(feed, data, ends):
        return None
    try:
        rows = pj.read_json(
            io.BytesIO(data),
            read_options=pj.ReadOptions(block_size=1 << 24),
            parse_options=pj.ParseOptions(explicit_schema=_SCHEMAS[feed], unexpected_field_behavior="ignore"),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    lines = _lines(data, ends)
    if len(lines) != rows.num_rows:
        return None
    table, ok = _typed(feed, rows, universe)
    return table.filter(ok), lines.filter(pc.invert(ok))


def _plain(feed: str, data: bytes, ends: np.ndarray) -> bool:
    """The shape whose reading by Arrow is certainly Spark's (see the module)."""
    if b"\\" in data or b"\r" in data or b"NaN" in data or b"Infinity" in data:
        return False
    buf = np.frombuffer(data, np.uint8)
    if buf[0] != ord("{") or buf[-1] != ord("\n") or (ends.size and (buf[ends - 1] != ord("}")).any()):
        return False
    if ends.size > 1 and (buf[ends[:-1] + 1] != ord("{")).any():
        return False
    numbers = "|".join(_NUMBERS[feed])
    quoted = pc.count_substring_regex(pa.array([data], pa.large_binary()), f'"(?:{numbers})"[ \\t]*:[ \\t]*"')
    return quoted[0].as_py() == 0


def _lines(data: bytes, ends: np.ndarray) -> pa.Array:
    """The file's lines (it ends with a newline, has no carriage return) as strings, without copies
    of the bytes: one string array over them, each line's newline trimmed."""
    offsets = np.concatenate([[0], ends + 1]).astype(np.int32 if len(data) < 2**31 else np.int64)
    kind = pa.string() if offsets.dtype == np.int32 else pa.large_string()
    lines = pa.Array.from_buffers(kind, len(offsets) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    return pc.utf8_rtrim(lines, characters="\n").cast(pa.string())


def _typed(feed: str, rows: pa.Table, universe: frozenset[str]) -> tuple[pa.Table, pa.Array]:
    """driver_columns' columns of `rows`, and which rows are certainly valid."""
    time_text = rows["transact_time"]
    well_formed = pc.fill_null(pc.match_substring_regex(time_text, _TIME_PATTERN), False)
    # Only the well-formed times are cast; one that names no instant (February 30th) comes out null.
    time = pc.cast(_cast(pc.if_else(well_formed, time_text, pa.scalar(None, pa.string())), TIME), pa.int64())
    checks = [pc.is_valid(time), known(rows["symbol"], universe)]
    for price in ("bid", "offer") if feed == "quotes" else ("qty", "price"):
        checks += [pc.greater(rows[price], pa.scalar(Decimal(0), PRICE)), pc.less_equal(rows[price], _PRICE_MAX)]
    if feed == "orders":
        checks += [
            pc.is_in(rows["side"], value_set=pa.array(["BUY", "SELL"])),
            pc.is_valid(rows["account"]),
            pc.greater(pc.utf8_length(rows["order_id"]), 0),
        ]
    ok = checks[0]
    for check in checks[1:]:
        ok = pc.and_(ok, pc.fill_null(check, False))
    columns = {name: rows[name] for name in rows.column_names if name != "transact_time"}
    order = (
        ["symbol", "bid", "offer", "time", "seq"]
        if feed == "quotes"
        else ["order_id", "account", "symbol", "side", "qty", "price", "time", "seq"]
    )
    return pa.table({name: (time if name == "time" else columns[name]) for name in order}), ok

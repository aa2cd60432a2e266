"""An event-at-a-time reference implementation of the contract ("the oracle"), in plain Python.

The way Wallaroo runs Market Spread: a dict of per-symbol state, events processed one by one.
It shares nothing with the stream: its reject rule (`should_reject`, in Python decimals) and order
of quotes (`quote_key`) are written here again, so the stream's Spark and Arrow forms and this one
cross-check each other. Per micro-batch: every valid quote of the batch enters its
symbol's history (kept sorted by `quote_key`) and state (the max key wins); then every valid
order is checked against the latest quote of its symbol whose time is at or before the order's
(a binary search in the history, so a late order sees the past, not the newer state).

Line parsing follows the Spark job's reading of landing files: blank lines are skipped; decimals
come from the number's text (or a numeric string), rounded half-up to 8 places, and must be > 0
and < 1e10; string fields accept any non-null JSON value as its text, as Spark's JSON reader does.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal, localcontext
from pathlib import Path
from typing import Any, NamedTuple, cast

from market_spread.domain.rules import DEFAULT_MAX_SPREAD, DEFAULT_MAX_SPREAD_RATIO, PRICE_LIMIT, SCALE

QUANTUM = Decimal(1).scaleb(-SCALE)  # 1e-8
OVERFLOW = Decimal("1e30")  # beyond DECIMAL(38,8), Spark's parse type: overflow, not a value
INT64 = (-(2**63), 2**63 - 1)
STREAMS = ("quotes", "orders")

# (name, kind) in schema order: the first failing field gives the quarantine reason.
QUOTE_FIELDS = (
    ("symbol", "text"),
    ("transact_time", "text"),
    ("bid", "decimal"),
    ("offer", "decimal"),
    ("seq", "optional_int"),
)
ORDER_FIELDS = (
    ("order_id", "text"),
    ("account", "int"),
    ("symbol", "text"),
    ("side", "text"),
    ("qty", "decimal"),
    ("price", "decimal"),
    ("transact_time", "text"),
    ("seq", "optional_int"),
)
FIELDS = {"quotes": QUOTE_FIELDS, "orders": ORDER_FIELDS}

_TIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?(?:(Z)|([+-])(\d{2}):(\d{2}))", re.ASCII
)
# Java's BigDecimal grammar, which Spark applies to a JSON string read as a decimal.
_DECIMAL_TEXT = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_NON_FINITE_TEXT = re.compile(r"[+-]?(?:NaN|Infinity|INF)")
# Spark's JSON reader (Jackson) also takes these tokens as numbers; Python's json only some.
_NON_FINITE_VALUE = re.compile(r"([:\[,]\s*)(NaN|[+-]?Infinity|[+-]INF)\b")
_NUMBER_START = re.compile(r"-?[0-9]", re.ASCII)
_STRING_TOKEN = re.compile(r""""(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'""", re.DOTALL)
_LINE_END = re.compile(r"\r\n|\r|\n")  # Spark's text reader ends lines at any of these
_BLANK = re.compile(r"[ \t\n\x0b\f\r]*")  # Java's \s: what Spark's `\S` test calls blank


class _NonFinite:
    """Marks a NaN/Infinity literal in a parsed line."""


NON_FINITE = _NonFinite()
_DECODER = json.JSONDecoder(parse_float=Decimal, parse_int=int, parse_constant=lambda _: NON_FINITE)


# --- the rule and the order, in Python decimals ------------------------------------------------


def should_reject(
    bid: Decimal,
    offer: Decimal,
    max_spread: Decimal = DEFAULT_MAX_SPREAD,
    max_spread_ratio: Decimal = DEFAULT_MAX_SPREAD_RATIO,
) -> bool:
    """True when trades against this quote must be rejected; exact decimal arithmetic."""
    with localcontext() as ctx:
        ctx.prec = 80  # far beyond 2 x 18 digits: every operation below is exact
        spread = offer - bid
        if spread <= 0:  # crossed or locked markets never reject
            return False
        mid = (bid + offer) / 2
        return spread >= max_spread or spread >= max_spread_ratio * mid


class QuoteKey(NamedTuple):
    """Total order of quotes of one symbol: later time wins, then higher seq (a missing seq is
    lowest), then, for exact ties, the higher bid and offer. Being a total order over the quote's
    own fields, the winner never depends on how the input was cut into files or batches."""

    time: object
    has_seq: bool
    seq: int
    bid: Decimal
    offer: Decimal


def quote_key(time: object, seq: int | None, bid: Decimal, offer: Decimal) -> QuoteKey:
    return QuoteKey(time, seq is not None, seq if seq is not None else 0, bid, offer)


@dataclass
class ReferenceResult:
    alerts: list[dict[str, Any]] = field(default_factory=list)
    state: dict[str, dict[str, Any]] = field(default_factory=dict)
    quotes: int = 0
    orders: int = 0
    quarantined: list[tuple[str, str, str]] = field(default_factory=list)


# --- reading lines -----------------------------------------------------------------------------


def read_lines(path: Path) -> list[str]:
    """The non-blank lines of a landing file, as the stream sees them."""
    text = Path(path).read_bytes().decode("utf-8", errors="replace")
    lines = []
    for line in _LINE_END.split(text):
        line = line.removeprefix("\ufeff")
        if not _BLANK.fullmatch(line):
            lines.append(line)
    return lines


def _single_to_double(m: re.Match) -> str:
    token = m.group(0)
    if token[0] != "'":
        return token  # a double-quoted string: as it is

    def escape(e: re.Match) -> str:
        if e.group(0) == '"':
            return '\\"'  # a bare " inside '...' needs escaping once the quotes are double
        return "'" if e.group(1) == "'" else e.group(0)

    return '"' + re.sub(r"\\(.)|\"", escape, token[1:-1], flags=re.DOTALL) + '"'


def _double_quoted(line: str) -> str:
    """Single-quoted JSON strings (Spark's reader allows them) rewritten with double quotes."""
    return _STRING_TOKEN.sub(_single_to_double, line)


def _load_object(line: str) -> dict | None:
    """The JSON object a line starts with (duplicate keys: the last wins), or None.

    Like Spark's reader: content after the object is ignored, single quotes and NaN/Infinity/INF
    literals are accepted."""
    if not line.rstrip(" ").endswith("}"):  # Spark's rtrim trims spaces only
        return None
    text = _double_quoted(line) if "'" in line else line
    for retry in (False, True):
        # The retry (rare: only for lines Python's json refuses) turns Jackson-only tokens into markers.
        attempt = _NON_FINITE_VALUE.sub(r'\1"\\u0000NF"', text) if retry else text
        try:
            start = len(attempt) - len(attempt.lstrip(" \t\r\n"))
            value, _ = _DECODER.raw_decode(attempt, start)
        except (ValueError, RecursionError):
            continue
        if not isinstance(value, dict):
            return None
        return {k: (NON_FINITE if retry and v == "\x00NF" else v) for k, v in value.items()}
    return None


def _as_text(value: Any) -> str:
    """A string field: Spark's JSON reader turns any other JSON value into its JSON text."""
    if isinstance(value, str):
        return value
    if value is NON_FINITE:
        return "NaN"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, Decimal)):
        return str(value)
    return json.dumps(value, separators=(",", ":"), default=str)


def _check_decimal(value: Any) -> tuple[Decimal | None, str | None]:
    """(value rounded to 8 places, None) or (None, problem)."""
    if value is NON_FINITE:
        return None, "non_finite"
    if isinstance(value, bool):
        return None, "wrong_type"
    if isinstance(value, str):
        text = value.replace(",", "")  # Spark's decimal parser drops grouping commas
        if _NON_FINITE_TEXT.fullmatch(value):
            return None, "non_finite"
        if not _DECIMAL_TEXT.fullmatch(text):
            return None, "out_of_range" if _NUMBER_START.match(value) else "wrong_type"
        value = Decimal(text)
    elif isinstance(value, int):
        value = Decimal(value)
    elif not isinstance(value, Decimal):
        return None, "wrong_type"
    if abs(value) >= OVERFLOW:
        return None, "out_of_range"
    with localcontext() as ctx:
        ctx.prec = 60
        rounded = value.quantize(QUANTUM, rounding=ROUND_HALF_UP)
    if rounded <= 0:
        return None, "non_positive"
    if rounded >= PRICE_LIMIT:
        return None, "out_of_range"
    return rounded, None


def _check_int(value: Any) -> tuple[int | None, str | None]:
    if value is NON_FINITE:
        return None, "non_finite"
    if isinstance(value, int) and not isinstance(value, bool):
        return (value, None) if INT64[0] <= value <= INT64[1] else (None, "out_of_range")
    if isinstance(value, str) and _NON_FINITE_TEXT.fullmatch(value):
        return None, "non_finite"
    if isinstance(value, (Decimal, str)) and _NUMBER_START.match(str(value)):
        return None, "out_of_range"  # number-like but not a 64-bit integer (Spark's wording)
    return None, "wrong_type"


def parse_time(text: str) -> datetime | None:
    """An ISO-8601 time with a zone -> aware UTC datetime, or None."""
    m = _TIME.fullmatch(text)
    if not m:
        return None
    y, mo, d, h, mi, s, frac, z, sign, oh, om = m.groups()
    try:
        local = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), int((frac or "0").ljust(6, "0")), tzinfo=UTC)
        if z:
            return local
        if int(oh) > 18 or int(om) > 59 or (int(oh) == 18 and int(om) > 0):
            return None  # java.time takes offsets up to +-18:00
        offset = timedelta(hours=int(oh), minutes=int(om)) * (1 if sign == "+" else -1)
        return local - offset
    except (ValueError, OverflowError):
        return None


def parse_line(stream: str, line: str, symbols: set[str]) -> tuple[dict[str, Any] | None, str | None]:
    """(typed record, None) for a valid line, else (None, quarantine reason)."""
    obj = _load_object(line)
    if obj is None:
        return None, "not_json_object"
    rec: dict[str, Any] = {}
    for name, kind in FIELDS[stream]:
        value = obj.get(name)
        if kind == "text":
            text = None if value is None else _as_text(value)
            if not text:
                return None, f"missing_field:{name}"
            rec[name] = text
            continue
        if value is None:
            if kind == "optional_int":
                rec[name] = None
                continue
            return None, f"missing_field:{name}"
        typed, problem = _check_decimal(value) if kind == "decimal" else _check_int(value)
        if problem:
            return None, f"{problem}:{name}"
        rec[name] = typed
    if stream == "orders" and rec["side"] not in ("BUY", "SELL"):
        return None, "unknown_side"
    rec["time"] = parse_time(rec.pop("transact_time"))
    if rec["time"] is None:
        return None, "bad_time"
    if rec["symbol"] not in symbols:
        return None, "unknown_symbol"
    return rec, None


# --- the event-at-a-time engine ----------------------------------------------------------------


def _stream_of(path: Path) -> str:
    stream = Path(path).parent.name
    if stream not in STREAMS:
        raise ValueError(f"landing file not under quotes/ or orders/: {path}")
    return stream


def run_reference(
    batches: list[list[Path]],
    symbols: Iterable[str],
    max_spread: Decimal = DEFAULT_MAX_SPREAD,
    max_spread_ratio: Decimal = DEFAULT_MAX_SPREAD_RATIO,
) -> ReferenceResult:
    """Process micro-batches of landing files (each a list of quote and order files, in order)."""
    universe = set(symbols)
    result = ReferenceResult()
    history: dict[str, list[QuoteKey]] = {}  # symbol -> quote keys, sorted (QuoteKey + the quote)
    times: dict[str, list[datetime]] = {}  # symbol -> the keys' times, for bisect
    for batch in batches:
        quotes: list[dict[str, Any]] = []
        orders: list[dict[str, Any]] = []
        for path in batch:
            stream = _stream_of(path)
            for line in read_lines(path):
                rec, reason = parse_line(stream, line, universe)
                if reason:
                    result.quarantined.append((stream, line, reason))
                else:
                    (quotes if stream == "quotes" else orders).append(
                        cast("dict[str, Any]", rec)
                    )  # no reason: a record
        # The order's own batch counts in full: every quote of it is known before any order.
        for q in quotes:
            key = quote_key(q["time"], q["seq"], q["bid"], q["offer"])
            at = bisect.bisect_right(history.setdefault(q["symbol"], []), key)
            history[q["symbol"]].insert(at, key)
            times.setdefault(q["symbol"], []).insert(at, cast(datetime, key.time))
            if at == len(history[q["symbol"]]) - 1:  # the new maximum: state moves on
                result.state[q["symbol"]] = {
                    "bid": key.bid,
                    "offer": key.offer,
                    "quote_time": key.time,
                    "seq": q["seq"],
                    "should_reject_trades": should_reject(key.bid, key.offer, max_spread, max_spread_ratio),
                }
        for o in orders:
            # Sorted by key, so the last quote at or before the order's time has the max key.
            at = bisect.bisect_right(times.get(o["symbol"], []), o["time"]) - 1
            alert = {
                "order_id": o["order_id"],
                "account": o["account"],
                "symbol": o["symbol"],
                "side": o["side"],
                "qty": o["qty"],
                "price": o["price"],
                "order_time": o["time"],
                "reason": "no_market_data",
                "bid": None,
                "offer": None,
                "quote_time": None,
                "order_seq": o["seq"],
                "quote_seq": None,
            }
            if at >= 0:
                quote = history[o["symbol"]][at]
                if not should_reject(quote.bid, quote.offer, max_spread, max_spread_ratio):
                    continue  # accepted: no alert
                alert.update(
                    reason="wide_spread",
                    bid=quote.bid,
                    offer=quote.offer,
                    quote_time=quote.time,
                    quote_seq=quote.seq if quote.has_seq else None,
                )
            result.alerts.append(alert)
        result.quotes += len(quotes)
        result.orders += len(orders)
    return result


def landing_files(landing_dir: Path | str) -> list[Path]:
    """Every landing file the stream would read: quotes/*.jsonl then orders/*.jsonl, hidden ones skipped."""
    landing_dir = Path(landing_dir)
    return [
        p
        for stream in STREAMS
        for p in sorted((landing_dir / stream).glob("*.jsonl"))
        if not p.name.startswith((".", "_"))
    ]


def file_pairs(landing_dir: Path | str) -> list[list[Path]]:
    """The landing files as micro-batches of a quotes file and an orders file each, in name order
    (a batch a pair, as `--max-files-per-batch 2` over equal names): the history stays the only
    thing the run holds in full, so a 10M-event backlog fits."""
    landing_dir = Path(landing_dir)
    quotes, orders = ([p for p in landing_files(landing_dir) if p.parent.name == s] for s in STREAMS)
    return [[*quotes[i : i + 1], *orders[i : i + 1]] for i in range(max(len(quotes), len(orders)))]


def run_reference_landing(
    landing_dir: Path | str,
    symbols: Iterable[str],
    max_spread: Decimal = DEFAULT_MAX_SPREAD,
    max_spread_ratio: Decimal = DEFAULT_MAX_SPREAD_RATIO,
) -> ReferenceResult:
    """The whole landing folder as one micro-batch (what `stream --available-now` does on a fresh lake)."""
    return run_reference([landing_files(landing_dir)], symbols, max_spread, max_spread_ratio)

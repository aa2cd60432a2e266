"""Landing lines parsed in pure Python, certain-or-nothing, for batches checked on the driver
(stream.driver_batch).

A line is taken only when it is certainly valid and its values are certainly the ones Spark's JSON
reader gave it when the product parsed with Spark (the behaviour kept: kernel.lenient_json); for anything else `parse_quote`/`parse_order` return None and
the line goes on to kernel.bad_lines and kernel.lenient_json. So this module can make a batch slower,
never different. What it takes: a JSON object with no key twice (keys outside its feed's fields
are ignored, as Spark does), starting with `{` and ending with `}` (no surrounding whitespace, which Spark's `rtrim` and
Python's parser treat differently), required fields present and not null, text fields non-empty
ASCII strings, the symbol in the universe, the side BUY or SELL, integers as JSON integers within
64 bits, prices and quantities as JSON numbers > 0 and < 1e10 with at most 8 fractional digits (no
rounding to agree on), and times matching bad_lines' time pattern in the years 1000-9998 with a zone offset of at most 18:00.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Literal, NamedTuple, cast, overload

from market_spread.domain.rules import PRICE_LIMIT, SCALE

# transact_time's pattern with ASCII digits only (Python's \d also matches other scripts' digits).
_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-]([0-9]{2}):([0-9]{2}))")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)
_INT64 = (-(1 << 63), (1 << 63) - 1)
# Blank, as Spark's `rlike('\S')` sees it: Java's \s is these six ASCII characters only.
_BLANK = re.compile(r"[ \t\n\x0b\f\r]*")


class Quote(NamedTuple):
    symbol: str
    bid: Decimal
    offer: Decimal
    time: int  # microseconds since the epoch, UTC
    seq: int | None


class Order(NamedTuple):
    order_id: str
    account: int
    symbol: str
    side: str
    qty: Decimal
    price: Decimal
    time: int  # microseconds since the epoch, UTC
    seq: int | None


class _Uncertain(Exception):
    """The line is not certainly valid: kernel.bad_lines or kernel.lenient_json decides."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _Uncertain  # a key twice: which value wins is kernel.lenient_json's business
    return obj


_DECODER = json.JSONDecoder(parse_float=Decimal, object_pairs_hook=_pairs)


def is_blank(line: str) -> bool:
    """A blank line, as the stream drops it (Java's six blank characters only)."""
    return _BLANK.fullmatch(line) is not None


def micros(text: str) -> int:
    """A transact_time (certainly valid) as microseconds since the epoch; _Uncertain otherwise."""
    m = _TIME.fullmatch(text)
    # Years far from ours are kernel.lenient_json's to judge (calendar edges, overflow past 9999 in UTC).
    if m is None or not "1000" <= text[:4] <= "9998":
        raise _Uncertain
    if m.group(3) is not None and (not (int(m.group(3)), int(m.group(4))) <= (18, 0) or m.group(4) >= "60"):
        raise _Uncertain  # Spark's zone offsets stop at 18:00; Python takes minute 60, Spark does not
    try:
        return (datetime.fromisoformat(text) - _EPOCH) // _MICRO
    except (ValueError, OverflowError):
        raise _Uncertain from None


def _text(obj: dict[str, Any], name: str) -> str:
    v = obj.get(name)
    if type(v) is not str or not v or not v.isascii():
        raise _Uncertain
    return v


def _price(obj: dict[str, Any], name: str) -> Decimal:
    v = obj.get(name)
    if type(v) is int:
        v = Decimal(v)
    elif type(v) is not Decimal:
        raise _Uncertain
    if cast(int, v.as_tuple().exponent) < -SCALE or not 0 < v < PRICE_LIMIT:  # a JSON number: finite
        raise _Uncertain
    return v


@overload
def _integer(obj: dict[str, Any], name: str, required: Literal[True]) -> int: ...
@overload
def _integer(obj: dict[str, Any], name: str, required: bool) -> int | None: ...
def _integer(obj: dict[str, Any], name: str, required: bool) -> int | None:
    v = obj.get(name)
    if v is None and not required:
        return None
    if type(v) is not int or not _INT64[0] <= v <= _INT64[1]:
        raise _Uncertain
    return v


def _time(obj: dict[str, Any]) -> int:
    v = obj.get("transact_time")
    if type(v) is not str:
        raise _Uncertain
    return micros(v)


def _object(line: str) -> dict[str, Any]:
    if not (line.startswith("{") and line.endswith("}")):
        raise _Uncertain
    try:
        obj = _DECODER.decode(line)
    except ValueError:  # json.JSONDecodeError is one
        raise _Uncertain from None
    if type(obj) is not dict:
        raise _Uncertain
    return obj  # other keys are ignored, as Spark's reader skips them


def parse_quote(line: str, universe: frozenset[str]) -> Quote | None:
    """The quote of a certainly valid quotes line, else None."""
    try:
        obj = _object(line)
        symbol = _text(obj, "symbol")
        if symbol not in universe:
            raise _Uncertain
        return Quote(symbol, _price(obj, "bid"), _price(obj, "offer"), _time(obj), _integer(obj, "seq", False))
    except _Uncertain:
        return None


def parse_order(line: str, universe: frozenset[str]) -> Order | None:
    """The order of a certainly valid orders line, else None."""
    try:
        obj = _object(line)
        symbol, side = _text(obj, "symbol"), _text(obj, "side")
        if symbol not in universe or side not in ("BUY", "SELL"):
            raise _Uncertain
        return Order(
            _text(obj, "order_id"),
            _integer(obj, "account", True),
            symbol,
            side,
            _price(obj, "qty"),
            _price(obj, "price"),
            _time(obj),
            _integer(obj, "seq", False),
        )
    except _Uncertain:
        return None

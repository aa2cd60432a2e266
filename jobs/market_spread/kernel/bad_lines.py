"""The quarantine reason of a bad landing line, decided on the driver, certain-or-nothing: the very
reason Spark's parse gave the line when the product parsed with Spark (the behaviour kept), or None when that is not certain
(kernel.lenient_json then judges the line).

Certain here: a line that does not end in `}` (`not_json_object`), and JSON objects Python reads
alone: the line is one object with no key twice, and each of the feed's fields is missing, null, of
its plain JSON type, or plainly of the wrong one (true, a list or an object for a number, a fraction
for an integer, a word for a number, NaN or Infinity). For those the reason follows the reasons' order:
missing_field, non_finite, out_of_range, wrong_type, non_positive (per field), unknown_side,
bad_time, unknown_symbol. Everything else (single-quoted strings, content after the object, numbers
given as strings, a number where text is due) is kernel.lenient_json's to judge: Spark's JSON reader
(Jackson) is more lenient than Python's, and that module repeats it, line by line and slower.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any

from market_spread.domain.rules import PRICE_LIMIT, SCALE

_QUANTUM = Decimal(1).scaleb(-SCALE)
_DECIMAL38 = Decimal("1e30")  # DECIMAL(38,8), the parse's type, holds 30 integer digits
_INT64 = (-(1 << 63), (1 << 63) - 1)
# transact_time's pattern (Java's \d is ASCII only).
_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})")

# (name, kind) in the parse's order: its first failing field gives the reason.
FIELDS = {
    "quotes": (
        ("symbol", "text"),
        ("transact_time", "time"),
        ("bid", "decimal"),
        ("offer", "decimal"),
        ("seq", "optional_int"),
    ),
    "orders": (
        ("order_id", "text"),
        ("account", "int"),
        ("symbol", "text"),
        ("side", "text"),
        ("qty", "decimal"),
        ("price", "decimal"),
        ("transact_time", "time"),
        ("seq", "optional_int"),
    ),
}


class _Uncertain(Exception):
    """kernel.lenient_json decides."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _Uncertain  # a key twice
    return obj


class _NonFinite:
    """A NaN or Infinity token (Jackson reads them as numbers, as Python's json does)."""


NON_FINITE = _NonFinite()
_DECODER = json.JSONDecoder(
    parse_float=Decimal, parse_int=int, parse_constant=lambda _: NON_FINITE, object_pairs_hook=_pairs
)
_WORD = re.compile(r"[A-Za-z][A-Za-z ]*")  # no digit, no sign: no number Spark could read in it
_NON_FINITE_WORD = re.compile(r"[+-]?(NaN|Infinity|INF)")


def certain_reason(stream: str, line: str, universe: frozenset[str]) -> str | None:
    """The reason Spark's parse quarantines `line` with, when certain; None otherwise (a valid line
    included: certain_lines takes those)."""
    if not line.rstrip(" ").endswith("}"):
        return "not_json_object"
    try:
        obj = _object(line)
        if obj is None:
            return "not_json_object"
        for name, kind in FIELDS[stream]:
            problem = _problem(obj.get(name), kind)
            if problem:
                return f"{problem}:{name}"
        if stream == "orders" and not _is_text(obj["side"], frozenset(("BUY", "SELL"))):
            return "unknown_side"
        if not _time_certain(obj["transact_time"]):
            return "bad_time"  # a time given as anything but a string is its JSON text to Spark: no time
        if not _is_text(obj["symbol"], universe):
            return "unknown_symbol"
    except _Uncertain:
        return None
    return None


# What Python's json refuses and one of Spark's JSON readers takes: single quotes, non-numeric
# numbers beyond the NaN, Infinity and -Infinity both read, control characters inside strings.
_LENIENT = re.compile(r"'|[+]?\bINF\b|\+(NaN|Infinity)|-NaN|[\x00-\x1f]")
# A NaN or Infinity Python reads but not after a colon (in a list): the not_json_object test
# neutralises only `: NaN`, so such a line is no object to it.
_LISTED_NON_FINITE = re.compile(r"[\[,][ \t\n\r]*-?(NaN|Infinity)")


def _object(line: str) -> dict[str, Any] | None:
    """The line's object; None when it is certainly no JSON object (a syntax error Spark's reader
    meets too); _Uncertain for what only Spark can tell."""
    if not line.startswith("{"):
        raise _Uncertain
    try:
        obj, end = _DECODER.raw_decode(line)
    except RecursionError:
        raise _Uncertain from None
    except ValueError:
        if _LENIENT.search(line):
            raise _Uncertain from None
        return None
    if type(obj) is not dict or line[end:].strip(" ") or _LISTED_NON_FINITE.search(line):
        raise _Uncertain
    return obj


def _is_text(value: Any, allowed: frozenset[str]) -> bool:
    """Whether Spark's text of the value is one of `allowed`: a string as it is; a number, list or
    object as its JSON text (a digit, sign, `[` or `{` first), certainly outside a list of names
    that start otherwise; true or false as such."""
    if type(value) is str:
        return value in allowed
    if type(value) is bool:
        return ("true" if value else "false") in allowed
    if any(name[:1] in "0123456789-+.[{" for name in allowed):
        raise _Uncertain
    return False


def _problem(value: Any, kind: str) -> str | None:
    """The field's problem (missing_field, non_finite, out_of_range, wrong_type, non_positive) or
    None; _Uncertain for a value whose reading by Spark is not certain here."""
    if value is None:
        return None if kind == "optional_int" else "missing_field"
    if kind == "time":
        return None  # any JSON value reads as text; whether it is a time is judged after the fields
    if kind == "text":  # any other JSON value reads as its (non-empty) text
        return "missing_field" if value == "" else None
    if value is NON_FINITE:
        return "non_finite"
    if type(value) in (bool, list, dict):
        return "wrong_type"
    if type(value) is str:
        if _NON_FINITE_WORD.fullmatch(value):
            return "non_finite"
        if _WORD.fullmatch(value):
            return "wrong_type"
        raise _Uncertain  # digits in a string: Spark may read a number in it
    # Spark reads a fraction's raw text through a double (copyCurrentStructure): past a double's
    # range it is "Infinity", a non-finite value; an integer's text keeps its digits.
    beyond_double = type(value) is Decimal and math.isinf(float(value))
    if kind == "decimal":
        problem = _decimal_problem(Decimal(value))
        return "non_finite" if problem == "out_of_range" and beyond_double else problem
    if type(value) is not int:
        return "non_finite" if beyond_double else "wrong_type"  # a fraction or an exponent for an integer
    return None if _INT64[0] <= value <= _INT64[1] else "out_of_range"


def _decimal_problem(value: Decimal) -> str | None:
    """DECIMAL(38,8) from the number's text, rounded half-up: too large to hold is out of range."""
    if abs(int(value.as_tuple().exponent)) > 1 << 30:
        raise _Uncertain  # BigDecimal's scale is an int: past it Spark's reader fails where Python's does not
    with localcontext() as ctx:
        ctx.prec = 80
        if abs(value) >= _DECIMAL38:
            return "out_of_range"
        rounded = value.quantize(_QUANTUM, rounding=ROUND_HALF_UP)
    return "non_positive" if rounded <= 0 else "out_of_range" if rounded >= PRICE_LIMIT else None


def _time_certain(value: Any) -> bool:
    """True for a time Spark takes, False for one it refuses; _Uncertain between (years far from ours,
    zone offsets past 18:00, where the two calendars' limits differ)."""
    if type(value) is not str:
        return False
    if value.endswith(("\n", "\r")):
        raise _Uncertain  # Java's `$` matches before a final line end, and the cast trims it
    m = _TIME.fullmatch(value)
    if m is None or value.startswith("0000"):
        return False
    offset = m.group(2)
    if not "1000" <= value[:4] <= "9998" or (
        offset != "Z" and not ("00" <= offset[4:] <= "59" and offset[1:] <= "18:00")
    ):
        raise _Uncertain
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False  # no such day, hour, minute or second (February 30th, 24:00)
    return True

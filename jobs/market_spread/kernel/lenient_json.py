"""Any landing line judged as Spark's parse judged it when the product parsed with Spark SQL (the
behaviour users had, kept): its valid record, or its quarantine reason. The lines kernel.certain_lines and kernel.bad_lines leave open come here.

Spark reads a line with Jackson twice, with different options, and this module repeats both:
- `json_object_keys` (single quotes and raw control characters in strings allowed, NaN tokens not:
  parsing first turns `: NaN` into `: 0`) decides whether the line is a JSON object at all;
- `from_json` (single quotes and the tokens NaN, Infinity, +/-Infinity, +/-INF allowed, raw control
  characters not) gives the fields. A syntax error there nulls every field (parsing then names the
  first required field missing); a value that does not convert nulls its field only and leaves the
  line "malformed" if nothing else is wrong; a key given twice: the last value that converts wins.
Then Spark's conversions: a STRING field takes any JSON value as the JSON text Jackson writes for it
(a fraction through a Java double), DECIMAL(38,8) a number or a numeric string (commas dropped,
Java's BigDecimal grammar) rounded half-up to 8 places, BIGINT a JSON integer; and the reasons' CASE
over the results, in its order. Only the first object is read: content after it is ignored.
"""

from __future__ import annotations

import codecs
import math
import re
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation, localcontext
from typing import Any, NamedTuple

from market_spread.domain.rules import PRICE_LIMIT, SCALE
from market_spread.kernel.certain_lines import Order, Quote


class Num(NamedTuple):
    # A JSON number token as written: kind "int", "float" or "nonfinite" (NaN, Infinity, ...).
    text: str
    kind: str


class Obj(NamedTuple):
    pairs: list[tuple[str, object]]  # in order, a key twice kept twice (Jackson's copy keeps both)


class _Syntax(Exception):
    pass  # Jackson refuses the text


_WS = re.compile(r"[ \t\n\r]*")  # Jackson's whitespace
_ESCAPE = r"""\\(?:["\\/bfnrt']|u[0-9A-Fa-f]{4})"""  # \' too: single quotes are allowed
_WORD = r"true|false|null|NaN|Infinity|[+-]Infinity|[+-]INF"
_NUMBER = r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?"
# A string, double- or single-quoted, with raw control characters (json_object_keys) or without.
_STRING = {
    control: rf"""(?:"((?:[^"\\{ctl}]|{_ESCAPE})*)"|'((?:[^'\\{ctl}]|{_ESCAPE})*)')"""
    for control, ctl in ((True, ""), (False, "\x00-\x1f"))
}
_KEY = {control: re.compile(string) for control, string in _STRING.items()}
_VALUE = {control: re.compile(rf"([{{\[])|{string}|({_WORD})|({_NUMBER})") for control, string in _STRING.items()}
_OPEN, _COLON, _CLOSE, _NEXT = (re.compile(p) for p in (r"\{", ":", r"[}\]]?", r"[,}\]]"))
_NON_FINITE_WORDS = frozenset(("NaN", "Infinity", "+Infinity", "-Infinity", "+INF", "-INF"))
_UNESCAPE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|(.))")
_SHORT = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
# A UTF-16 surrogate pair from \u escapes is one character; a lone one is written as "?" (Java's
# String to UTF-8, as Spark stores the text).
_SURROGATES = re.compile("([\ud800-\udbff][\udc00-\udfff])|[\ud800-\udfff]")


def _unescape(m: re.Match[str], at: int) -> str:
    text = _UNESCAPE.sub(lambda e: chr(int(e[1], 16)) if e[1] else _SHORT.get(e[2], e[2]), m[at] or m[at + 1] or "")
    return _SURROGATES.sub(lambda s: s[1].encode("utf-16", "surrogatepass").decode("utf-16") if s[1] else "?", text)


class _Reader:
    """Jackson's reader over one line: `control` allows raw control characters in strings, `words`
    the non-finite number tokens. Objects are Obj, arrays lists, numbers Num, strings str."""

    def __init__(self, text: str, control: bool, words: bool) -> None:
        self.text, self.at, self.control, self.words = text, 0, control, words

    def take(self, pattern: re.Pattern[str]) -> re.Match[str]:
        m = pattern.match(self.text, _WS.match(self.text, self.at).end())  # type: ignore[union-attr]
        if m is None:
            raise _Syntax
        self.at = m.end()
        return m

    def value(self) -> object:
        m = self.take(_VALUE[self.control])
        if m[1]:
            return self.items(m[1])
        if m[4]:
            if m[4] in _NON_FINITE_WORDS and not self.words:
                raise _Syntax
            return {"true": True, "false": False, "null": None}.get(m[4], Num(m[4], "nonfinite"))
        if m[5]:
            return Num(m[5], "float" if m[6] or m[7] else "int")
        return _unescape(m, 2)

    def items(self, bracket: str) -> object:
        # An object's pairs (keys quoted) or an array's values, after the opening bracket.
        out: list = []
        closed = self.take(_CLOSE)[0]
        while not closed:
            if bracket == "{":
                key = _unescape(self.take(_KEY[self.control]), 1)
                self.take(_COLON)
                out.append((key, self.value()))
            else:
                out.append(self.value())
            closed = self.take(_NEXT)[0].strip(",")
        if closed != "}]"["{[".index(bracket)]:
            raise _Syntax
        return Obj(out) if bracket == "{" else out


def _object(text: str, control: bool, words: bool) -> list[tuple[str, object]] | None:
    # The pairs of the object the text starts with (after whitespace), or None.
    try:
        reader = _Reader(text, control, words)
        return reader.items(reader.take(_OPEN)[0]).pairs  # type: ignore[attr-defined]
    except (_Syntax, RecursionError):  # Jackson stops at 1,000 levels of nesting too
        return None


# The NaN tokens neutralised before the object test (Java's \s is these six characters).
_NON_FINITE_VALUES = re.compile(r":[ \t\n\x0b\f\r]*[+-]?(NaN|Infinity|INF)\b")


def is_object(line: str) -> bool:
    """Whether the not_json_object test passes: the line ends in `}` (trailing spaces aside)
    and `json_object_keys` reads an object from it once its `: NaN`s are `: 0`s."""
    if not line.rstrip(" ").endswith("}"):
        return False
    return _object(_NON_FINITE_VALUES.sub(":0", line), control=True, words=False) is not None


# --- a JSON value as a STRING field's text: what Jackson's generator writes -------------------------


def java_double(x: float) -> str:
    # Java's Double.toString for a finite double, with the shortest digits (Java 17's FloatingDecimal
    # gives more for a few values: 2e23 is 1.9999999999999998E23 there).
    if x == 0:
        return "-0.0" if str(x).startswith("-") else "0.0"
    sign, (_, digits, exponent) = "-" if x < 0 else "", Decimal(repr(abs(x))).normalize().as_tuple()
    ds = "".join(map(str, digits))
    e10 = len(ds) + int(exponent) - 1
    if -3 <= e10 < 7:
        whole = ds[: e10 + 1].ljust(e10 + 1, "0") if e10 >= 0 else "0"
        fraction = ds[e10 + 1 :] if e10 >= 0 else "0" * (-e10 - 1) + ds
        return f"{sign}{whole}.{fraction or '0'}"
    return f"{sign}{ds[0]}.{ds[1:] or '0'}E{e10}"


_NON_FINITE_TEXT = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
_ESCAPES_OUT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
_TO_ESCAPE = re.compile(r'["\\\x00-\x1f]')


def json_text(value: object) -> str:
    """The JSON text Jackson's generator writes for a value: compact, strings double-quoted, control
    characters escaped (upper-case hex), fractions through a double, non-finite numbers quoted."""
    if isinstance(value, str):
        return '"' + _TO_ESCAPE.sub(lambda m: _ESCAPES_OUT.get(m[0], f"\\u{ord(m[0]):04X}"), value) + '"'
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, Num):
        if value.kind == "int":
            return str(int(value.text))
        x = float(value.text)  # Python reads NaN, Infinity, +INF and -INF too
        return java_double(x) if math.isfinite(x) else f'"{_NON_FINITE_TEXT[repr(x)]}"'
    if isinstance(value, Obj):
        return "{" + ",".join(f"{json_text(k)}:{json_text(v)}" for k, v in value.pairs) + "}"
    return "[" + ",".join(json_text(v) for v in value) + "]"  # type: ignore[attr-defined]


def as_text(value: object) -> str | None:
    # A STRING field's value: a string as it is, null as null, anything else as its JSON text.
    return value if isinstance(value, str) or value is None else json_text(value)


# --- the typed conversions -------------------------------------------------------------------------

_FAIL = object()  # the value does not convert: its field is null and the line "malformed"
_QUANTUM, _DECIMAL38 = Decimal(1).scaleb(-SCALE), Decimal("1e30")  # DECIMAL(38,8): 30 integer digits
_BIG_DECIMAL = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")  # Java's BigDecimal(String)
_INT64 = (-(1 << 63), (1 << 63) - 1)


def to_decimal(value: object) -> object:
    """DECIMAL(38,8) from a number's or a string's text (commas dropped), rounded half-up."""
    if value is None:
        return None
    token = value.text if isinstance(value, Num) and value.kind != "nonfinite" else ""
    text = value.replace(",", "") if isinstance(value, str) else token
    if not _BIG_DECIMAL.fullmatch(text):
        return _FAIL  # an empty string too
    try:
        number = Decimal(text)
        if not -(1 << 31) <= -int(number.as_tuple().exponent) < 1 << 31 or number.copy_abs() >= _DECIMAL38:
            return _FAIL  # BigDecimal's scale is an int; 38 digits hold 30 before the point
        with localcontext(prec=80):
            rounded = number.quantize(_QUANTUM, rounding=ROUND_HALF_UP)
    except InvalidOperation:
        return _FAIL
    return _FAIL if rounded.copy_abs() >= _DECIMAL38 else rounded


def to_long(value: object) -> object:
    # BIGINT: a JSON integer within 64 bits only (a string or a fraction does not convert).
    if value is None or (isinstance(value, Num) and value.kind == "int" and _INT64[0] <= int(value.text) <= _INT64[1]):
        return None if value is None else int(value.text)
    return _FAIL


# --- the reasons' CASE ---------------------------------------------------------------------------------

# (name, kind, required) in the reasons' order: the first failing field gives the reason. A time is text
# whose empty value is no time (bad_time), not a missing field.
FIELDS = {
    "quotes": (
        ("symbol", "text", True),
        ("transact_time", "time", True),
        ("bid", "decimal", True),
        ("offer", "decimal", True),
        ("seq", "integer", False),
    ),
    "orders": (
        ("order_id", "text", True),
        ("account", "integer", True),
        ("symbol", "text", True),
        ("side", "text", True),
        ("qty", "decimal", True),
        ("price", "decimal", True),
        ("transact_time", "time", True),
        ("seq", "integer", False),
    ),
}
_CONVERT = {"text": as_text, "time": as_text, "decimal": to_decimal, "integer": to_long}
# The time patterns, as Java's find() reads them: `$` also matches before a final line terminator.
_END = r"(?:\r\n|[\n\r\u0085\u2028\u2029])?\Z"
_NON_FINITE = re.compile(r'"?[+-]?(NaN|Infinity|INF)"?' + _END)
_INTEGER = re.compile(r"-?[0-9]+" + _END)
_NUMBER_START = re.compile(r"-?[0-9]")


def _fields(stream: str, pairs: list[tuple[str, object]]) -> tuple[dict[str, Any], dict[str, str | None], bool]:
    # (typed values, texts, whether a value did not convert): Spark's typed and all-strings parses.
    kinds = {name: kind for name, kind, _ in FIELDS[stream]}
    typed: dict[str, Any] = {"seq": None}  # the one optional field
    texts: dict[str, str | None] = {}
    failed = False
    for key, value in pairs:
        if key in kinds:
            texts[key] = as_text(value)
            got = _CONVERT[kinds[key]](value)
            if got is _FAIL:
                failed = True  # the field keeps what an earlier occurrence gave
            else:
                typed[key] = got
    return typed, texts, failed


def _problem(kind: str, required: bool, typed: object, text: str | None) -> str | None:
    # The field's problem, or None.
    if text is None or (kind == "text" and text == ""):
        return "missing_field" if required else None
    if kind in ("decimal", "integer") and typed is None:
        if _NON_FINITE.match(text):
            return "non_finite"
        if (_NUMBER_START if kind == "decimal" else _INTEGER).match(text):
            return "out_of_range"
    if typed is None:
        return "wrong_type"
    if kind == "decimal":
        assert isinstance(typed, Decimal)
        return "non_positive" if typed <= 0 else "out_of_range" if typed >= PRICE_LIMIT else None
    return None


# transact_time's pattern (Java's \d is ASCII) with its `$`; a time then ending in \u0085, \u2028 or
# \u2029 fails the cast (Spark trims only ASCII whitespace and control characters).
_TIME = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,6}))?"
    r"(?:Z|([+-])([0-9]{2}):([0-9]{2}))(\r\n|[\n\r]|[\u0085\u2028\u2029])?\Z"
)
_EPOCH, _MICRO = datetime(1970, 1, 1), timedelta(microseconds=1)


def micros(text: str) -> int | None:
    """The time in microseconds since the epoch (UTC), or None (bad_time). Java's zone
    offsets stop at 18:00 and minute 59; years 1-9999 locally, whatever they are in UTC."""
    m = _TIME.match(text)
    if m is None or text.startswith("0000") or (m[11] or "\n") in "\u0085\u2028\u2029":
        return None
    sign, hours, minutes = m[8], int(m[9] or 0), int(m[10] or 0)
    if minutes > 59 or (hours, minutes) > (18, 0):
        return None
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    try:
        local = datetime(year, month, day, hour, minute, second, int((m[7] or "0").ljust(6, "0")))
    except ValueError:  # no such day, hour, minute or second
        return None
    offset = (hours * 3600 + minutes * 60) * 1_000_000 * (-1 if sign == "-" else 1)
    return (local - _EPOCH) // _MICRO - offset


def judge(stream: str, line: str, universe: frozenset[str]) -> Quote | Order | str:
    """The line's record, or its quarantine reason. As the reasons' CASE, a line that from_json reads
    whole and valid is valid before any other test; only a failing line meets json_object_keys."""
    ends = line.rstrip(" ").endswith("}")
    pairs = _object(line, control=False, words=True) if ends else None
    verdict = _verdict(stream, *_fields(stream, pairs or []), universe)
    if isinstance(verdict, str) and not is_object(line):
        return "not_json_object"
    return verdict


def _verdict(
    stream: str, typed: dict[str, Any], texts: dict[str, str | None], failed: bool, universe: frozenset[str]
) -> Quote | Order | str:
    # The record of the fields, or the first problem (the reasons' order after not_json_object).
    for name, kind, required in FIELDS[stream]:
        problem = _problem(kind, required, typed.get(name), texts.get(name))
        if problem:
            return f"{problem}:{name}"
    if stream == "orders" and typed["side"] not in ("BUY", "SELL"):
        return "unknown_side"
    time = micros(str(typed["transact_time"]))
    if time is None:
        return "bad_time"
    if typed["symbol"] not in universe:
        return "unknown_symbol"
    if failed:
        return "malformed"  # every field fine, yet one occurrence of a key did not convert
    record = Quote if stream == "quotes" else Order
    return record(**{name: typed[name] for name in record._fields if name != "time"}, time=time)


# --- lines that are not UTF-8 ----------------------------------------------------------------------


def _java_replace(error: UnicodeError) -> tuple[str, int]:
    # Java's UTF-8 decoder (Spark's JSON reader) takes an encoded surrogate (ED A0-BF, then a
    # continuation byte) as one bad sequence where Python sees three; elsewhere they agree.
    assert isinstance(error, UnicodeDecodeError)
    data, at = error.object, error.start
    if data[at] == 0xED and at + 1 < len(data) and 0xA0 <= data[at + 1] <= 0xBF:
        return "\ufffd", at + (3 if at + 2 < len(data) and 0x80 <= data[at + 2] <= 0xBF else 2)
    return "\ufffd", error.end


codecs.register_error("market_spread.java_replace", _java_replace)


def decode(value: bytes) -> tuple[str, str]:
    """A line that is not UTF-8: (its text as Spark's JSON reader sees it, its text as the quarantine
    keeps it: make_valid_utf8's, Python's replacement), a leading byte-order mark dropped."""
    value = value.removeprefix(b"\xef\xbb\xbf")
    return value.decode("utf-8", "market_spread.java_replace"), value.decode("utf-8", "replace")

"""What decoding Wallaroo's Market Spread inputs yields, and the field decoding both formats share.

Pure Python, no Spark. Both decoders (domain.fixish for binary frames, domain.fix_text for FIX 4.2
text) yield, in file order, either a `Record` (a decoded quote or order) or a `DecodeError` (file,
byte offset, kind, detail); decoding goes on after an error, and `strict=True` (domain.wallaroo_files)
raises `StrictDecodeError` at the first one instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Literal

from market_spread.errors import MarketSpreadError

_FIX_TIME = re.compile(rb"(\d{4})(\d{2})(\d{2})-(\d{2}):(\d{2}):(\d{2})(?:\.(\d{3}))?", re.ASCII)
_SIDES = {1: "BUY", 2: "SELL"}

Kind = Literal["quote", "order"]


@dataclass(frozen=True)
class Quote:
    symbol: str
    transact_time: str  # ISO-8601 UTC, e.g. 2015-12-04T14:30:00.000Z
    bid: float
    offer: float


@dataclass(frozen=True)
class Order:
    side: str  # BUY or SELL
    account: int
    order_id: str
    symbol: str
    qty: float
    price: float
    transact_time: str


@dataclass(frozen=True)
class Record:
    position: int  # 0-based position of the frame (or non-blank line) in its file
    offset: int  # byte offset of the frame's length prefix (or of the line)
    message: Quote | Order


@dataclass(frozen=True)
class DecodeError:
    path: str
    offset: int
    kind: str  # truncated, zero_length, wrong_type, wrong_length, garbage, bad_field, not_fix
    detail: str

    def __str__(self) -> str:
        return f"{self.path}:{self.offset}: {self.kind}: {self.detail}"


class StrictDecodeError(MarketSpreadError):
    """Raised in strict mode at the first error."""

    def __init__(self, error: DecodeError):
        super().__init__(str(error))
        self.error = error


class FieldError(MarketSpreadError, ValueError):
    """One field of an otherwise well-framed message does not decode."""


Item = Record | DecodeError


# --- field decoding shared by both formats -----------------------------------------------------


def fix_time_to_iso(raw: bytes) -> str:
    """FIX UTCTimestamp `YYYYMMDD-HH:MM:SS[.mmm]` -> `YYYY-MM-DDTHH:MM:SS[.mmm]Z`, checked real."""
    m = _FIX_TIME.fullmatch(raw)
    if not m:
        raise FieldError(f"bad transact_time {raw!r}")
    y, mo, d, h, mi, s, ms = m.groups()
    try:
        datetime(int(y), int(mo), int(d), int(h), int(mi), int(s))
    except ValueError:
        raise FieldError(f"transact_time is not a real time {raw!r}") from None
    frac = f".{ms.decode()}" if ms else ""
    return f"{y.decode()}-{mo.decode()}-{d.decode()}T{h.decode()}:{mi.decode()}:{s.decode()}{frac}Z"


def decimal_text(x: float) -> str:
    """A double's shortest exact decimal text (repr's digits), never in exponent notation."""
    return format(Decimal(repr(x)), "f")


def _finite(value: float, name: str) -> float:
    if value != value or value in (float("inf"), float("-inf")):
        raise FieldError(f"{name} is not finite ({value!r})")
    return value


def _ascii_field(raw: bytes, name: str, *, pad: bytes = b" \x00") -> str:
    """A fixed-width ASCII field with its padding trimmed; printable and non-empty."""
    text = raw.strip(pad)
    if not text or not all(0x21 <= b <= 0x7E for b in text):
        raise FieldError(f"{name} is not printable ASCII {raw!r}")
    return text.decode("ascii")


def _side(code: int) -> str:
    try:
        return _SIDES[code]
    except KeyError:
        raise FieldError(f"side {code} is neither 1 (buy) nor 2 (sell)") from None

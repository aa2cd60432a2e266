"""Decoders for Wallaroo's Market Spread inputs: binary "fixish" frames and FIX 4.2 text.

Pure Python, no Spark. Both decoders yield, in file order, either a `Record` (a decoded quote or
order) or a `DecodeError` (file, byte offset, kind, detail); decoding goes on after an error, and
`strict=True` raises `StrictDecodeError` at the first one instead.

fixish: every frame is a 4-byte big-endian length and that many payload bytes; market data
(type 2) is 42 bytes, an order (type 1) 53 bytes (layouts in shared/wallaroo/README.md).

FIX text: one message per line, tag=value fields separated by SOH (0x01); Wallaroo's demo files
wrap each line in double quotes. Tags used: 35 MsgType (S = quote, D = order), 55 Symbol,
60 TransactTime, 132 BidPx, 133 OfferPx, 54 Side, 1 Account ("CLIENT57" -> 57), 11 ClOrdID,
38 OrderQty, 44 Price. Values are read as binary doubles, as Wallaroo did, so a FIX text file and
its fixish conversion give the same records; symbols are cut to Wallaroo's 4-character field.
"""
from __future__ import annotations

import mmap
import os
import re
import struct
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Iterator, Literal, Union

MARKET_DATA, ORDER = 2, 1
QUOTE_LEN, ORDER_LEN = 42, 53
FRAME_LEN = {MARKET_DATA: QUOTE_LEN, ORDER: ORDER_LEN}
TYPE_NAME = {MARKET_DATA: "market data", ORDER: "order"}
SYMBOL_WIDTH = 4
# A declared length beyond this cannot be a Wallaroo frame: the prefix is garbage, not a frame.
MAX_PLAUSIBLE_FRAME = 4096

_FIX_TIME = re.compile(rb"(\d{4})(\d{2})(\d{2})-(\d{2}):(\d{2}):(\d{2})(?:\.(\d{3}))?", re.ASCII)
_FIX_NUMBER = re.compile(rb"[+-]?(?:\d+(?:\.\d*)?|\.\d+)", re.ASCII)
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
    message: Union[Quote, Order]


@dataclass(frozen=True)
class DecodeError:
    path: str
    offset: int
    kind: str  # truncated, zero_length, wrong_type, wrong_length, garbage, bad_field, not_fix
    detail: str

    def __str__(self) -> str:
        return f"{self.path}:{self.offset}: {self.kind}: {self.detail}"


class StrictDecodeError(Exception):
    """Raised in strict mode at the first error."""

    def __init__(self, error: DecodeError):
        super().__init__(str(error))
        self.error = error


class FieldError(ValueError):
    """One field of an otherwise well-framed message does not decode."""


Item = Union[Record, DecodeError]


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


# --- fixish ------------------------------------------------------------------------------------


def _decode_quote_payload(p: bytes) -> Quote:
    bid, offer = struct.unpack_from(">dd", p, 26)
    return Quote(
        symbol=_ascii_field(p[1:5], "symbol"),
        transact_time=fix_time_to_iso(p[5:26]),
        bid=_finite(bid, "bid"),
        offer=_finite(offer, "offer"),
    )


def _decode_order_payload(p: bytes) -> Order:
    (account,) = struct.unpack_from(">I", p, 2)
    qty, price = struct.unpack_from(">dd", p, 16)
    return Order(
        side=_side(p[1]),
        account=account,
        order_id=_ascii_field(p[6:12], "order id"),
        symbol=_ascii_field(p[12:16], "symbol"),
        qty=_finite(qty, "qty"),
        price=_finite(price, "price"),
        transact_time=fix_time_to_iso(p[32:53]),
    )


def _plausible_frame(data, at: int, allow_cut: bool = False) -> bool:
    """True when a well-formed quote or order frame starts at `at` (or, with `allow_cut`, the
    header of one cut short by the end of the file)."""
    if at + 5 > len(data):
        return False
    (length,) = struct.unpack_from(">I", data, at)
    kind = data[at + 4]
    if FRAME_LEN.get(kind) != length:
        return False
    if at + 4 + length > len(data):
        return allow_cut
    time_at = at + 4 + (5 if kind == MARKET_DATA else 32)
    return _FIX_TIME.fullmatch(data[time_at : time_at + 21]) is not None


def _next_plausible(data, start: int) -> int | None:
    """The first offset >= start where a plausible frame begins (a resynchronisation point)."""
    best = None
    for kind, length in FRAME_LEN.items():
        header = struct.pack(">IB", length, kind)
        at = start
        while (at := data.find(header, at)) != -1 and (best is None or at < best):
            if _plausible_frame(data, at, allow_cut=True):
                best = at
                break
            at += 1
    return best


def _on_boundary(data, at: int, hops: int = 8) -> bool:
    """True when following length prefixes from `at` reaches the end of the file or a good frame
    within a few hops: then the frame that ended at `at` had a trustworthy length."""
    size = len(data)
    for _ in range(hops):
        if at == size or _plausible_frame(data, at, allow_cut=True):
            return True
        if size - at < 4:
            return True  # a cut length prefix: reported as truncated
        (length,) = struct.unpack_from(">I", data, at)
        if length > MAX_PLAUSIBLE_FRAME:
            return False
        at += 4 + length
        if at > size:
            return True  # a cut frame: reported as truncated
    return False


def decode_fixish(data, path: str = "<bytes>", expect: Kind | None = None) -> Iterator[Item]:
    """Decode a buffer of fixish frames. `expect` makes frames of the other type `wrong_type`."""
    size, at, position = len(data), 0, 0
    expected_type = {"quote": MARKET_DATA, "order": ORDER, None: None}[expect]

    def garbage_from(start: int) -> Iterator[Item]:
        nonlocal at
        nxt = _next_plausible(data, start + 1)
        end = size if nxt is None else nxt
        where = "the end of the file" if nxt is None else f"the next frame at offset {nxt}"
        yield DecodeError(path, start, "garbage", f"{end - start} bytes skipped up to {where}")
        at = end

    while at < size:
        if size - at < 4:
            yield DecodeError(path, at, "truncated", f"length prefix needs 4 bytes, {size - at} left")
            return
        (length,) = struct.unpack_from(">I", data, at)
        if length == 0:
            yield DecodeError(path, at, "zero_length", "frame of length 0")
            at, position = at + 4, position + 1
            continue
        end = at + 4 + length
        if end > size:
            if length <= MAX_PLAUSIBLE_FRAME and _next_plausible(data, at + 1) is None:
                yield DecodeError(
                    path, at, "truncated", f"frame declares {length} payload bytes, {size - at - 4} left"
                )
                return
            yield from garbage_from(at)
            continue
        kind = data[at + 4]
        want = FRAME_LEN.get(kind)
        if want is None or want != length or (expected_type is not None and kind != expected_type):
            # A frame that does not decode is skipped by its length only when that length leads
            # to the end of the file or to another good frame; otherwise the length is suspect.
            if not _on_boundary(data, end):
                yield from garbage_from(at)
                continue
            if want is None:
                error = DecodeError(path, at, "wrong_type", f"unknown message type {kind} ({length}-byte frame)")
            elif want != length:
                error = DecodeError(
                    path, at, "wrong_length", f"{TYPE_NAME[kind]} frame of {length} bytes, expected {want}"
                )
            else:
                error = DecodeError(
                    path, at, "wrong_type",
                    f"message type {kind} ({TYPE_NAME[kind]}) where {TYPE_NAME[expected_type]} frames are expected",
                )
            yield error
            at, position = end, position + 1
            continue
        payload = bytes(data[at + 4 : end])
        try:
            message = _decode_quote_payload(payload) if kind == MARKET_DATA else _decode_order_payload(payload)
        except FieldError as exc:
            yield DecodeError(path, at, "bad_field", str(exc))
        else:
            yield Record(position, at, message)
        at, position = end, position + 1


# --- FIX text ----------------------------------------------------------------------------------


def _tag(fields: dict[bytes, bytes], tag: bytes, name: str) -> bytes:
    value = fields.get(tag)
    if value is None or value == b"":
        raise FieldError(f"missing tag {tag.decode()} ({name})")
    return value


def _fix_number(fields: dict[bytes, bytes], tag: bytes, name: str) -> float:
    raw = _tag(fields, tag, name)
    if not _FIX_NUMBER.fullmatch(raw):
        raise FieldError(f"{name} (tag {tag.decode()}) is not a number {raw!r}")
    return _finite(float(raw), name)


def _fix_symbol(fields: dict[bytes, bytes]) -> str:
    # Wallaroo's symbol field is 4 characters wide: GOOGL becomes GOOG, as in its fixish files.
    return _ascii_field(_tag(fields, b"55", "symbol")[:SYMBOL_WIDTH], "symbol", pad=b" ")


def _fix_account(raw: bytes) -> int:
    m = re.fullmatch(rb"[A-Za-z_]*(\d+)", raw)  # Wallaroo's demo accounts read "CLIENT57"
    if not m or int(m.group(1)) > 0xFFFFFFFF:
        raise FieldError(f"account (tag 1) has no 32-bit account number {raw!r}")
    return int(m.group(1))


class _NotFix(FieldError):
    """The line is not a FIX message at all."""


class _WrongType(FieldError):
    """A FIX message of a type other than S (quote) or D (order)."""

    def __init__(self, msg_type: bytes):
        super().__init__(f"message type 35={msg_type.decode('ascii', 'replace')}")
        self.msg_type = msg_type


def parse_fix_line(line: bytes) -> Union[Quote, Order]:
    """One FIX 4.2 message (optionally in double quotes) -> Quote (35=S) or Order (35=D)."""
    body = line.strip(b" \t\r").removeprefix(b"\xef\xbb\xbf")
    if len(body) >= 2 and body[:1] == b'"' and body[-1:] == b'"':
        body = body[1:-1]
    if not body.startswith(b"8=FIX"):
        raise _NotFix("not a FIX message (no 8=FIX begin string)")
    fields: dict[bytes, bytes] = {}
    for part in body.split(b"\x01"):
        if part:
            tag, sep, value = part.partition(b"=")
            if not sep or not tag.isdigit():
                raise FieldError(f"malformed field {part[:40]!r}")
            fields[tag] = value
    msg_type = _tag(fields, b"35", "MsgType")
    if msg_type == b"S":
        return Quote(
            symbol=_fix_symbol(fields),
            transact_time=fix_time_to_iso(_tag(fields, b"60", "TransactTime")),
            bid=_fix_number(fields, b"132", "bid"),
            offer=_fix_number(fields, b"133", "offer"),
        )
    if msg_type == b"D":
        side = _tag(fields, b"54", "side")
        if not side.isdigit():
            raise FieldError(f"side {side!r} is neither 1 (buy) nor 2 (sell)")
        return Order(
            side=_side(int(side)),
            account=_fix_account(_tag(fields, b"1", "account")),
            order_id=_ascii_field(_tag(fields, b"11", "ClOrdID"), "order id", pad=b" "),
            symbol=_fix_symbol(fields),
            qty=_fix_number(fields, b"38", "qty"),
            price=_fix_number(fields, b"44", "price"),
            transact_time=fix_time_to_iso(_tag(fields, b"60", "TransactTime")),
        )
    raise _WrongType(msg_type)


def decode_fix_text(data, path: str = "<bytes>", expect: Kind | None = None) -> Iterator[Item]:
    """Decode FIX text, one message per line; blank lines are skipped and not counted."""
    at, position, size = 0, 0, len(data)
    while at < size:
        nl = data.find(b"\n", at)
        end = size if nl == -1 else nl
        line = bytes(data[at:end])
        if line.strip():
            try:
                message = parse_fix_line(line)
            except _WrongType as exc:
                yield DecodeError(path, at, "wrong_type", f"{exc}: neither a quote (S) nor an order (D)")
            except _NotFix as exc:
                yield DecodeError(path, at, "not_fix", str(exc))
            except FieldError as exc:
                yield DecodeError(path, at, "bad_field", str(exc))
            else:
                kind = "quote" if isinstance(message, Quote) else "order"
                if expect is not None and kind != expect:
                    tag = "S" if kind == "quote" else "D"
                    yield DecodeError(path, at, "wrong_type", f"{kind} message (35={tag}) where {expect}s are expected")
                else:
                    yield Record(position, at, message)
            position += 1
        at = end + 1


# --- files -------------------------------------------------------------------------------------


def detect_format(head: bytes) -> Literal["fix", "fixish"]:
    """FIX text starts (after blanks, a BOM or a quote) with the 8=FIX begin string."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lstrip(b'"')
    return "fix" if text.startswith(b"8=FIX") else "fixish"


def decode_file(path: str | Path, expect: Kind | None = None, strict: bool = False) -> Iterator[Item]:
    """Decode one file of either format (detected from its first bytes), in file order."""
    path = Path(path)
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return  # mmap cannot map an empty file
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            decoder = decode_fix_text if detect_format(data[:64]) == "fix" else decode_fixish
            for item in decoder(data, str(path), expect):
                if strict and isinstance(item, DecodeError):
                    raise StrictDecodeError(item)
                yield item

"""Decoder of FIX 4.2 text, as in Wallaroo's demo files.

One message per line, tag=value fields separated by SOH (0x01); Wallaroo's demo files wrap each line
in double quotes. Tags used: 35 MsgType (S = quote, D = order), 55 Symbol, 60 TransactTime, 132 BidPx,
133 OfferPx, 54 Side, 1 Account ("CLIENT57" -> 57), 11 ClOrdID, 38 OrderQty, 44 Price. Values are
read as binary doubles, as Wallaroo did, so a FIX text file and its fixish conversion give the same
records; symbols are cut to Wallaroo's 4-character field.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from market_spread.domain.wallaroo_records import (
    DecodeError,
    FieldError,
    Item,
    Kind,
    Order,
    Quote,
    Record,
    _ascii_field,
    _finite,
    _side,
    fix_time_to_iso,
)

SYMBOL_WIDTH = 4
_FIX_NUMBER = re.compile(rb"[+-]?(?:\d+(?:\.\d*)?|\.\d+)", re.ASCII)


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


def parse_fix_line(line: bytes) -> Quote | Order:
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

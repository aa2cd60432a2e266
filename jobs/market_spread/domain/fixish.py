"""Decoder of Wallaroo's binary "fixish" frames.

Every frame is a 4-byte big-endian length and that many payload bytes; market data (type 2) is 42
bytes, an order (type 1) 53 bytes (layouts: the README of Wallaroo's Market Spread test data, and
docs/architecture.md, Coming from Wallaroo). A frame that does not decode is reported and skipped;
garbage is skipped up to the next plausible frame.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from market_spread.domain.wallaroo_records import (
    _FIX_TIME,
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

MARKET_DATA, ORDER = 2, 1
QUOTE_LEN, ORDER_LEN = 42, 53
FRAME_LEN = {MARKET_DATA: QUOTE_LEN, ORDER: ORDER_LEN}
TYPE_NAME = {MARKET_DATA: "market data", ORDER: "order"}
# A declared length beyond this cannot be a Wallaroo frame: the prefix is garbage, not a frame.
MAX_PLAUSIBLE_FRAME = 4096


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
                yield DecodeError(path, at, "truncated", f"frame declares {length} payload bytes, {size - at - 4} left")
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
            yield _frame_error(path, at, kind, length, expected_type)
            at, position = end, position + 1
            continue
        yield _decoded(bytes(data[at + 4 : end]), kind, path, at, position)
        at, position = end, position + 1


def _frame_error(path: str, at: int, kind: int, length: int, expected_type: int | None) -> DecodeError:
    """Why a frame skipped by its length does not decode: its type, its length, or the other feed's."""
    want = FRAME_LEN.get(kind)
    if want is None:
        return DecodeError(path, at, "wrong_type", f"unknown message type {kind} ({length}-byte frame)")
    if want != length:
        return DecodeError(path, at, "wrong_length", f"{TYPE_NAME[kind]} frame of {length} bytes, expected {want}")
    assert expected_type is not None  # a known type of the right length: only the other feed's is refused
    return DecodeError(
        path,
        at,
        "wrong_type",
        f"message type {kind} ({TYPE_NAME[kind]}) where {TYPE_NAME[expected_type]} frames are expected",
    )


def _decoded(payload: bytes, kind: int, path: str, at: int, position: int) -> Item:
    """A well-framed quote or order: its record, or the field that does not decode."""
    try:
        message = _decode_quote_payload(payload) if kind == MARKET_DATA else _decode_order_payload(payload)
    except FieldError as exc:
        return DecodeError(path, at, "bad_field", str(exc))
    return Record(position, at, message)

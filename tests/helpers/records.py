"""Feed lines as producers write them, prices as exact JSON numbers (never through a float), and
bad lines by the quarantine reason they must get."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

T = "2026-11-23T14:30:0{}.000Z"  # T.format(n): n seconds into the scenarios' minute
T0 = datetime(2026, 11, 23, 14, 30, tzinfo=UTC)


def at(seconds: float) -> str:
    """The transact_time `seconds` after T0, in milliseconds."""
    return (T0 + timedelta(seconds=seconds)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _time(t: str | float) -> str:
    return t if isinstance(t, str) else at(t)


def quote(symbol: str, t: str | float, bid: str, offer: str, seq: int | None = None) -> str:
    """A quote line; `t` is a transact_time, or seconds after T0."""
    seq_part = f', "seq": {seq}' if seq is not None else ""
    return f'{{"symbol": "{symbol}", "transact_time": "{_time(t)}", "bid": {bid}, "offer": {offer}{seq_part}}}'


def order(
    order_id: str,
    symbol: str,
    t: str | float,
    side: str = "BUY",
    qty: str = "100",
    price: str = "1.00",
    account: int = 7,
    seq: int | None = None,
) -> str:
    """An order line; `t` is a transact_time, or seconds after T0."""
    seq_part = f', "seq": {seq}' if seq is not None else ""
    return (
        f'{{"order_id": "{order_id}", "account": {account}, "symbol": "{symbol}", "side": "{side}", '
        f'"qty": {qty}, "price": {price}, "transact_time": "{_time(t)}"{seq_part}}}'
    )


# Every kind of bad line, by the reason the quarantine must give it (contract 5.5).
BAD_QUOTES = {
    "not_json_object": ["not json", "[1, 2]", "42", '{"symbol": "AAPL"', '"just a string"'],
    "missing_field:symbol": ['{"transact_time": "2026-11-23T14:30:00Z", "bid": 1, "offer": 2}', "{}"],
    "missing_field:bid": ['{"symbol": "AAPL", "transact_time": "2026-11-23T14:30:00Z", "offer": 2}'],
    "wrong_type:bid": [
        '{"symbol": "AAPL", "transact_time": "2026-11-23T14:30:00Z", "bid": true, "offer": 2}',
        '{"symbol": "AAPL", "transact_time": "2026-11-23T14:30:00Z", "bid": [1], "offer": 2}',
    ],
    "wrong_type:seq": ['{"symbol": "AAPL", "transact_time": "2026-11-23T14:30:00Z", "bid": 1, "offer": 2, "seq": 1.5}'],
    "non_positive:offer": [
        '{"symbol": "AAPL", "transact_time": "2026-11-23T14:30:00Z", "bid": 1, "offer": 0}',
        '{"symbol": "AAPL", "transact_time": "2026-11-23T14:30:00Z", "bid": 1, "offer": -2}',
    ],
    "non_finite:bid": [
        '{"symbol": "AAPL", "transact_time": "2026-11-23T14:30:00Z", "bid": NaN, "offer": 2}',
        '{"symbol": "AAPL", "transact_time": "2026-11-23T14:30:00Z", "bid": Infinity, "offer": 2}',
    ],
    "out_of_range:bid": ['{"symbol": "AAPL", "transact_time": "2026-11-23T14:30:00Z", "bid": 12345678901, "offer": 2}'],
    "bad_time": [
        '{"symbol": "AAPL", "transact_time": "2026-11-23 14:30:00", "bid": 1, "offer": 2}',
        '{"symbol": "AAPL", "transact_time": "2026-11-23T14:30:00", "bid": 1, "offer": 2}',
        '{"symbol": "AAPL", "transact_time": "2026-02-30T14:30:00Z", "bid": 1, "offer": 2}',
        '{"symbol": "AAPL", "transact_time": 1700000000, "bid": 1, "offer": 2}',
    ],
    "unknown_symbol": [
        '{"symbol": "aapl", "transact_time": "2026-11-23T14:30:00Z", "bid": 1, "offer": 2}',
        '{"symbol": "ZZZZ", "transact_time": "2026-11-23T14:30:00Z", "bid": 1, "offer": 2}',
    ],
}
BAD_ORDERS = {
    "unknown_side": [order("x", "AAPL", T.format(1), side="HOLD"), order("y", "AAPL", T.format(1), side="buy")],
    "non_positive:qty": [order("z", "AAPL", T.format(1), qty="0")],
    "wrong_type:account": [order("w", "AAPL", T.format(1)).replace('"account": 7', '"account": "seven"')],
    "missing_field:order_id": [order("", "AAPL", T.format(1))],
}


def bad_lines(rng: random.Random, n: int, tag: str) -> list[str]:
    """Lines that must go to quarantine, each one different (so a doubled row can be told apart)."""
    kinds = [
        lambda i: f"not json {tag} {i}",
        lambda i: (
            f'{{"symbol": "NOPE", "transact_time": "2026-11-23T14:30:00Z", "bid": 1, "offer": 2, "seq": {i}, "t": "{tag}"}}'
        ),
        lambda i: f'{{"symbol": "AAPL", "transact_time": "yesterday {tag} {i}", "bid": 1, "offer": 2}}',
        lambda i: f'[{i}, "{tag}"]',
    ]
    return [rng.choice(kinds)(i) for i in range(n)]

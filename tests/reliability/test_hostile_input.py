"""Hostile input: the stream survives every kind of bad line, and every non-blank line ends up in
exactly one place (valid quote, valid order or quarantine), line for line as the reference decides."""

from __future__ import annotations

import json
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from market_spread_tools import reference
from tests.helpers.lake import metrics_totals, rows, stream
from tests.helpers.landing import land
from tests.helpers.symbols import SYMBOLS

GOOD_QUOTE = {"symbol": "AAPL", "transact_time": "2026-11-23T14:30:00.123Z", "bid": 189.12, "offer": 189.14, "seq": 1}
GOOD_ORDER = {
    "order_id": "O-1",
    "account": 7,
    "symbol": "AAPL",
    "side": "BUY",
    "qty": 100,
    "price": 189.13,
    "transact_time": "2026-11-23T14:30:00.200Z",
    "seq": 2,
}
WRONG_VALUES = [None, True, False, "", "x", "189.12", [1], {"a": 1}, 0, -1, 1.5, 10**40, "2026-11-23", 1e308, -0.0]


def hand_made(big_line_bytes: int) -> dict[str, list[bytes]]:
    q = json.dumps(GOOD_QUOTE)
    o = json.dumps(GOOD_ORDER)
    quotes = [
        q.encode(),
        q[:-5].encode(),
        b"\xff\xfe\x00garbage",
        q.replace("AAPL", "AA\x00PL").encode(),
        b'{"symbol": "AAPL", "transact_time": "2026-11-23T14:30:00Z", "bid": 1, "offer": 2, "x": "'
        + b"y" * big_line_bytes
        + b'"}',
        b"[1,2,3]",
        b"42",
        b'"str"',
        b"null",
        b"true",
        b"{}",
        b"{,}",
        b"\xef\xbb\xbf" + q.encode(),
        b'{"symbol": "AAPL", "transact_time": "2026-11-23T14:30:00Z", "bid": 1e-9, "offer": 2}',
        b'{"symbol": "AAPL", "transact_time": "2026-11-23T14:30:00Z", "bid": 1234567890123456789012345678901234567890, "offer": 2}',
        b'{"symbol": "AAPL", "transact_time": "2026-11-23T14:30:00Z", "bid": 1.2345678901234567890123456789012345678901, "offer": 2}',
        b'{"symbol": "AAPL", "transact_time": "2026-11-23T14:30:00Z", "bid": 1, "bid": 2, "offer": 3}',
        b'{"symbol": "AAPL", "transact_time": "2026-11-23T14:30:00", "bid": 1, "offer": 2}',
        b'{"symbol": "AAPL", "transact_time": "99999-11-23T14:30:00Z", "bid": 1, "offer": 2}',
        b'{"symbol": "AAPL", "transact_time": "0000-01-01T00:00:00Z", "bid": 1, "offer": 2}',
        b'{"symbol": "AAPL", "transact_time": "2026-11-23T25:30:00Z", "bid": 1, "offer": 2}',
        b'{"symbol": "aapl", "transact_time": "2026-11-23T14:30:00Z", "bid": 1, "offer": 2}',
        b'{"symbol": "AA PL", "transact_time": "2026-11-23T14:30:00Z", "bid": 1, "offer": 2}',
        b'{"symbol": " AAPL", "transact_time": "2026-11-23T14:30:00Z", "bid": 1, "offer": 2}',
        b"",
        b"   ",
        b"\t",
    ]
    for field in GOOD_QUOTE:
        for value in WRONG_VALUES:
            quotes.append(json.dumps({**GOOD_QUOTE, field: value}).encode())
    orders = [o.encode(), o.replace("BUY", "buy").encode(), o.replace("BUY", "HOLD").encode()]
    for field in GOOD_ORDER:
        for value in WRONG_VALUES:
            orders.append(json.dumps({**GOOD_ORDER, field: value}).encode())
        orders.append(json.dumps({k: v for k, v in GOOD_ORDER.items() if k != field}).encode())
    return {"quotes": quotes, "orders": orders}


def _check_conservation(spark, landing, lake) -> None:
    expected = reference.run_reference_landing(landing, SYMBOLS)
    totals = metrics_totals(spark, lake)
    nonblank = expected.quotes + expected.orders + len(expected.quarantined)
    assert totals["quotes"] + totals["orders"] + totals["quarantined"] == nonblank
    assert (totals["quotes"], totals["orders"], totals["quarantined"]) == (
        expected.quotes,
        expected.orders,
        len(expected.quarantined),
    )
    assert len(rows(spark, lake, "quotes")) == expected.quotes
    assert len(rows(spark, lake, "quarantine")) == len(expected.quarantined)
    got_raw = sorted(r["raw"] for r in rows(spark, lake, "quarantine"))
    assert got_raw == sorted(raw for _, raw, _ in expected.quarantined)


def test_hand_made_hostile_lines_are_accounted_for(spark, tmp_path):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    feeds = hand_made(big_line_bytes=2_000_000)
    for feed, lines in feeds.items():
        land(landing, feed, lines, name="hostile.jsonl")
        land(landing, feed, [b""], name="empty.jsonl")  # nothing but one line break
        (landing / feed / "truncated.jsonl").write_bytes(lines[0][: len(lines[0]) // 2])  # no newline at the end
    assert stream(spark, landing, lake) == 0
    _check_conservation(spark, landing, lake)
    quarantine = rows(spark, lake, "quarantine")
    # Read by delta-rs (rows): bytes that are not UTF-8 are stored as U+FFFD, as Arrow readers need.
    assert "\ufffd\ufffd\x00garbage" in {r["raw"] for r in quarantine}
    reasons = {r["reason"] for r in quarantine}
    for expected in ("not_json_object", "unknown_symbol", "bad_time", "unknown_side", "wrong_type:bid"):
        assert expected in reasons


def _mutate(rng: random.Random, record: dict) -> str:
    record = dict(record)
    action = rng.randrange(6)
    key = rng.choice(list(record))
    if action == 0:
        record.pop(key)
    elif action == 1:
        record[key] = rng.choice(WRONG_VALUES)
    elif action == 2:
        record["extra"] = rng.random()
    text = json.dumps(record)
    if action == 3:
        cut = rng.randrange(len(text))
        text = text[:cut]
    elif action == 4:
        text = text.replace(":", ": ", rng.randrange(3))
    return text


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(min_value=0, max_value=2**32))
def test_property_mutated_records_are_accounted_for(spark, tmp_path_factory, seed):
    rng = random.Random(seed)
    root = tmp_path_factory.mktemp("hostile")
    landing, lake = root / "landing", root / "lake"
    quotes = [_mutate(rng, GOOD_QUOTE).encode() for _ in range(300)]
    orders = [_mutate(rng, GOOD_ORDER).encode() for _ in range(300)]
    land(landing, "quotes", quotes, name="m.jsonl")
    land(landing, "orders", orders, name="m.jsonl")
    assert stream(spark, landing, lake) == 0
    _check_conservation(spark, landing, lake)

"""The event-at-a-time reference ("oracle") on small hand-written landing files."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from market_spread.cli.main import main
from market_spread_tools.reference import (
    landing_files,
    parse_line,
    quote_key,
    run_reference,
    run_reference_landing,
    should_reject,
)
from tests.helpers.landing import land
from tests.helpers.records import T0, order, quote

SYMBOLS = ["AAPL", "MSFT", "IBM"]


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    return tmp_path / "landing"


def reasons(result) -> list[tuple[str, str | None]]:
    return [(a["order_id"], a["reason"]) for a in result.alerts]


WIDE, NARROW = ("1.00", "2.00"), ("1.00", "1.01")


# --- which quote an order is checked against ---------------------------------------------------


def test_as_of_within_one_batch(landing: Path) -> None:
    q = land(landing, "quotes", [quote("AAPL", 1, *WIDE), quote("AAPL", 3, *NARROW)])
    o = land(
        landing,
        "orders",
        [
            order("early", "AAPL", 0),
            order("between", "AAPL", 2),
            order("same-time", "AAPL", 3),
            order("late", "AAPL", 9),
        ],
    )
    result = run_reference([[o, q]], SYMBOLS)  # the order file first: its batch still counts in full
    assert reasons(result) == [("early", "no_market_data"), ("between", "wide_spread")]
    early, between = result.alerts
    assert early["bid"] is early["offer"] is early["quote_time"] is early["quote_seq"] is None
    assert (between["bid"], between["offer"], between["quote_time"]) == (
        Decimal("1.00000000"),
        Decimal("2.00000000"),
        T0 + timedelta(seconds=1),
    )


def test_late_order_is_checked_against_history_not_state(landing: Path) -> None:
    batch1 = [land(landing, "quotes", [quote("AAPL", 1, *NARROW), quote("AAPL", 5, *WIDE)])]
    batch2 = [land(landing, "orders", [order("late", "AAPL", 3), order("current", "AAPL", 6)])]
    result = run_reference([batch1, batch2], SYMBOLS)
    assert reasons(result) == [("current", "wide_spread")]
    assert result.state["AAPL"]["quote_time"] == T0 + timedelta(seconds=5)


def test_late_quote_does_not_overwrite_state_but_enters_history(landing: Path) -> None:
    batches = [
        [land(landing, "quotes", [quote("AAPL", 5, *NARROW)])],
        [land(landing, "quotes", [quote("AAPL", 3, *WIDE)])],  # older than the state: history only
        [land(landing, "orders", [order("sees-late-quote", "AAPL", 4), order("sees-state", "AAPL", 5)])],
    ]
    result = run_reference(batches, SYMBOLS)
    assert reasons(result) == [("sees-late-quote", "wide_spread")]
    state = result.state["AAPL"]
    assert (state["bid"], state["offer"], state["should_reject_trades"]) == (Decimal("1.00"), Decimal("1.01"), False)


def test_quote_landing_after_the_order_does_not_count(landing: Path) -> None:
    batches = [
        [land(landing, "orders", [order("first", "AAPL", 5)])],
        [land(landing, "quotes", [quote("AAPL", 1, *NARROW)])],
        [land(landing, "orders", [order("second", "AAPL", 5)])],
    ]
    assert reasons(run_reference(batches, SYMBOLS)) == [("first", "no_market_data")]


def test_ties_broken_by_seq_then_bid_then_offer(landing: Path) -> None:
    q = land(
        landing,
        "quotes",
        [
            quote("AAPL", 1, *NARROW, seq=2),
            quote("AAPL", 1, *WIDE, seq=1),  # same time: seq 2 wins
            quote("MSFT", 2, *WIDE),
            quote("MSFT", 2, *NARROW, seq=0),  # any seq beats none
            quote("IBM", 3, "1.00", "1.01"),
            quote("IBM", 3, "1.02", "1.50"),  # higher bid wins
            quote("IBM", 4, "5.00", "5.01"),
            quote("IBM", 4, "5.00", "9.00"),  # then higher offer
        ],
    )
    o = land(
        landing, "orders", [order("a", "AAPL", 1), order("m", "MSFT", 2), order("i3", "IBM", 3), order("i4", "IBM", 4)]
    )
    result = run_reference([[q, o]], SYMBOLS)
    assert reasons(result) == [("i3", "wide_spread"), ("i4", "wide_spread")]
    assert result.alerts[0]["bid"] == Decimal("1.02") and result.alerts[1]["offer"] == Decimal("9.00")
    assert result.state["AAPL"]["seq"] == 2 and result.state["MSFT"]["seq"] == 0
    assert result.state["IBM"]["offer"] == Decimal("9.00")
    # The same quotes in the opposite file order give the same winners (a total order).
    q2 = land(landing, "quotes", list(reversed(q.read_text().splitlines())))
    assert run_reference([[q2, o]], SYMBOLS).alerts == result.alerts


def test_seq_is_not_compared_between_quote_and_order(landing: Path) -> None:
    q = land(landing, "quotes", [quote("AAPL", 1, *WIDE, seq=50)])
    o = land(landing, "orders", [order("same-time-lower-seq", "AAPL", 1, seq=3)])
    assert reasons(run_reference([[q, o]], SYMBOLS)) == [("same-time-lower-seq", "wide_spread")]


def test_no_market_data_and_repeated_order_ids(landing: Path) -> None:
    q = land(landing, "quotes", [quote("AAPL", 1, *WIDE)])
    o = land(
        landing,
        "orders",
        [order("dup", "AAPL", 2), order("dup", "AAPL", 2), order("x", "MSFT", 2), order("dup", "AAPL", 3, side="SELL")],
    )
    result = run_reference([[q, o]], SYMBOLS)
    assert reasons(result) == [
        ("dup", "wide_spread"),
        ("dup", "wide_spread"),
        ("x", "no_market_data"),
        ("dup", "wide_spread"),
    ]
    assert result.orders == 4 and result.quotes == 1


# --- the reject rule on exact decimals ---------------------------------------------------------


@pytest.mark.parametrize(
    "bid, offer, rejects",
    [
        ("1.10", "1.15", True),  # spread 0.05 >= 0.05 (as binary floats: 0.04999...)
        ("0.1", "0.15", True),
        ("0.50", "0.53", True),  # 0.03 >= 0.05 x 0.515 on the ratio
        ("1.00", "1.04", False),  # 0.04 < 0.05 and < 0.051
        ("1.00", "1.00", False),  # locked
        ("1.05", "1.00", False),  # crossed
        ("100", "1", False),  # crossed by a mile
        ("1000", "1001", True),  # Wallaroo's own always-reject quote
        ("1.000000004", "1.050000004", True),  # rounded half-up to 8 places: 1.00000000 / 1.05000000
        ("1.000000005", "1.050000004", False),
    ],  # 1.00000001 / 1.05000000: spread 0.04999999
)
def test_decimal_edges(landing: Path, bid: str, offer: str, rejects: bool) -> None:
    q = land(landing, "quotes", [quote("AAPL", 1, bid, offer)])
    o = land(landing, "orders", [order("O-1", "AAPL", 1)])
    result = run_reference([[q, o]], SYMBOLS)
    assert result.state["AAPL"]["should_reject_trades"] is rejects
    assert reasons(result) == ([("O-1", "wide_spread")] if rejects else [])


def test_thresholds_are_parameters(landing: Path) -> None:
    q = land(landing, "quotes", [quote("AAPL", 1, "1.10", "1.15")])
    o = land(landing, "orders", [order("O-1", "AAPL", 1)])
    assert run_reference([[q, o]], SYMBOLS, Decimal("0.06"), Decimal("0.05")).alerts == []
    assert len(run_reference([[q, o]], SYMBOLS, Decimal("0.06"), Decimal("0.04")).alerts) == 1


def test_alert_values_are_typed(landing: Path) -> None:
    q = land(
        landing,
        "quotes",
        [
            '{"symbol": "AAPL", "transact_time": "2026-11-23T16:30:00.5+02:00", "bid": 1, '
            '"offer": 2.123456789, "seq": 4}'
        ],
    )
    o = land(
        landing,
        "orders",
        [
            '{"order_id": "O-9", "account": 12, "symbol": "AAPL", "side": "SELL", "qty": "1,000", '
            '"price": 1.5, "transact_time": "2026-11-23T14:30:00.500001Z", "seq": 9, "extra": [1]}'
        ],
    )
    (alert,) = run_reference([[q, o]], SYMBOLS).alerts
    assert alert == {
        "order_id": "O-9",
        "account": 12,
        "symbol": "AAPL",
        "side": "SELL",
        "qty": Decimal("1000.00000000"),
        "price": Decimal("1.50000000"),
        "order_time": datetime(2026, 11, 23, 14, 30, 0, 500001, UTC),
        "reason": "wide_spread",
        "bid": Decimal("1.00000000"),
        "offer": Decimal("2.12345679"),
        "quote_time": datetime(2026, 11, 23, 14, 30, 0, 500000, UTC),
        "order_seq": 9,
        "quote_seq": 4,
    }
    for name in ("qty", "price", "bid", "offer"):
        assert alert[name].as_tuple().exponent == -8
    assert alert["order_time"].tzinfo is UTC


# --- bad input: quarantine, conservation -------------------------------------------------------


BAD_QUOTES = [
    ("[1, 2]", "not_json_object"),
    ('{"symbol": "AAPL"', "not_json_object"),
    ('{"transact_time": "2026-11-23T14:30:00Z", "bid": 1, "offer": 2}', "missing_field:symbol"),
    ('{"symbol": "", "transact_time": "2026-11-23T14:30:00Z", "bid": 1, "offer": 2}', "missing_field:symbol"),
    ('{"symbol": "AAPL", "transact_time": "2026-11-23T14:30:00Z", "bid": NaN, "offer": 2}', "non_finite:bid"),
    ('{"symbol": "AAPL", "transact_time": "2026-11-23T14:30:00Z", "bid": 1, "offer": -Infinity}', "non_finite:offer"),
    ('{"symbol": "AAPL", "transact_time": "2026-11-23T14:30:00Z", "bid": 1e10, "offer": 2}', "out_of_range:bid"),
    ('{"symbol": "AAPL", "transact_time": "2026-11-23T14:30:00Z", "bid": true, "offer": 2}', "wrong_type:bid"),
    ('{"symbol": "AAPL", "transact_time": "2026-11-23T14:30:00Z", "bid": "abc", "offer": 2}', "wrong_type:bid"),
    ('{"symbol": "AAPL", "transact_time": "2026-11-23T14:30:00Z", "bid": 0, "offer": 2}', "non_positive:bid"),
    ('{"symbol": "AAPL", "transact_time": "2026-11-23T14:30:00Z", "bid": 0.000000004, "offer": 2}', "non_positive:bid"),
    (
        '{"symbol": "AAPL", "transact_time": "2026-11-23T14:30:00Z", "bid": 1, "offer": 2, "seq": 1.5}',
        "out_of_range:seq",
    ),
    ('{"symbol": "AAPL", "transact_time": "2026-11-23T14:30:00", "bid": 1, "offer": 2}', "bad_time"),
    ('{"symbol": "AAPL", "transact_time": "2026-02-30T14:30:00Z", "bid": 1, "offer": 2}', "bad_time"),
    ('{"symbol": "aapl", "transact_time": "2026-11-23T14:30:00Z", "bid": 1, "offer": 2}', "unknown_symbol"),
]
BAD_ORDERS = [
    (
        '{"order_id": "A", "account": "7", "symbol": "AAPL", "side": "BUY", "qty": 1, "price": 1, '
        '"transact_time": "2026-11-23T14:30:00Z"}',
        "out_of_range:account",
    ),
    (
        '{"order_id": "A", "account": false, "symbol": "AAPL", "side": "BUY", "qty": 1, "price": 1, '
        '"transact_time": "2026-11-23T14:30:00Z"}',
        "wrong_type:account",
    ),
    (
        '{"order_id": "A", "account": 7, "symbol": "AAPL", "side": "buy", "qty": 1, "price": 1, '
        '"transact_time": "2026-11-23T14:30:00Z"}',
        "unknown_side",
    ),
    (
        '{"order_id": "A", "account": 7, "symbol": "AAPL", "side": "BUY", "qty": -1, "price": 1, '
        '"transact_time": "2026-11-23T14:30:00Z"}',
        "non_positive:qty",
    ),
    (
        '{"order_id": "A", "account": 7, "symbol": "AAPL", "side": "BUY", "qty": 1, '
        '"transact_time": "2026-11-23T14:30:00Z"}',
        "missing_field:price",
    ),
]


def test_quarantine_reasons(landing: Path) -> None:
    q = land(landing, "quotes", [line for line, _ in BAD_QUOTES])
    o = land(landing, "orders", [line for line, _ in BAD_ORDERS])
    result = run_reference([[q, o]], SYMBOLS)
    expected = [("quotes", line, r) for line, r in BAD_QUOTES] + [("orders", line, r) for line, r in BAD_ORDERS]
    assert result.quarantined == expected
    assert result.quotes == result.orders == 0 and result.alerts == []


def test_every_nonblank_line_lands_in_exactly_one_place(landing: Path, tmp_path: Path) -> None:
    land(
        landing,
        "quotes",
        [quote("AAPL", 1, *WIDE), "", "   ", "\t", *(line for line, _ in BAD_QUOTES), quote("AAPL", 2, *NARROW)],
    )
    land(landing, "orders", [order("O-1", "AAPL", 1), "", *(line for line, _ in BAD_ORDERS), order("O-1", "AAPL", 3)])
    raw = tmp_path / "landing" / "quotes" / "raw.jsonl"  # BOM, CRLF, a lone CR, bad UTF-8, no final newline
    raw.write_bytes(
        b"\xef\xbb\xbf"
        + quote("AAPL", 3, *NARROW).encode()
        + b"\r\n"
        + b'{"symbol": "\xff"}\r'
        + quote("AAPL", 4, *WIDE).encode()
    )
    result = run_reference_landing(tmp_path / "landing", SYMBOLS)
    nonblank = len(BAD_QUOTES) + len(BAD_ORDERS) + 4 + 3
    assert result.quotes + result.orders + len(result.quarantined) == nonblank
    assert (result.quotes, result.orders) == (4, 2)
    assert ("quotes", '{"symbol": "\ufffd"}', "missing_field:transact_time") in result.quarantined


def test_landing_reads_both_folders_and_skips_hidden_files(landing: Path, tmp_path: Path) -> None:
    land(landing, "quotes", [quote("AAPL", 1, *WIDE)], name="f-0001.jsonl")
    land(landing, "orders", [order("O-1", "AAPL", 2)], name="f-0002.jsonl")
    (tmp_path / "landing" / "orders" / ".f-9999.jsonl.tmp").write_text(order("hidden", "AAPL", 2) + "\n")
    (tmp_path / "landing" / "orders" / ".hidden.jsonl").write_text(order("hidden", "AAPL", 2) + "\n")
    assert [p.name for p in landing_files(tmp_path / "landing")] == ["f-0001.jsonl", "f-0002.jsonl"]
    assert reasons(run_reference_landing(tmp_path / "landing", SYMBOLS)) == [("O-1", "wide_spread")]
    with pytest.raises(ValueError, match="not under quotes/ or orders/"):
        run_reference([[tmp_path / "landing" / "orders" / ".hidden.jsonl", tmp_path / "x.jsonl"]], SYMBOLS)


def test_parse_line_accepts_what_sparks_json_reader_accepts() -> None:
    """Single quotes, a numeric string, text after the object, a number as order id: as Spark reads them."""
    universe = set(SYMBOLS)
    rec, reason = parse_line(
        "quotes", "{'symbol': 'AAPL', 'transact_time': '2026-11-23T14:30:00Z', 'bid': '1.5', 'offer': 2} }", universe
    )
    assert reason is None and rec["bid"] == Decimal("1.5")
    rec, reason = parse_line(
        "orders",
        '{"order_id": 5, "account": 7, "symbol": "AAPL", "side": "BUY", "qty": 1, '
        '"price": 1, "transact_time": "2026-11-23T14:30:00Z"}',
        universe,
    )
    assert reason is None and rec["order_id"] == "5"
    assert parse_line("quotes", "{'symbol': 'AAPL'", universe) == (None, "not_json_object")


# --- replayed Wallaroo data --------------------------------------------------------------------


def test_wallaroo_small_demo(wallaroo_dir: Path, tmp_path: Path, capsys) -> None:
    """Wallaroo's small demo: BTU's 83.48/84.48 market is wide, so BTU's order is rejected."""
    demo = wallaroo_dir / "history/demos/marketspread"
    assert (
        main(
            [
                "replay",
                "--landing",
                str(tmp_path),
                "--nbbo",
                str(demo / "small-nbbo.msg"),
                "--orders",
                str(demo / "small-trades.msg"),
            ]
        )
        == 0
    )
    symbols = [json.loads(line)["symbol"] for p in landing_files(tmp_path) for line in p.read_text().splitlines()]
    result = run_reference_landing(tmp_path, symbols)
    assert (result.quotes, result.orders, result.quarantined) == (3, 3, [])
    assert reasons(result) == [("HMtWvd", "wide_spread")]
    assert result.alerts[0]["bid"] == Decimal("83.48") and result.alerts[0]["account"] == 57


# --- property: the oracle against the definition ----------------------------------------------


def brute_force(batches: list[list[tuple]], max_spread=Decimal("0.05"), ratio=Decimal("0.05")) -> list[tuple]:
    """The contract read literally: O(quotes x orders), no sorting, no state."""
    alerts = []
    for b, batch in enumerate(batches):
        for kind, *event in batch:
            if kind != "order":
                continue
            oid, sym, t = event
            seen = [q for bb in batches[: b + 1] for k, *q in bb if k == "quote" and q[0] == sym and q[1] <= t]
            best = max(seen, key=lambda q: quote_key(q[1], q[2], q[3], q[4]), default=None)
            if best is None:
                alerts.append((oid, "no_market_data", None))
            elif should_reject(best[3], best[4], max_spread, ratio):
                alerts.append((oid, "wide_spread", (best[3], best[4])))
    return alerts


event = st.one_of(
    st.tuples(
        st.just("quote"),
        st.sampled_from(["AAPL", "MSFT"]),
        st.integers(0, 5),
        st.none() | st.integers(0, 3),
        st.sampled_from(["1.00", "1.10", "0.50"]),
        st.sampled_from(["1.00", "1.04", "1.15", "0.53"]),
    ),
    st.tuples(st.just("order"), st.sampled_from(["O1", "O2"]), st.sampled_from(["AAPL", "MSFT"]), st.integers(0, 5)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(event, max_size=8), min_size=1, max_size=4))
def test_reference_matches_the_definition(tmp_path_factory, batches) -> None:
    root = tmp_path_factory.mktemp("prop")
    files, typed = [], []
    for batch in batches:
        qs = [quote(e[1], e[2], e[4], e[5], seq=e[3]) for e in batch if e[0] == "quote"]
        os_ = [order(e[1], e[2], e[3]) for e in batch if e[0] == "order"]
        files.append([land(root, "orders", os_), land(root, "quotes", qs)])
        typed.append(
            [
                ("quote", e[1], T0 + timedelta(seconds=e[2]), e[3], Decimal(e[4]), Decimal(e[5]))
                if e[0] == "quote"
                else ("order", e[1], e[2], T0 + timedelta(seconds=e[3]))
                for e in batch
            ]
        )
    result = run_reference(files, SYMBOLS)
    got = [(a["order_id"], a["reason"], None if a["bid"] is None else (a["bid"], a["offer"])) for a in result.alerts]
    assert got == brute_force(typed)
    # One batch holding everything gives the state as the max key of all quotes.
    for sym, st_ in result.state.items():
        best = max(
            (q for b in typed for k, *q in b if k == "quote" and q[0] == sym),
            key=lambda q: quote_key(q[1], q[2], q[3], q[4]),
        )
        assert (st_["quote_time"], st_["seq"], st_["bid"], st_["offer"]) == tuple(best[1:])

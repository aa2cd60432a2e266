"""The driver's columns against plain-Python statements of the same things: kernel.layout
takes a line only with the values kernel.certain_lines gives it, and kernel.line_rows gives the
same columns (kernel.lenient_json's values for a line certain_lines leaves open); kernel.columns'
as-of choice and newest quote follow the reference engine's quote key, its reject rule is the
reference's should_reject (exact at the thresholds)."""

from __future__ import annotations

import random
from decimal import Decimal

import pyarrow as pa
import pytest

from market_spread.domain.rules import Thresholds
from market_spread.kernel import columns
from market_spread.kernel import layout as dc
from market_spread.kernel import line_rows as driver_rows
from market_spread.kernel.certain_lines import Order, Quote, parse_order, parse_quote
from market_spread.kernel.lenient_json import judge
from market_spread_tools.reference import quote_key, should_reject
from tests.helpers.records import order, quote

UNIVERSE = frozenset({"AAPL", "MSFT", "IBM"})
T = "2026-11-23T14:30:00"

QUOTE_LINES = [
    quote("AAPL", f"{T}.002Z", "100.00", "100.01", seq=1),
    quote("AAPL", f"{T}Z", "7", "7.5"),
    quote("MSFT", f"{T}.123456Z", "0.00000001", "9999999999.99999999", seq=-5),
    '{"symbol":"AAPL","transact_time":"' + T + 'Z","bid":1.5,"offer":1.6,"seq":null}',  # no spaces, seq null
    quote("AAPL", f"{T}+01:00", "1", "2"),  # an offset: certain_lines' alone
    '{"transact_time": "' + T + 'Z", "symbol": "AAPL", "bid": 1, "offer": 2}',  # another key order
    quote("AAPL", f"{T}Z", "0", "2"),  # zero: not a price
    quote("AAPL", f"{T}Z", "1e2", "2"),
    quote("AAPL", f"{T}Z", "1.123456789", "2"),  # 9 fractional digits
    quote("AAPL", f"{T}Z", "01.5", "2"),  # not JSON
    quote("AAPL", f"{T}Z", "10000000000", "2"),  # 1e10
    quote("AAPL", "2026-02-30T14:30:00Z", "1", "2"),
    quote("AAPL", "2026-11-23T24:00:00Z", "1", "2"),
    quote("AAPL", "2026-11-23T14:60:00Z", "1", "2"),
    quote("AAPL", "9999-12-31T23:59:59Z", "1", "2"),
    quote("AAPL", "0999-12-31T23:59:59Z", "1", "2"),
    quote("AAPL", "2024-02-29T00:00:00.5Z", "1", "2"),
    quote("AAPL", f"{T}.1234567Z", "1", "2"),
    quote("AAPL", f"{T}Z", "1", "2", seq=2**63),
    quote("AAPL", f"{T}Z", "1", "2", seq=2**63 - 1),
    quote("AAPL", f"{T}Z", "1", "2", seq=-(2**63)),
    quote("NOPE", f"{T}Z", "1", "2"),
    quote("AA\\u0050L", f"{T}Z", "1", "2"),  # an escape
    quote("AAPL", f"{T}Z", "1", "2") + " ",
    quote("AAPL", f"{T}Z", "1", "2").replace('"bid"', '"bid" '),
]
ORDER_LINES = [
    order("O-1", "AAPL", f"{T}.002Z"),
    order("O-2", "MSFT", f"{T}Z", side="SELL", qty="7500", price="100.125", account=-3, seq=9),
    order("O-3", "AAPL", f"{T}Z", side="HOLD"),
    order("", "AAPL", f"{T}Z"),
    order("O-é", "AAPL", f"{T}Z"),
    order('O-"', "AAPL", f"{T}Z"),
    order("O-4", "AAPL", f"{T}Z", account=2**64),
    order("O-5", "AAPL", f"{T}Z", qty="0.0"),
]


def _own_layout(lines: pa.Table, universe: frozenset[str]) -> dc.ColumnBatch | None:
    """The lines as kernel.layout's columns; None unless every non-blank line is in the product's layout."""
    columns, rest = dc.split(lines, universe)
    return columns if rest.num_rows == 0 else None


def _one(feed: str, line: str) -> dc.ColumnBatch | None:
    lines = pa.table({"stream": [feed], "value": [line], "source_file": ["f"]})
    return _own_layout(lines, UNIVERSE)


def _record(feed: str, row: dict) -> Quote | Order:
    if feed == "quotes":
        return Quote(row["symbol"], row["bid"], row["offer"], row["time"], row["seq"])
    return Order(
        row["order_id"], row["account"], row["symbol"], row["side"], row["qty"], row["price"], row["time"], row["seq"]
    )


@pytest.mark.parametrize("feed,line", [("quotes", q) for q in QUOTE_LINES] + [("orders", o) for o in ORDER_LINES])
def test_a_line_is_taken_only_with_certain_lines_values(feed, line):
    got = _one(feed, line)
    want = parse_quote(line, UNIVERSE) if feed == "quotes" else parse_order(line, UNIVERSE)
    if got is None:
        own_layout = QUOTE_LINES[:4] if feed == "quotes" else ORDER_LINES[:2]
        assert line not in own_layout, "the product's own layout must be taken"
        return
    assert want is not None, f"taken here but not by certain_lines: {line}"
    table = got.quotes if feed == "quotes" else got.orders
    assert _record(feed, table.to_pylist()[0]) == want


@pytest.mark.parametrize("feed,line", [("quotes", q) for q in QUOTE_LINES] + [("orders", o) for o in ORDER_LINES])
def test_the_line_by_line_parse_gives_certain_lines_values_in_the_same_columns(feed, line):
    lines = pa.table({"stream": [feed], "value": [line], "source_file": ["f"]})
    judged = driver_rows.sort_lines(lines, UNIVERSE)
    got = judged.columns if judged.quarantine.num_rows == 0 else None
    want = parse_quote(line, UNIVERSE) if feed == "quotes" else parse_order(line, UNIVERSE)
    if want is None:  # not certain: kernel.lenient_json judges it, valid or not
        want = judge(feed, line, UNIVERSE)
    if isinstance(want, str):
        assert got is None
        return
    assert got is not None
    table = got.quotes if feed == "quotes" else got.orders
    assert _record(feed, table.to_pylist()[0]) == want
    regex = _one(feed, line)
    if regex is not None:
        assert (got.quotes, got.orders, got.sources) == (regex.quotes, regex.orders, regex.sources)


def test_blank_lines_are_dropped_and_a_line_outside_the_layout_is_left_to_the_line_by_line_parse():
    lines = pa.table(
        {
            "stream": ["quotes", "quotes", "orders"],
            "value": [QUOTE_LINES[0], " \t", ORDER_LINES[0]],
            "source_file": ["a", "a", "b"],
        }
    )
    got = _own_layout(lines, UNIVERSE)
    assert (
        got is not None and (got.quotes.num_rows, got.orders.num_rows) == (1, 1) and sorted(got.sources) == ["a", "b"]
    )
    bad = pa.table({"stream": ["quotes", "quotes"], "value": [QUOTE_LINES[0], "{not json"], "source_file": ["a", "a"]})
    assert _own_layout(bad, UNIVERSE) is None


def test_large_strings_from_sparks_arrow_come_out_as_strings():
    # Kafka batches reach the driver through Spark's toArrow, as large strings; the state's and the
    # history's symbols are strings, and the candidates are one table of both.
    lines = pa.table(
        {
            c: pa.array(v, pa.large_string())
            for c, v in (
                ("stream", ["quotes", "orders"]),
                ("value", [QUOTE_LINES[0], ORDER_LINES[0]]),
                ("source_file", ["t/0/1", "t/0/2"]),
            )
        }
    )
    got = _own_layout(lines, UNIVERSE)
    assert got is not None and got.quotes.schema.field("symbol").type == pa.string()
    assert got.orders.schema.field("order_id").type == pa.string() and got.sources == ["t/0/1", "t/0/2"]


def _quotes_table(quotes: list[Quote]) -> pa.Table:
    return pa.table(
        {
            "symbol": pa.array([q.symbol for q in quotes], pa.string()),
            "bid": pa.array([q.bid for q in quotes], dc.PRICE),
            "offer": pa.array([q.offer for q in quotes], dc.PRICE),
            "time": pa.array([q.time for q in quotes], pa.int64()),
            "seq": pa.array([q.seq for q in quotes], pa.int64()),
        }
    )


@pytest.mark.parametrize("seed", range(5))
def test_the_as_of_choice_and_the_newest_quote_follow_the_quote_key(seed):
    rng = random.Random(seed)
    symbols = ["AAPL", "MSFT", "IBM", "ZZZ"]
    prices = [Decimal("1.00"), Decimal("1.01"), Decimal("1.05"), Decimal("2")]
    quotes = [
        Quote(
            rng.choice(symbols[:3]),
            rng.choice(prices),
            rng.choice(prices),
            rng.randrange(20),
            rng.choice([None, None, 0, 1, 2, -1]),
        )
        for _ in range(200)
    ]
    orders = [
        Order(f"o{i}", 1, rng.choice(symbols), "BUY", Decimal(1), Decimal(1), rng.randrange(-2, 22), None)
        for i in range(300)
    ]
    table = pa.table({"symbol": [o.symbol for o in orders], "time": pa.array([o.time for o in orders], pa.int64())})
    chosen = columns.as_of(table, _quotes_table(quotes)).to_pylist()

    def key(q: Quote):
        return quote_key(q.time, q.seq, q.bid, q.offer)

    want = [
        max((q for q in quotes if q.symbol == o.symbol and q.time <= o.time), key=key, default=None) for o in orders
    ]
    got = [None if c["time"] is None else Quote(c["symbol"], c["bid"], c["offer"], c["time"], c["seq"]) for c in chosen]
    assert got == want
    newest = {
        r["symbol"]: Quote(r["symbol"], r["bid"], r["offer"], r["time"], r["seq"])
        for r in columns.newest(_quotes_table(quotes)).to_pylist()
    }
    assert newest == {s: max((q for q in quotes if q.symbol == s), key=key) for s in {q.symbol for q in quotes}}


def test_the_reject_rule_is_should_rejects_exactly_at_its_thresholds():
    rng = random.Random(3)
    pairs = [
        (Decimal("100"), Decimal("105")),
        (Decimal("100"), Decimal("100.05")),
        (Decimal("1"), Decimal("1")),
        (Decimal("2"), Decimal("1")),
        (Decimal("9999999999.99999999"), Decimal("9999999999.99999999")),
        (Decimal("0.00000001"), Decimal("9999999999.99999999")),
    ]
    pairs += [
        (Decimal(rng.randrange(1, 10**12)) / 10**8, Decimal(rng.randrange(1, 10**12)) / 10**8) for _ in range(500)
    ]
    for thresholds in (
        Thresholds(),
        Thresholds(Decimal("5"), Decimal("0.05")),
        Thresholds(Decimal("0"), Decimal("0")),
        Thresholds(Decimal("100"), Decimal("0.00000001")),
    ):
        got = columns.rejects(
            pa.array([b for b, _ in pairs], dc.PRICE), pa.array([o for _, o in pairs], dc.PRICE), thresholds
        ).to_pylist()
        assert got == [should_reject(b, o, thresholds.max_spread, thresholds.max_spread_ratio) for b, o in pairs]


def test_landing_files_are_read_in_order_and_a_missing_one_declines_the_batch(place):
    """The driver reads a batch's landing files itself (three here: on S3 the first GET in this
    thread, the others on kept threads): lines in file order with their feed and file, and a file
    that cannot be read hands the batch to Spark (None) rather than losing its lines."""
    from market_spread.sources import driver_read

    files = []
    for i, feed in enumerate(["quotes", "orders", "quotes"]):
        target = place / "landing" / feed / f"f-{i}.jsonl"
        if not place.s3:
            target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(f"{feed}-{i}-a\n{feed}-{i}-b\r\n".encode())
        files.append(str(target).replace("s3://", "s3a://"))

    lines = driver_read._file_lines(files)

    assert lines.column("value").to_pylist() == [
        "quotes-0-a",
        "quotes-0-b",
        "orders-1-a",
        "orders-1-b",
        "quotes-2-a",
        "quotes-2-b",
    ]
    assert lines.column("stream").to_pylist() == ["quotes"] * 2 + ["orders"] * 2 + ["quotes"] * 2
    assert lines.column("source_file").to_pylist() == [f for f in files for _ in range(2)]
    assert driver_read._file_lines([*files, files[0].replace("f-0", "gone")]) is None

"""The kernel's certain parse (kernel.certain_lines) takes a line only when the reference engine finds
it valid with the very same values (the lines it leaves go on to bad_lines and lenient_json); landing
files read on the driver give the lines Spark's text source gives."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from market_spread.kernel.certain_lines import parse_order, parse_quote
from market_spread_tools.reference import parse_line
from tests.helpers.symbols import SYMBOLS

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

Q = '{{"symbol": "AAPL", "transact_time": "{t}", "bid": {bid}, "offer": {offer}{rest}}}'
O = (
    '{{"order_id": "O-1", "account": {account}, "symbol": "AAPL", "side": "{side}", "qty": {qty}, '
    '"price": 189.13, "transact_time": "{t}"{rest}}}'
)
TIME = "2026-11-23T14:30:00.123Z"

QUOTES = [
    Q.format(t=TIME, bid="189.12", offer="189.14", rest=', "seq": 17'),
    Q.format(t="2026-11-23T14:30:00.1+05:30", bid="100", offer="1e2", rest=', "seq": null'),
    Q.format(t="2026-11-23T14:30:00.123456-18:00", bid="0.00000001", offer="9999999999.99999999", rest=""),
    Q.format(t="2026-11-23T14:30:00+18:01", bid="1", offer="2", rest=""),  # offset past 18:00
    Q.format(t="2026-11-23T14:30:00+05:60", bid="1", offer="2", rest=""),  # minute 60
    Q.format(t="2026-02-30T00:00:00Z", bid="1", offer="2", rest=""),
    Q.format(t="0001-01-01T00:00:00+01:00", bid="1", offer="2", rest=""),
    Q.format(t="2026-11-23 14:30:00Z", bid="1", offer="2", rest=""),
    Q.format(t="2026-11-23T14:30:00", bid="1", offer="2", rest=""),
    Q.format(t=TIME, bid="189.123456789", offer="190", rest=""),  # rounded by Spark
    Q.format(t=TIME, bid="-1", offer="2", rest=""),
    Q.format(t=TIME, bid="0", offer="2", rest=""),
    Q.format(t=TIME, bid='"1.5"', offer="2", rest=""),
    Q.format(t=TIME, bid="NaN", offer="2", rest=""),
    Q.format(t=TIME, bid="1", offer="10000000000", rest=""),
    Q.format(t=TIME, bid="1", offer="2", rest=', "seq": 1.0'),
    Q.format(t=TIME, bid="1", offer="2", rest=', "seq": 9223372036854775808'),
    Q.format(t=TIME, bid="1", offer="2", rest=', "seq": -9223372036854775808'),
    Q.format(t=TIME, bid="1", offer="2", rest=', "seq": true'),
    Q.format(t=TIME, bid="1", offer="2", rest=', "extra": 1'),
    Q.format(t=TIME, bid="1", offer="2", rest=', "bid": 3'),
    Q.format(t=TIME, bid="1", offer="2", rest="") + " ",
    " " + Q.format(t=TIME, bid="1", offer="2", rest=""),
    Q.format(t=TIME, bid="1", offer="2", rest="") + "\t",
    Q.format(t=TIME, bid="1", offer="2", rest="").replace("AAPL", "ZZZZ9"),
    Q.format(t=TIME, bid="1", offer="2", rest="").replace('"AAPL"', '"AAPL "'),
    Q.format(t=TIME, bid="1", offer="2", rest="").replace('"AAPL"', '"\\u0041APL"'),
    "{'symbol': 'AAPL', 'transact_time': '2026-11-23T14:30:00Z', 'bid': 1, 'offer': 2}",
    '{"symbol": "AAPL", "bid": 1, "offer": 2}',
    "[1, 2]",
    "{}",
]
ORDERS = [
    O.format(account=7, side="BUY", qty=100, t=TIME, rest=', "seq": 18'),
    O.format(account=7, side="SELL", qty="0.5", t=TIME, rest=""),
    O.format(account=7, side="buy", qty=100, t=TIME, rest=""),
    O.format(account="7.0", side="BUY", qty=100, t=TIME, rest=""),
    O.format(account='"7"', side="BUY", qty=100, t=TIME, rest=""),
    O.format(account=7, side="BUY", qty=-1, t=TIME, rest=""),
    O.format(account=7, side="BUY", qty=100, t=TIME, rest="").replace('"O-1"', '""'),
    O.format(account=7, side="BUY", qty=100, t=TIME, rest="").replace('"O-1"', '"O-\\u00e9"'),
    O.format(account=7, side="BUY", qty=100, t=TIME, rest="").replace('"O-1"', "null"),
]


def _reference_values(stream: str, lines: list[str]) -> dict[int, dict | None]:
    """Per line, the reference engine's values (time in µs since the epoch), or None when it does
    not find the line valid."""
    out: dict[int, dict | None] = {}
    for i, line in enumerate(lines):
        record, _ = parse_line(stream, line, set(SYMBOLS))
        if record is not None:
            record["time"] = (record["time"] - _EPOCH) // timedelta(microseconds=1)
        out[i] = record
    return out


def _taken_as_the_reference_parses(stream: str, lines: list[str], parse, fields: tuple[str, ...]) -> int:
    """How many lines the kernel's certain `parse` takes; each one valid to the reference engine
    with the same values."""
    says = _reference_values(stream, lines)
    taken = 0
    for i, line in enumerate(lines):
        record = parse(line, frozenset(SYMBOLS))
        if record is None:
            continue
        taken += 1
        want = says[i]
        assert want is not None, f"the kernel took a line the reference refuses: {line}"
        assert tuple(record) == tuple(want[f] for f in fields), line
    assert sum(v is not None for v in says.values()) > taken, "the certain parse must leave some valid lines"
    return taken


def test_a_quote_the_certain_parse_takes_is_the_one_the_reference_parses():
    taken = _taken_as_the_reference_parses("quotes", QUOTES, parse_quote, ("symbol", "bid", "offer", "time", "seq"))
    assert (
        taken == 6
    )  # the common shapes (an escaped letter, the lowest seq, a key Spark ignores); the rest are Spark's


def test_an_order_the_certain_parse_takes_is_the_one_the_reference_parses():
    fields = ("order_id", "account", "symbol", "side", "qty", "price", "time", "seq")
    assert _taken_as_the_reference_parses("orders", ORDERS, parse_order, fields) == 2


def test_landing_files_read_on_the_driver_give_the_lines_sparks_text_source_gives(spark, tmp_path):
    """stream.driver_batch reads a batch's landing files itself (the files from the batch's plan):
    the same lines as Spark's text source, whatever the line ends, blank lines and byte-order marks;
    a file that is not UTF-8 is read through Spark, and its line judged with U+FFFD for the bad byte."""

    from market_spread.kernel import steps
    from market_spread.sources import driver_read
    from market_spread.stream.query import _landing_feeds
    from market_spread.stream.spec import StreamSpec

    landing = tmp_path / "landing"
    for feed in ("quotes", "orders"):
        (landing / feed).mkdir(parents=True)
    (landing / "quotes" / "a.jsonl").write_bytes(b'\xef\xbb\xbf{"q": 1}\r\n{"q": 2}\r{"q": 3}\n\n  \n{"q": "\xc3\xa9"}')
    (landing / "orders" / "b.jsonl").write_bytes(b'{"o": 1}\n\r\n\x0b\x0c{"o": 2}\n')
    (landing / "orders" / "skip.txt").write_bytes(b"not a landing file\n")
    seen = []

    def batch(df, batch_id):
        got = driver_read.read_lines(df)
        want = df.select("stream", "value", "source_file").toArrow()
        seen.append(
            (
                sorted(zip(*(got[c].to_pylist() for c in got.column_names))),
                sorted(zip(*(want[c].to_pylist() for c in want.column_names))),
            )
        )

    spec = StreamSpec(lake=tmp_path / "lake", symbols=["A"], landing=landing)
    query = (
        _landing_feeds(spark, spec, archiving=False)
        .writeStream.foreachBatch(batch)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    ((got, want),) = seen
    assert got == want and len(want) == 9
    assert driver_read.landing_files(spark.range(1), 1 << 20) is None, "not a landing batch"

    (landing / "quotes" / "c.jsonl").write_bytes(b'{"q": "\xff"}\n')  # not UTF-8: judged all the same
    seen.clear()
    spark.streams.resetTerminated()
    query = (
        _landing_feeds(spark, spec, archiving=False)
        .writeStream.foreachBatch(
            lambda df, _: seen.append(
                (
                    driver_read._file_lines(driver_read.landing_files(df, 1 << 20)),
                    steps.parse(driver_read.read_lines(df), frozenset(["A"])).quarantine,
                )
            )
        )
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    ((whole, bad),) = seen
    assert whole is None, "a file that is not UTF-8 is not read whole"
    assert [(r["raw"], r["reason"]) for r in bad.to_pylist()] == [('{"q": "\ufffd"}', "missing_field:symbol")]

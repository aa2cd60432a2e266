"""The driver's parse (kernel.certain_lines, stream.driver_batch) takes a line only when Spark's parse
(transforms.parsing) finds it valid with the very same values; the lines it refuses go to Spark.
Spark's parse is the oracle here."""

from __future__ import annotations

from pyspark.sql import functions as F

from market_spread.kernel.certain_lines import is_blank, parse_order, parse_quote
from market_spread.kernel.line_rows import sources as _sources
from market_spread.transforms import parsing
from tests.helpers.symbols import SYMBOLS
from tests.unit.test_lenient_lines import TRICKY_LINES

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


def _spark_values(spark, stream: str, lines: list[str]) -> dict[int, dict | None]:
    """Per line, Spark's parsed values, or None when Spark does not find it valid."""
    frame = spark.createDataFrame(
        [(stream, line, f"file:/l/{i}.jsonl") for i, line in enumerate(lines)],
        "stream STRING, line STRING, source_file STRING",
    )
    out: dict[int, dict | None] = {}
    parsed = parsing.parse_lines(frame, list(SYMBOLS))
    # As microseconds: Python cannot hold every instant Spark can (year 0 after a zone offset).
    parsed = parsed.withColumn("event_time", F.unix_micros("event_time"))
    for r in parsed.collect():
        out[int(r["source_file"].rsplit("/", 1)[1].split(".")[0])] = None if r["reason"] else r.asDict()
    return out


def _taken_as_spark_parses(spark, stream: str, lines: list[str], parse, fields: tuple[str, ...]) -> int:
    """How many lines the driver's `parse` takes; each one Spark finds valid with the same values."""
    spark_says = _spark_values(spark, stream, lines)
    taken = 0
    for i, line in enumerate(lines):
        record = parse(line, frozenset(SYMBOLS))
        if record is None:
            continue
        taken += 1
        want = spark_says[i]
        assert want is not None, f"the driver took a line Spark refuses: {line}"
        assert tuple(record) == tuple(want["event_time" if f == "time" else f] for f in fields), line
    assert sum(v is not None for v in spark_says.values()) > taken, "Spark must take some lines the driver leaves"
    return taken


def test_a_quote_the_driver_takes_is_the_one_spark_parses(spark):
    taken = _taken_as_spark_parses(spark, "quotes", QUOTES, parse_quote, ("symbol", "bid", "offer", "time", "seq"))
    assert (
        taken == 6
    )  # the common shapes (an escaped letter, the lowest seq, a key Spark ignores); the rest are Spark's


def test_an_order_the_driver_takes_is_the_one_spark_parses(spark):
    fields = ("order_id", "account", "symbol", "side", "qty", "price", "time", "seq")
    assert _taken_as_spark_parses(spark, "orders", ORDERS, parse_order, fields) == 2


def test_blank_lines_and_sources_are_those_of_sparks_path(spark):
    raw = spark.createDataFrame([(i, line) for i, line in enumerate(TRICKY_LINES)], "i INT, value STRING")
    kept = {r["i"] for r in parsing.nonblank_lines(raw).select("i").collect()}
    driver = {i for i, line in enumerate(TRICKY_LINES) if not is_blank(line[1:] if line.startswith("\ufeff") else line)}
    assert driver == kept
    names = ["file:/land/quotes/q-0001.jsonl", "file:/land/orders/o-7", "quotes/0/41", "quotes/0/42", "orders/3/9", "7"]
    frame = spark.createDataFrame([(n,) for n in names], "source_file STRING").select(
        F.regexp_replace("source_file", "/[0-9]+$", "").alias("source")
    )
    files, last = _sources(set(names))
    assert files == sorted({r["source"] for r in frame.collect()})
    assert last == {"quotes/0": 42, "orders/3": 9}


def test_landing_files_read_on_the_driver_give_the_lines_sparks_text_source_gives(spark, tmp_path):
    """stream.driver_batch reads a batch's landing files itself (the files from the batch's plan):
    the same lines as Spark's text source, whatever the line ends, blank lines and byte-order marks;
    a file that is not UTF-8 is left to Spark."""
    import pyarrow as pa

    from market_spread.kernel import layout as driver_columns
    from market_spread.kernel import line_rows as driver_rows
    from market_spread.stream import driver_read
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
        got = driver_read.read_lines(df, 1 << 20)
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

    (landing / "quotes" / "c.jsonl").write_bytes(b'{"q": "\xff"}\n')  # not UTF-8: Spark reads it
    seen.clear()
    spark.streams.resetTerminated()
    query = (
        _landing_feeds(spark, spec, archiving=False)
        .writeStream.foreachBatch(
            lambda df, _: seen.append(
                (
                    driver_read._file_lines(driver_read.landing_files(df, 1 << 20)),
                    driver_rows.parse(driver_read.read_lines(df, 1 << 20), frozenset(["A"])),
                    driver_columns.parse(driver_read.read_lines(df, 1 << 20), pa.array(["A"])),
                )
            )
        )
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert seen == [(None, None, None)], "Spark's own read hands over the line's bytes: the batch is Spark's"

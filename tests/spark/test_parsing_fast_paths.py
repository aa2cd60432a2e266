"""The byte-wise fast paths in front of the parse's regular expressions give exactly what the
regexes alone gave (each test keeps the regex version as its oracle)."""

from __future__ import annotations

from pyspark.sql import functions as F

from market_spread.domain.rules import DEFAULT_THRESHOLDS
from market_spread.stream.summary import summarize
from market_spread.transforms import parsing

TRICKY_LINES = [
    '{"symbol": "A"}',
    '\ufeff{"symbol": "A"}',
    "\ufeff",
    "\ufeff   ",
    "\ufeff\ufeff{}",
    " {}",
    "",
    " ",
    "\t",
    "\x0b",
    "\x0c",
    "\r",
    " \t\r ",
    "\u00a0",
    "\u2003",
    "x",
    "{",
    "\ufeffx",
    "  \ufeff",
    "\u00e9{}",
    "}",
]


def test_blank_lines_and_byte_order_marks_are_handled_as_the_regexes_did(spark):
    raw = spark.createDataFrame([(i, line) for i, line in enumerate(TRICKY_LINES)], "i INT, value STRING")
    oracle = (
        raw.withColumn("line", F.regexp_replace(F.col("value"), "^\ufeff", ""))
        .where(F.col("line").rlike(r"\S"))
        .drop("value")
    )
    got = sorted((r["i"], r["line"]) for r in parsing.nonblank_lines(raw).collect())
    want = sorted((r["i"], r["line"]) for r in oracle.collect())
    assert got == want
    # The oracle itself is not trivial: some lines go, one BOM is cut, a second one stays.
    assert len(want) < len(TRICKY_LINES) and (4, "\ufeff{}") in want and (1, '{"symbol": "A"}') in want


def test_the_summary_names_files_and_kafka_partitions_as_the_regexes_did(spark):
    sources = [
        "file:/land/quotes/q-0001.jsonl",
        "file:/land/quotes/q-0001.jsonl",
        "file:/land/orders/o-7",
        "quotes/0/41",
        "quotes/0/42",
        "orders/3/9",
        "file:/land/x/12a",
        "file:/land/x/é",
        "7",
    ]
    parsed = spark.createDataFrame(
        [("quotes", None, s, "bad_time", None) for s in sources],
        "stream STRING, line STRING, source_file STRING, reason STRING, event_time TIMESTAMP",
    )
    summary = summarize(parsed, DEFAULT_THRESHOLDS, per_symbol=False)
    frame = parsed.select(
        F.regexp_replace("source_file", "/[0-9]+$", "").alias("source"),
        F.regexp_extract("source_file", "/([0-9]+)$", 1).alias("offset"),
    ).collect()
    files = sorted({r["source"] for r in frame})
    offsets: dict[str, int] = {}
    for r in frame:
        if r["offset"]:
            offsets[r["source"]] = max(int(r["offset"]), offsets.get(r["source"], -1))
    assert summary.files == files
    assert summary.last_offsets == offsets == {"quotes/0": 42, "orders/3": 9}
    assert summary.counts == {("quotes", False): len(sources)}

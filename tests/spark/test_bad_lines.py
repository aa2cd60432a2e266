"""The kernel judges every line as Spark's parse (transforms.parsing) does: kernel.line_rows, with
kernel.lenient_json for what kernel.certain_lines and kernel.bad_lines leave open, gives each line
Spark's reason or Spark's values, for every kind of bad line the contract names, Jackson's
leniencies, random mutations of valid lines and lines that are not UTF-8. Spark's parse is the oracle
here (this file goes with it)."""

from __future__ import annotations

import random

import pyarrow as pa
from pyspark.sql import functions as F

from market_spread.kernel import line_rows
from market_spread.kernel.bad_lines import certain_reason
from market_spread.kernel.certain_lines import Order, Quote
from market_spread.transforms import parsing
from tests.helpers.records import BAD_ORDERS, BAD_QUOTES, T, order, quote
from tests.helpers.symbols import SYMBOLS
from tests.spark.test_certain_lines import ORDERS, QUOTES
from tests.unit.test_lenient_lines import corpus

UNIVERSE = frozenset(SYMBOLS)
TOKENS = [
    "null",
    "true",
    "false",
    '""',
    '"x"',
    '"NaN"',
    "NaN",
    "-Infinity",
    "0",
    "-1",
    "1.5",
    "7",
    "1e2",
    "1e400",
    "99999999999",
    "9223372036854775808",
    "[1]",
    "{}",
    '"2026-11-23T14:30:00Z"',
    '"2026-02-30T00:00:00Z"',
    '"BUY"',
    '"SELL"',
    '"AAPL"',
    '"seven"',
    "0.000000001",
    "-0.0",
    "12345678901234567890123456789012",
]
CHARS = list('{}[]",:. \t\\-+e0123456789aNx') + ["\u00e9"]


def _mutations(rng: random.Random, valid: list[str], n: int) -> list[str]:
    """Lines a producer might send by mistake: a field's value replaced, a field dropped or doubled,
    a character inserted, deleted or changed, the line cut short."""
    out = []
    for _ in range(n):
        line = rng.choice(valid)
        how = rng.randrange(5)
        if how == 0:  # one value replaced by a token
            parts = line[1:-1].split(", ")
            k = rng.randrange(len(parts))
            key = parts[k].split(": ", 1)[0]
            parts[k] = f"{key}: {rng.choice(TOKENS)}"
            line = "{" + ", ".join(parts) + "}"
        elif how == 1:  # a field dropped, or given twice
            parts = line[1:-1].split(", ")
            k = rng.randrange(len(parts))
            parts = parts[:k] + parts[k + 1 :] if rng.random() < 0.7 else parts + [parts[k]]
            line = "{" + ", ".join(parts) + "}"
        elif how == 2:  # a character inserted
            at = rng.randrange(len(line) + 1)
            line = line[:at] + rng.choice(CHARS) + line[at:]
        elif how == 3:  # a character deleted or changed
            at = rng.randrange(len(line))
            line = line[:at] + (rng.choice(CHARS) if rng.random() < 0.5 else "") + line[at + 1 :]
        else:  # cut short
            line = line[: rng.randrange(1, len(line))]
        out.append(line)
    return out


def _spark_says(spark, lines: list[tuple[str, bytes]]) -> list[dict]:
    """Spark's parse of the lines (their bytes, as Spark's text source hands them over), all in one
    job: each line's row (event_time in microseconds), its text as quarantine keeps it in `line`."""
    frame = spark.createDataFrame(
        [(stream, value, f"file:/l/{i}.jsonl") for i, (stream, value) in enumerate(lines)],
        "stream STRING, value BINARY, source_file STRING",
    ).select("stream", F.col("value").cast("string").alias("line"), "source_file")
    parsed = parsing.parse_lines(frame, list(SYMBOLS), keep_lines=("quotes", "orders"))
    parsed = parsed.withColumn("event_time", F.unix_micros("event_time")).withColumn("line", F.make_valid_utf8("line"))
    by_line = {int(r["source_file"].rsplit("/", 1)[1].split(".")[0]): r.asDict() for r in parsed.collect()}
    return [by_line[i] for i in range(len(lines))]


def _kernel_says(lines: list[tuple[str, bytes]]) -> tuple[list[Quote | Order | str], list[str | None]]:
    """kernel.line_rows' judgement of the lines in one batch: each line's record or reason, and the
    text quarantine keeps (None for a valid line)."""
    table = pa.table(
        {
            "stream": [stream for stream, _ in lines],
            "value": pa.array([value for _, value in lines], pa.binary()).view(pa.string()),
            "source_file": [str(i) for i in range(len(lines))],
        }
    )
    sorted_lines = line_rows.sort_lines(table, UNIVERSE)
    assert sorted_lines is not None and sorted_lines.uncertain.num_rows == 0, "every line is judged"
    got: list = [None] * len(lines)
    raw: list[str | None] = [None] * len(lines)
    for r in sorted_lines.quarantine.to_pylist():
        got[int(r["source_file"])], raw[int(r["source_file"])] = r["reason"], r["raw"]
    for feed, kind in (("quotes", Quote), ("orders", Order)):
        valid = [i for i, (stream, _) in enumerate(lines) if stream == feed and got[i] is None]
        for i, row in zip(valid, getattr(sorted_lines.columns, feed).to_pylist(), strict=True):
            got[i] = kind(**row)
    return got, raw


def _not_utf8(rng: random.Random, n: int) -> list[tuple[str, bytes]]:
    """Valid lines with a byte sequence that is not UTF-8 put somewhere (in a text field, a key, a
    number), an encoded surrogate among them (Java's decoder and Python's count it differently)."""
    bases = [
        ("quotes", quote("AAPL", T.format(1), "1.5", "2").encode()),
        ("orders", order("O-1", "AAPL", T.format(1)).encode()),
    ]
    bad = [b"\xff", b"\xe2\x80", b"\xed\xa0\x80", b"\xed\xa0", b"\xf0\x9f\x98", b"\xc0\xaf", b"\xf4\x90\x80\x80"]
    out = []
    for _ in range(n):
        stream, line = rng.choice(bases)
        at = rng.randrange(len(line) + 1)
        out.append((stream, line[:at] + rng.choice(bad) + line[at:]))
    return out + [("orders", bases[1][1].replace(b"O-1", b"O-" + b)) for b in bad]


def test_the_kernel_judges_every_line_as_sparks_parse_does(spark):
    """One Spark job over every line: the contract's bad lines, Jackson's leniencies, the odd lines,
    random mutations of valid lines and lines that are not UTF-8. The kernel (kernel.line_rows with
    kernel.lenient_json) gives each Spark's reason, or Spark's values; kernel.bad_lines, where it
    decides, Spark's reason, deciding every contract bad line and most mutations."""
    rng = random.Random(53)
    valid = {
        "quotes": [quote(s, T.format(k), "10.25", "10.5", seq=k if k % 2 else None) for k, s in enumerate(SYMBOLS)],
        "orders": [
            order(f"O-{k}", s, T.format(k), side="SELL" if k % 2 else "BUY", qty="100", price="10.5", seq=k)
            for k, s in enumerate(SYMBOLS)
        ],
    }
    contract = [("quotes", line) for kinds in BAD_QUOTES.values() for line in kinds]
    contract += [("orders", line) for kinds in BAD_ORDERS.values() for line in kinds]
    mutations = [(stream, line) for stream in ("quotes", "orders") for line in _mutations(rng, valid[stream], 1500)]
    others = corpus() + [("quotes", line) for line in QUOTES] + [("orders", line) for line in ORDERS]
    lines = [(s, line.encode()) for s, line in contract + mutations + others] + _not_utf8(rng, 300)

    spark_says = _spark_says(spark, lines)
    kernel_says, raw = _kernel_says(lines)
    for (stream, line), want, got, text in zip(lines, spark_says, kernel_says, raw):
        if want["reason"] is not None:
            assert got == want["reason"] and text == want["line"], f"{stream} line {line!r}: kernel {got}, Spark {want}"
        else:
            fields = Quote._fields if stream == "quotes" else Order._fields
            values = tuple(want["event_time" if f == "time" else f] for f in fields)
            assert isinstance(got, tuple) and tuple(got) == values, (
                f"{stream} line {line!r}: kernel {got}, Spark {values}"
            )

    decided = {"contract": 0, "mutations": 0}
    for part, start, end in (
        ("contract", 0, len(contract)),
        ("mutations", len(contract), len(contract) + len(mutations)),
    ):
        for (stream, line), want in zip(lines[start:end], spark_says[start:end]):
            reason = certain_reason(stream, line.decode(), UNIVERSE)
            assert reason in (None, want["reason"]), f"{stream} line {line!r}: bad_lines says {reason}, Spark {want}"
            decided[part] += reason is not None
    bad = sum(w["reason"] is not None for w in spark_says[len(contract) : len(contract) + len(mutations)])
    assert decided["contract"] == len(contract), "every kind of bad line the contract names is certain"
    # Most bad lines are certain (bad_lines, the quick way); Jackson's leniencies go to lenient_json.
    assert decided["mutations"] >= 0.8 * bad, f"only {decided['mutations']} of {bad} bad lines certain"

"""The driver's quarantine reasons (kernel.bad_lines) are Spark's (transforms.parsing), for every kind
of bad line the contract names and for random mutations of valid lines; a line it is not certain of
is left to Spark's parse. Spark's parse is the oracle here."""

from __future__ import annotations

import random

from market_spread.kernel.bad_lines import certain_reason
from market_spread.transforms import parsing
from tests.helpers.records import BAD_ORDERS, BAD_QUOTES, T, order, quote
from tests.helpers.symbols import SYMBOLS
from tests.spark.test_certain_lines import ORDERS, QUOTES
from tests.spark.test_parsing_fast_paths import TRICKY_LINES

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


def _spark_reasons(spark, stream: str, lines: list[str]) -> list[str | None]:
    frame = spark.createDataFrame(
        [(stream, line, f"file:/l/{i}.jsonl") for i, line in enumerate(lines)],
        "stream STRING, line STRING, source_file STRING",
    )
    by_line = {
        int(r["source_file"].rsplit("/", 1)[1].split(".")[0]): r["reason"]
        for r in parsing.parse_lines(frame, list(SYMBOLS)).select("source_file", "reason").collect()
    }
    return [by_line[i] for i in range(len(lines))]


def _compare(spark, stream: str, lines: list[str]) -> tuple[int, int]:
    """(lines decided here, bad lines in all); every decision is Spark's reason."""
    spark_says = _spark_reasons(spark, stream, lines)
    decided = bad = 0
    for line, want in zip(lines, spark_says):
        got = certain_reason(stream, line, UNIVERSE)
        bad += want is not None
        if got is not None:
            decided += 1
            assert got == want, f"{stream} line {line!r}: driver says {got}, Spark says {want}"
    return decided, bad


def test_every_kind_of_bad_line_the_contract_names_is_decided_on_the_driver_as_spark_decides(spark):
    for stream, kinds in (("quotes", BAD_QUOTES), ("orders", BAD_ORDERS)):
        lines = [line for examples in kinds.values() for line in examples]
        decided, bad = _compare(spark, stream, lines)
        assert decided == bad == len(lines), f"{stream}: {decided} of {len(lines)} decided on the driver"


def test_odd_lines_get_spark_reasons_or_none(spark):
    for stream, lines in (("quotes", QUOTES), ("orders", ORDERS)):
        others = [line for line in TRICKY_LINES if line.strip() and not line.startswith("\ufeff")]
        _compare(spark, stream, lines + others)


def test_random_mutations_of_valid_lines_get_sparks_reason_when_decided(spark):
    rng = random.Random(53)
    valid = {
        "quotes": [quote(s, T.format(k), "10.25", "10.5", seq=k if k % 2 else None) for k, s in enumerate(SYMBOLS)],
        "orders": [
            order(f"O-{k}", s, T.format(k), side="SELL" if k % 2 else "BUY", qty="100", price="10.5", seq=k)
            for k, s in enumerate(SYMBOLS)
        ],
    }
    for stream in ("quotes", "orders"):
        decided, bad = _compare(spark, stream, _mutations(rng, valid[stream], 1500))
        # Most bad lines are decided on the driver; the rest (Jackson's leniencies) go to Spark.
        assert decided >= 0.8 * bad, f"{stream}: only {decided} of {bad} bad lines decided on the driver"

"""Parsing and validation of landing lines into typed quotes and orders, in Spark SQL only.

Each feed line is parsed once with `from_json` against a typed schema. Decimal fields are read as
DECIMAL(38,8): Spark builds them from the number's own text (a BigDecimal, rounded half-up to 8
places), never through a binary double. Valid lines take the fast path; only for a failing line is
the reason worked out (CASE branches are evaluated lazily), with a second, all-strings parse that
tells a missing field from a wrongly typed one.

Quarantine reasons (one per line, the first that applies, in this order):
  not_json_object, missing_field:F, non_finite:F, out_of_range:F, wrong_type:F, non_positive:F,
  unknown_side, bad_time, unknown_symbol
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from market_spread.domain.rules import Thresholds, reject_sql

# A timestamp must carry its zone; fractions of up to microseconds.
TIME_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})$"
NON_FINITE_PATTERN = r'^"?[+-]?(NaN|Infinity|INF)"?$'
NUMBER_PATTERN = r"^-?[0-9]"
INTEGER_PATTERN = r"^-?[0-9]+$"
DECIMAL_LIMIT = "10000000000"  # 1e10: DECIMAL(18,8) holds 10 integer digits


def _sql_regex(pattern: str) -> str:
    """A regex as a Spark SQL string literal (the SQL parser eats one level of backslashes)."""
    return "'" + pattern.replace("\\", "\\\\").replace("'", "\\'") + "'"


# Spark's JSON reader takes NaN/Infinity as numbers but json_object_keys does not: neutralise them
# before asking whether a line is an object at all, so they are reported as non-finite values.
_NON_FINITE_VALUES = r":\s*[+-]?(NaN|Infinity|INF)\b"


@dataclass(frozen=True)
class Field:
    name: str
    spark_type: str  # the type in the typed parse
    kind: str  # "text", "decimal", "integer", "time"
    required: bool = True


QUOTE_FIELDS = (
    Field("symbol", "STRING", "text"),
    Field("transact_time", "STRING", "time"),
    Field("bid", "DECIMAL(38,8)", "decimal"),
    Field("offer", "DECIMAL(38,8)", "decimal"),
    Field("seq", "BIGINT", "integer", required=False),
)

ORDER_FIELDS = (
    Field("order_id", "STRING", "text"),
    Field("account", "BIGINT", "integer"),
    Field("symbol", "STRING", "text"),
    Field("side", "STRING", "text"),
    Field("qty", "DECIMAL(38,8)", "decimal"),
    Field("price", "DECIMAL(38,8)", "decimal"),
    Field("transact_time", "STRING", "time"),
    Field("seq", "BIGINT", "integer", required=False),
)

FIELDS = {"quotes": QUOTE_FIELDS, "orders": ORDER_FIELDS}


def _typed_schema(fields: tuple[Field, ...]) -> str:
    return ", ".join(f"`{f.name}` {f.spark_type}" for f in fields) + ", `_corrupt` STRING"


def _raw_schema(fields: tuple[Field, ...]) -> str:
    return ", ".join(f"`{f.name}` STRING" for f in fields)


def _field_problem(f: Field, raw_parse: str) -> str:
    """SQL: the reason a field fails, or NULL when it is fine (`j` typed parse, `raw_parse` all-strings)."""
    typed, raw = f"j.`{f.name}`", f"{raw_parse}.`{f.name}`"
    absent = f"{raw} IS NULL" + (f" OR {raw} = ''" if f.kind == "text" else "")
    branches = []
    if f.required:
        branches.append(f"WHEN {absent} THEN 'missing_field:{f.name}'")
    else:
        branches.append(f"WHEN {raw} IS NULL THEN NULL")
    if f.kind in ("decimal", "integer"):
        branches.append(f"WHEN {typed} IS NULL AND {raw} RLIKE '{NON_FINITE_PATTERN}' THEN 'non_finite:{f.name}'")
        # A number that did not fit: any number for a decimal, only an integer for an integer field.
        number = NUMBER_PATTERN if f.kind == "decimal" else INTEGER_PATTERN
        branches.append(f"WHEN {typed} IS NULL AND {raw} RLIKE {_sql_regex(number)} THEN 'out_of_range:{f.name}'")
    branches.append(f"WHEN {typed} IS NULL THEN 'wrong_type:{f.name}'")
    if f.kind == "decimal":
        branches.append(f"WHEN {typed} <= 0 THEN 'non_positive:{f.name}'")
        branches.append(f"WHEN {typed} >= {DECIMAL_LIMIT} THEN 'out_of_range:{f.name}'")
    return "CASE " + " ".join(branches) + " ELSE NULL END"


def _fast_valid(fields: tuple[Field, ...]) -> str:
    """SQL: true for a line that is certainly well-formed (the common case, cheap to test)."""
    checks = ["j._corrupt IS NULL", "rtrim(line) LIKE '%}'"]
    for f in fields:
        typed = f"j.`{f.name}`"
        if f.required:
            checks.append(f"{typed} IS NOT NULL")
        if f.kind == "text" and f.required:
            checks.append(f"{typed} != ''")
        if f.kind == "decimal":
            checks.append(f"{typed} > 0 AND {typed} < {DECIMAL_LIMIT}")
    return " AND ".join(checks)


def universe_table(spark, symbols: list[str]) -> DataFrame:
    """The symbol universe as a one-column table (`_universe_symbol`); a stream builds it once and
    passes it to every parse.

    One string literal split and exploded in the JVM: cheap to analyse, and unlike
    `createDataFrame` over Python rows it starts no Python worker on the executors."""
    # A symbol never holds a newline: the symbol file is read line by line.
    joined = F.lit("\n".join(sorted(set(symbols))))
    return spark.range(1).select(F.explode(F.split(joined, "\n")).alias("_universe_symbol"))


Universe = list[str] | DataFrame  # the symbols, or their universe_table


def parse_feed(lines: DataFrame, stream: str, symbols: Universe, keep_lines: bool = False) -> DataFrame:
    """Parse one feed's lines (`line`, `source_file`) into the common shape of `COMMON_COLUMNS`.

    `reason` is NULL for a valid line, whose text is dropped unless `keep_lines` (a user's CHECK
    constraint may still send it to quarantine: transforms.constraints). The symbol check is a broadcast hash join with the universe
    as a local table, not an IN over thousands of literals: Catalyst re-analyses such an IN in every
    query built on the batch, which cost seconds per micro-batch with 3,000 symbols.
    """
    fields = FIELDS[stream]
    typed = F.from_json("line", _typed_schema(fields), {"columnNameOfCorruptRecord": "_corrupt"})
    parsed = lines.withColumn("j", typed)
    time_col = F.expr(
        # Year 0000 parses in Spark but not in Python, pandas or delta-rs readers: refuse it.
        f"CASE WHEN j.transact_time RLIKE {_sql_regex(TIME_PATTERN)} AND NOT startswith(j.transact_time, '0000') "
        "THEN try_cast(j.transact_time AS TIMESTAMP) END"
    )
    parsed = parsed.withColumn("event_time", time_col)
    known = symbols if isinstance(symbols, DataFrame) else universe_table(lines.sparkSession, symbols)
    parsed = parsed.join(F.broadcast(known), F.col("j.symbol") == known["_universe_symbol"], "left")
    # NULL for a missing symbol, as an IN would give: the field checks name that problem.
    parsed = parsed.withColumn(
        "_known_symbol", F.when(F.col("j.symbol").isNotNull(), F.col("_universe_symbol").isNotNull())
    )

    # Inlined, not a column: CASE evaluates it only for the lines that fail the fast test.
    raw_parse = f"from_json(line, '{_raw_schema(fields)}')"
    problems = [_field_problem(f, raw_parse) for f in fields]
    field_checks = " ".join(f"WHEN ({p}) IS NOT NULL THEN ({p})" for p in problems)
    side_check = "WHEN j.side NOT IN ('BUY', 'SELL') THEN 'unknown_side'" if stream == "orders" else ""
    fast_valid = _fast_valid(fields)
    side_ok = " AND j.side IN ('BUY', 'SELL')" if stream == "orders" else ""
    reason = F.expr(
        f"""CASE
          WHEN {fast_valid}{side_ok} AND event_time IS NOT NULL AND _known_symbol THEN NULL
          WHEN json_object_keys(regexp_replace(line, {_sql_regex(_NON_FINITE_VALUES)}, ':0')) IS NULL
            OR NOT (rtrim(line) LIKE '%}}') THEN 'not_json_object'
          {field_checks}
          {side_check}
          WHEN event_time IS NULL THEN 'bad_time'
          WHEN NOT _known_symbol THEN 'unknown_symbol'
          ELSE 'malformed'
        END"""
    )
    parsed = parsed.withColumn("reason", reason)
    names = {f.name for f in fields}

    def pick(name: str, spark_type: str):
        source = "event_time" if name == "event_time" else f"j.`{name}`"
        value = F.col(source) if (name in names or name == "event_time") else F.lit(None)
        # Values of failing lines are not kept: a failing line is kept as its raw text.
        return F.when(F.col("reason").isNull(), value.cast(spark_type)).alias(name)

    return parsed.select(
        F.lit(stream).alias("stream"),
        # Only a failing line's text is needed (for quarantine): dropping valid lines' text halves
        # the cost of caching the parsed batch.
        (F.col("line") if keep_lines else F.when(F.col("reason").isNotNull(), F.col("line"))).alias("line"),
        "source_file",
        "reason",
        *[pick(name, spark_type) for name, spark_type in COMMON_COLUMNS],
    )


# Both feeds parse into one shape, so a batch is parsed, cached and counted as one DataFrame.
COMMON_COLUMNS = (
    ("symbol", "STRING"),
    ("event_time", "TIMESTAMP"),
    ("seq", "BIGINT"),
    ("bid", "DECIMAL(18,8)"),
    ("offer", "DECIMAL(18,8)"),
    ("order_id", "STRING"),
    ("account", "BIGINT"),
    ("side", "STRING"),
    ("qty", "DECIMAL(18,8)"),
    ("price", "DECIMAL(18,8)"),
)


def parse_lines(lines: DataFrame, symbols: Universe, keep_lines: tuple[str, ...] = ()) -> DataFrame:
    """Both feeds of a batch (`stream`, `line`, `source_file`) parsed into the common shape; the
    text of valid lines kept for the feeds in `keep_lines`."""
    return parse_feed(lines.where("stream = 'quotes'"), "quotes", symbols, "quotes" in keep_lines).unionByName(
        parse_feed(lines.where("stream = 'orders'"), "orders", symbols, "orders" in keep_lines)
    )


def nonblank_lines(raw: DataFrame) -> DataFrame:
    """Drop blank lines (contract: ignored) and a UTF-8 byte-order mark at a line's start.

    Byte-wise tests first, regular expressions only for what they leave open: a regex turns each
    line into a Java string (and a replacement back again), which on a 2M-line batch was about a
    tenth of its CPU. A line that starts with `{` (nearly all) is not blank; only a line that starts
    with a byte-order mark loses its first character."""
    value = F.col("value")
    line = F.when(value.startswith("\ufeff"), F.expr("substr(value, 2)")).otherwise(value)
    nonblank = F.when(F.col("line").startswith("{"), F.lit(True)).otherwise(F.col("line").rlike(r"\S"))
    return raw.withColumn("line", line).where(nonblank).drop("value")


def valid_quotes(parsed: DataFrame, thresholds: Thresholds) -> DataFrame:
    return parsed.where("stream = 'quotes' AND reason IS NULL").select(
        "symbol",
        "bid",
        "offer",
        F.col("event_time").alias("quote_time"),
        "seq",
        F.expr(reject_sql("bid", "offer", thresholds)).alias("should_reject_trades"),
    )


def valid_orders(parsed: DataFrame) -> DataFrame:
    return parsed.where("stream = 'orders' AND reason IS NULL").select(
        "order_id",
        "account",
        "symbol",
        "side",
        "qty",
        "price",
        F.col("event_time").alias("order_time"),
        "seq",
    )


def quarantined(parsed: DataFrame) -> DataFrame:
    # Spark's text source keeps a line's bytes as they are; a Parquet string must be UTF-8, or Arrow
    # readers (delta-rs, DuckDB, Polars) fail on the table: invalid bytes become U+FFFD.
    raw = F.make_valid_utf8("line").alias("raw")
    return parsed.where("reason IS NOT NULL").select("stream", raw, "reason", "source_file")

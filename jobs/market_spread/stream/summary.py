"""The first job of a micro-batch: it parses and caches the batch and brings its summary to the driver.

The summary is what the rest of the batch plans with: the counts per feed (valid or not), the
files (or Kafka partitions and offsets) the batch took and, per symbol, the span of its valid
orders (for the late check) and its newest valid quote (for the state MERGE and the state mirror).
One grouping-sets aggregate computes all of it for a small batch: the per-symbol parts used to be
two jobs of their own (measured: docs/performance.md, row 'the first job brings each symbol's order
span'). A large batch does not use them: there the grouping sets' extra work (every row aggregated
twice, a struct built per row) costs more than the jobs it saves (row 'the summary's per-symbol
grouping sets on large batches too'). Its order spans stay
a job; its newest quotes come from its quote history rows on the driver (lake.state.newest_of_rows).
The batch's size is not known before it is parsed (foreachBatch hands over an RDD, not the files),
so the stream goes by the batch before it (stream.batch.BatchProcessor).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from market_spread.domain.rules import Thresholds, quote_key_sql, reject_sql
from market_spread.lake.state import NEWEST_COLUMNS
from market_spread.transforms.asof import STATE_QUOTE_COLUMNS

_VALID_ORDER = "stream = 'orders' AND reason IS NULL"
_VALID_QUOTE = "stream = 'quotes' AND reason IS NULL"


@dataclass
class BatchSummary:
    counts: dict[tuple[str, bool], int] = field(default_factory=dict)  # (feed, valid) -> lines
    files: list[str] = field(default_factory=list)  # landing files, or Kafka topic/partition
    last_offsets: dict[str, int] = field(default_factory=dict)  # Kafka topic/partition -> highest offset
    bounds: pa.Table | None = None  # symbol, first_order, last_order of the valid orders
    newest: pa.Table | None = None  # NEWEST_COLUMNS: each symbol's highest quote (rules.quote_key)


def summarize(parsed: DataFrame, thresholds: Thresholds, per_symbol: bool) -> BatchSummary:
    """The summary of the parsed batch (`parsing.parse_lines`), in one Spark job; `bounds` and
    `newest` only if `per_symbol` (they are one row per symbol of the batch)."""
    # A Kafka record's source is topic/partition/offset: group by topic/partition and keep the
    # highest offset, so that the driver gets one row per partition, not one per record.
    # Only a name that ends in a digit can be one: a landing file's name (`.jsonl`) skips the regexes.
    offset_like = F.substring("source_file", -1, 1).between("0", "9")
    source = (
        F.when(offset_like, F.regexp_replace("source_file", "/[0-9]+$", ""))
        .otherwise(F.col("source_file"))
        .alias("source")
    )
    offset = F.when(offset_like, F.regexp_extract("source_file", "/([0-9]+)$", 1))
    aggregates = [F.count(F.lit(1)).alias("n"), F.max(F.when(offset != "", offset.cast("long"))).alias("last")]
    keys = ("stream", "valid", "source")
    # quote_time: the name rules.quote_key_sql and the state's columns give a quote's event time.
    frame = parsed.select("*", F.col("reason").isNull().alias("valid"), source, F.col("event_time").alias("quote_time"))
    if not per_symbol:
        grouped = frame.groupBy(*keys).agg(*aggregates)
    else:
        newest = (
            "named_struct("
            + ", ".join(f"'{c}', {c}" for c in STATE_QUOTE_COLUMNS if c != "symbol")
            + f", 'should_reject_trades', {reject_sql('bid', 'offer', thresholds)})"
        )
        aggregates += [
            F.expr(f"min(CASE WHEN {_VALID_ORDER} THEN event_time END)").alias("first_order"),
            F.expr(f"max(CASE WHEN {_VALID_ORDER} THEN event_time END)").alias("last_order"),
            # max_by skips the rows whose key is NULL: every line but the valid quotes.
            F.expr(f"max_by({newest}, CASE WHEN {_VALID_QUOTE} THEN {quote_key_sql()} END)").alias("newest"),
            F.grouping("symbol").alias("not_by_symbol"),
        ]
        grouped = frame.groupingSets([list(keys), ["symbol"]], *keys, "symbol").agg(*aggregates)
    rows = grouped.toArrow()
    summary = BatchSummary()
    by_source = rows.filter(pc.equal(rows["not_by_symbol"], 1)) if per_symbol else rows
    for r in by_source.select(["stream", "valid", "source", "n", "last"]).to_pylist():
        summary.counts[(r["stream"], r["valid"])] = summary.counts.get((r["stream"], r["valid"]), 0) + r["n"]
        if r["last"] is not None:
            summary.last_offsets[r["source"]] = max(r["last"], summary.last_offsets.get(r["source"], -1))
    summary.files = sorted({r for r in by_source["source"].to_pylist()})
    if per_symbol:
        symbols = rows.filter(pc.and_(pc.equal(rows["not_by_symbol"], 0), pc.is_valid(rows["symbol"])))
        summary.bounds = symbols.filter(pc.is_valid(symbols["first_order"])).select(
            ["symbol", "first_order", "last_order"]
        )
        quoted = symbols.filter(pc.is_valid(symbols["newest"]))
        newest = quoted["newest"].combine_chunks()
        summary.newest = pa.Table.from_arrays(
            [quoted["symbol"].combine_chunks()] + [newest.field(c) for c in NEWEST_COLUMNS[1:]],
            names=list(NEWEST_COLUMNS),
        )
    return summary

"""A user's CHECK constraints on `quotes`, `symbol_state` and `alerts` (contract 5.5): the input line
whose row would break one goes to quarantine, its reason naming the table and the constraint, and
the rest of the batch commits. Evaluated by Spark, which commits such a batch (stream.batch), over
the row the line would become in each table, in a scope whose columns are exactly the table's.

A constraint holds only where it is true: null counts as broken, so no row that reaches a commit
can fail it.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from market_spread.domain.rules import Thresholds, reject_sql

Rules = Mapping[str, Mapping[str, str]]  # table -> constraint name -> its SQL
LINE = "__line"


def reason(table: str, name: str) -> str:
    """The quarantine reason of a row that breaks constraint `name` of `table`."""
    return f"check_constraint:{table}.{name}"


def _first_broken(table: str, rules: Mapping[str, str]) -> Column:
    """The reason of the first of `rules` (by name) the row in scope breaks, else null."""
    out = F.lit(None).cast("string")
    for name in sorted(rules, reverse=True):
        out = F.when(~F.coalesce(F.expr(rules[name]), F.lit(False)), F.lit(reason(table, name))).otherwise(out)
    return out


def _quote_rows(thresholds: Thresholds, batch_id: int) -> dict[str, list[Column]]:
    """The columns a valid quote's line gives each table it is written to (parsed columns in scope)."""
    time = F.col("event_time")
    reject = F.expr(reject_sql("bid", "offer", thresholds))
    return {
        "quotes": [
            F.col("symbol"),
            F.col("bid"),
            F.col("offer"),
            time.alias("quote_time"),
            F.col("seq"),
            F.lit(batch_id).cast("bigint").alias("batch_id"),
            reject.alias("should_reject_trades"),
            F.to_date(time).alias("quote_date"),
        ],
        "symbol_state": [
            F.col("symbol"),
            F.col("bid"),
            F.col("offer"),
            time.alias("quote_time"),
            reject.alias("should_reject_trades"),
            F.current_timestamp().alias("updated_at"),
        ],
    }


def quote_reasons(parsed: DataFrame, rules: Rules, thresholds: Thresholds, batch_id: int) -> DataFrame:
    """`parsed` (stream.parsing's shape) with the reason of each valid quote whose row in `quotes` or
    `symbol_state` breaks a constraint of that table."""
    out = parsed
    for table, columns in _quote_rows(thresholds, batch_id).items():
        if not rules.get(table):
            continue
        scoped = out.select(F.struct(*out.columns).alias(LINE), *columns)
        broken = _first_broken(table, rules[table])
        valid_quote = (F.col(f"{LINE}.stream") == "quotes") & F.col(f"{LINE}.reason").isNull()
        out = scoped.select(
            *[
                F.when(valid_quote, broken).otherwise(F.col(f"{LINE}.reason")).alias(c)
                if c == "reason"
                else F.col(f"{LINE}.{c}").alias(c)
                for c in out.columns
            ]
        )
    return out


def alert_reasons(alerts: DataFrame, rules: Mapping[str, str]) -> DataFrame:
    """`alerts` with a `broken` column: the reason of the first constraint of `alerts` each breaks."""
    return alerts.withColumn("broken", _first_broken("alerts", rules))


ORDER_KEYS = ("order_id", "account", "symbol", "side", "qty", "price")


def broken_orders(parsed: DataFrame, broken_alerts: DataFrame) -> DataFrame:
    """Quarantine rows (stream, raw, reason, source_file) of the order lines whose alerts break a
    constraint: the parsed orders (their text kept) matched to those alerts by every column an order
    gives its alert. Identical orders give identical alerts: each such line is quarantined once."""
    keys = broken_alerts.select(*ORDER_KEYS, F.col("order_time").alias("event_time"), "broken").distinct()
    orders = parsed.where("stream = 'orders' AND reason IS NULL").alias("o")
    on = [F.col(f"o.{c}").eqNullSafe(keys[c]) for c in (*ORDER_KEYS, "event_time")]
    return orders.join(keys, on).select(
        F.col("o.stream").alias("stream"),
        F.make_valid_utf8(F.col("o.line")).alias("raw"),
        F.col("broken").alias("reason"),
        F.col("o.source_file").alias("source_file"),
    )

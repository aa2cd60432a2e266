"""A batch under a user's CHECK constraints on `quotes`, `symbol_state` or `alerts` (contract 5.5):
the lines whose rows would break one go to quarantine, naming the table and the constraint, and the
rest of the batch commits. Such a batch takes Spark's plan, where Spark evaluates the constraints
(transforms.constraints), and the constrained tables are committed by delta-spark (lake.protocol),
so the engine that checks the rows is the one that commits them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from market_spread.transforms import constraints, parsing
from market_spread.transforms.constraints import Rules

if TYPE_CHECKING:
    from market_spread.stream.batch_run import BatchRun

CHECKED = ("quotes", "symbol_state", "alerts")  # the tables whose constraints quarantine a line


def user_rules(batch: BatchRun) -> Rules:
    """The CHECK constraints of the checked tables that have any, as their logs stand (read fresh
    at the batch's start: LakeTables.routes)."""
    found = {name: batch.tables.constraints(name) for name in CHECKED}
    return {name: rules for name, rules in found.items() if rules}


def parse(batch: BatchRun, lines: DataFrame, rules: Rules) -> DataFrame:
    """The batch's lines parsed, valid quotes whose rows break a constraint given its reason; the
    text of valid order lines kept when `alerts` has constraints (an alert that breaks one sends
    its order's line to quarantine), other valid lines' text dropped as usual."""
    quotes = bool(rules.get("quotes") or rules.get("symbol_state"))
    orders = bool(rules.get("alerts"))
    keep = ("quotes",) * quotes + ("orders",) * orders
    parsed = parsing.parse_lines(lines, batch.universe, keep)
    if quotes:
        parsed = constraints.quote_reasons(parsed, rules, batch.settings.thresholds, batch.batch_id)
        keep_text = F.col("reason").isNotNull() | ((F.col("stream") == "orders") & F.lit(orders))
        parsed = parsed.withColumn("line", F.when(keep_text, F.col("line")))
    return parsed


def split_alerts(batch: BatchRun, parsed: DataFrame, alerts: DataFrame, rules: Rules) -> tuple[DataFrame, pa.Table]:
    """The alerts that keep every constraint of `alerts`, and the quarantine rows (stream, raw,
    reason, source_file) of the orders whose alerts break one, counted into the batch's result as
    quarantined instead of valid orders (one job computes them)."""
    marked = constraints.alert_reasons(alerts, rules["alerts"])
    broken = constraints.broken_orders(parsed, marked.where("broken IS NOT NULL")).toArrow()
    result = batch.result
    result.orders -= broken.num_rows
    result.quarantined += broken.num_rows
    return marked.where("broken IS NULL").drop("broken"), broken

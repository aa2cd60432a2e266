"""A batch under a user's CHECK constraints on `quotes`, `symbol_state` or `alerts` (contract 5.5):
the lines whose rows would break one go to quarantine, naming the table and the constraint, and the
rest of the batch commits.

The kernel makes each line's rows, as for any batch; Spark evaluates the user's expressions over
them (a constraint is Spark SQL, as Delta checks it at commit): the rows handed over from Arrow as a
local relation, one small job per checked table. A quote is checked as its `quotes` row and its
`symbol_state` row before any order is checked, so a quarantined quote is no candidate for any
order; an order is checked as its alert. The constrained tables are committed by delta-spark
(lake.protocol), which checks the rows again. A constraint holds only where it is true: null counts
as broken, so no row that reaches a commit can fail it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column
from pyspark.sql import functions as F

from market_spread.kernel import steps
from market_spread.kernel.layout import ColumnBatch
from market_spread.lake import tables as lake_mod
from market_spread.lake.state import NEWEST_COLUMNS, state_rows

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from market_spread.stream.batch_run import BatchRun

Rules = Mapping[str, Mapping[str, str]]  # table -> constraint name -> its SQL
CHECKED = ("quotes", "symbol_state", "alerts")  # the tables whose constraints quarantine a line
ORDER_KEYS = ("order_id", "account", "symbol", "side", "qty", "price", "time", "seq")


def user_rules(batch: BatchRun) -> Rules:
    """The CHECK constraints of the checked tables that have any, as their logs stand (read fresh
    at the batch's start: LakeTables.routes)."""
    found = {name: batch.tables.constraints(name) for name in CHECKED}
    return {name: rules for name, rules in found.items() if rules}


def reason(table: str, name: str) -> str:
    """The quarantine reason of a row that breaks constraint `name` of `table`."""
    return f"check_constraint:{table}.{name}"


def _first_broken(table: str, rules: Mapping[str, str]) -> Column:
    """The reason of the first of `rules` (by name) the row breaks, else null."""
    out = F.lit(None).cast("string")
    for name in sorted(rules, reverse=True):
        out = F.when(~F.coalesce(F.expr(rules[name]), F.lit(False)), F.lit(reason(table, name))).otherwise(out)
    return out


def broken(spark: SparkSession, table: str, rows: pa.Table, rules: Mapping[str, str]) -> pa.Array:
    """Per row of `rows` (in `table`'s own columns, so a rule sees exactly them), the reason of the
    first constraint it breaks, else null; in the rows' order."""
    if not rules or not rows.num_rows:
        return pa.nulls(rows.num_rows, pa.string())
    frame = spark.createDataFrame(rows)
    return frame.select(_first_broken(table, rules).alias("broken")).toArrow()["broken"].combine_chunks()


def screen_quotes(batch: BatchRun, cols: ColumnBatch, rules: Rules) -> tuple[ColumnBatch, pa.Table | None]:
    """The batch without the quotes whose `quotes` or `symbol_state` row breaks a constraint (those
    of `quotes` first), and those lines' quarantine rows (stream, raw, reason, source_file)."""
    if not (rules.get("quotes") or rules.get("symbol_state")) or not cols.quotes.num_rows:
        return cols, None
    settings, schema = batch.settings, lake_mod.arrow_schema("quotes")
    history = steps.history(cols.quotes, batch.batch_id, settings.thresholds, schema)
    state = state_rows(history.select(list(NEWEST_COLUMNS)), datetime.now(UTC), batch.batch_id)
    why = broken(batch.spark, "quotes", history, rules.get("quotes", {}))
    why = pc.coalesce(why, broken(batch.spark, "symbol_state", state, rules.get("symbol_state", {})))
    return _without(cols, "quotes", why)


def screen_alerts(
    batch: BatchRun, cols: ColumnBatch, alerts: pa.Table, rules: Rules
) -> tuple[ColumnBatch, pa.Table, pa.Table | None]:
    """The batch and its alerts without the orders whose alert breaks a constraint of `alerts`, and
    those orders' lines as quarantine rows. Orders are matched to their alerts by every field an order
    gives its alert: identical orders give identical alerts, so each such line goes."""
    if not rules.get("alerts") or not alerts.num_rows:
        return cols, alerts, None
    why = broken(batch.spark, "alerts", alerts, rules["alerts"])
    hit = pc.is_valid(why)
    if not pc.any(hit).as_py():
        return cols, alerts, None
    keyed = alerts.select(["order_id", "account", "symbol", "side", "qty", "price", "order_time", "order_seq"])
    by_key = dict(zip(_keys(keyed.filter(hit)), why.filter(hit).to_pylist()))
    order_why = pa.array([by_key.get(k) for k in _keys(cols.orders.select(list(ORDER_KEYS)))], pa.string())
    kept, bad = _without(cols, "orders", order_why)
    return kept, alerts.filter(pc.invert(hit)), bad


def _keys(rows: pa.Table) -> list[tuple]:
    """Rows as tuples, times as µs: an alert's and its order's fields compare equal."""
    columns = [pc.cast(c, pa.int64()) if pa.types.is_timestamp(c.type) else c for c in rows.columns]
    return list(zip(*(c.to_pylist() for c in columns)))


def _without(cols: ColumnBatch, feed: str, why: pa.Array) -> tuple[ColumnBatch, pa.Table | None]:
    """`cols` without the `feed` rows that have a reason in `why`, and their lines' quarantine rows."""
    hit = pc.is_valid(why)
    if not pc.any(hit).as_py():
        return cols, None
    assert cols.texts is not None, "a constrained batch is parsed with its lines' text (steps.parse keep_text)"
    text = cols.texts[feed].filter(hit)
    bad = pa.table(
        {
            "stream": pa.array([feed] * text.num_rows, pa.string()),
            "raw": text["raw"],
            "reason": why.filter(hit),
            "source_file": text["source_file"],
        }
    )
    kept = {f: getattr(cols, f) for f in ("quotes", "orders")}
    kept[feed] = kept[feed].filter(pc.invert(hit))
    texts = dict(cols.texts)
    texts[feed] = cols.texts[feed].filter(pc.invert(hit))
    return ColumnBatch(kept["quotes"], kept["orders"], cols.sources, texts), bad

"""Reading and updating the quote state: the symbol_state table (newest quote per symbol, kept by a
Delta MERGE) and the quote history read for late orders."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc

from market_spread.domain.rules import quote_key_greater_sql, quote_key_sql
from market_spread.kernel import columns
from market_spread.lake import tables as lake_mod
from market_spread.lake.lake_tables import LakeTables

# A stored quote's columns: what an order may be checked against.
STATE_QUOTE_COLUMNS = ("symbol", "bid", "offer", "quote_time", "seq")

# The state table's own types, for its quote columns (the driver's copy, lake.state_mirror, uses them too).
ARROW_SCHEMA = pa.schema([lake_mod.arrow_schema("symbol_state").field(c) for c in STATE_QUOTE_COLUMNS])


# A symbol's newest quote: the state's columns and its reject flag (the state MERGE's source).
NEWEST_COLUMNS = (*STATE_QUOTE_COLUMNS, "should_reject_trades")


# The day partitions read for late orders before the older ones (see late_history_rows).
LATE_LOOKBACK_DAYS = 1

# The history of late orders is first read from this long before the batch's first late order: a
# symbol quoted within it needs nothing older (see late_history_rows).
LATE_RECENT_WINDOW = timedelta(minutes=1)


# The most names one SQL `IN (...)` list takes: delta-rs's query engine overflowed its stack (a
# segfault of the whole stream) on a list of 40,000 symbols, and answered at 20,000.
IN_LIMIT = 2_000


def in_lists(symbols: list[str]) -> list[str]:
    """`symbols` as SQL string literals, IN_LIMIT a list (one list, however short, for none)."""
    quoted = ["'" + s.replace("'", "''") + "'" for s in symbols] or ["NULL"]
    return [", ".join(quoted[i : i + IN_LIMIT]) for i in range(0, len(quoted), IN_LIMIT)]


def late_history_rows(tables: LakeTables, late: list[dict]) -> pa.Table:
    """The history quotes that late orders (older than their symbol's stored state) may be checked
    against, read on the driver with delta-rs, as Arrow (STATE_QUOTE_COLUMNS). `late`: symbol,
    first_order and last_order (aware datetimes) of each symbol with late orders.

    Why on the driver: after commits made by delta-rs, Spark must rebuild the quote history's
    snapshot (Spark jobs) before it can read it, which made batches with late orders the latency's
    tail (measured: docs/performance.md, row 'late orders' history read with delta-rs'). delta-rs
    reads the log and the files directly. The result is small (see below), so the state read by
    Spark (a universe too large for the driver's copy) uses it too.

    Read in widening steps, each only for the symbols the steps before did not cover (a symbol is
    covered once a quote at or before its first late order is found): the minute before the batch's
    first late order (files outside it are skipped by their quote_time statistics), the rest of the
    day partitions from LATE_LOOKBACK_DAYS before, then everything older. Of what is read, each
    symbol keeps only its newest quote time at or before its first late order and what follows up
    to its last late order (`from_current_quote`): the as-of choice needs nothing older. Reading a
    whole day for every late symbol grew with the day (measured: docs/performance.md, row 'late
    orders' history in widening steps')."""
    firsts = {r["symbol"]: r["first_order"] for r in late}
    lasts = {r["symbol"]: r["last_order"] for r in late}
    first = min(firsts.values())
    recent_from = first - LATE_RECENT_WINDOW
    floor = first.date() - timedelta(days=LATE_LOOKBACK_DAYS)
    ceiling = max(lasts.values()).date()

    def date(d) -> str:
        return f"CAST('{d.isoformat()}' AS DATE)"

    def instant(t: datetime) -> str:
        return f"CAST('{t.astimezone(UTC).isoformat()}' AS TIMESTAMP)"

    def read(symbols: list[str], where: str) -> pa.Table:
        # With every quote committed before this batch (lake.commits); DataFusion answers with string
        # views, Spark with a widened type where a user widened one: cast to ours.
        select = f"SELECT {', '.join(STATE_QUOTE_COLUMNS)} FROM {{t}} WHERE {where}"
        parts = [tables.query("quotes", f"{select} AND symbol IN ({names})") for names in in_lists(symbols)]
        rows = (pa.concat_tables(parts) if len(parts) > 1 else parts[0]).cast(ARROW_SCHEMA)
        # Up to each symbol's last late order: later quotes cannot be current for any of them.
        return rows.filter(pc.less_equal(rows["quote_time"], _per_row(rows, lasts)))

    steps = [  # disjoint: no quote is read twice
        f"quote_date >= {date(recent_from.date())} AND quote_date <= {date(ceiling)} AND quote_time >= {instant(recent_from)}",
        f"quote_date >= {date(floor)} AND quote_date <= {date(ceiling)} AND quote_time < {instant(recent_from)}",
        f"quote_date < {date(floor)}",
    ]
    parts, uncovered = [], list(firsts)
    for where in steps:
        rows = read(uncovered, where)
        parts.append(rows)
        covered = set(rows.filter(pc.less_equal(rows["quote_time"], _per_row(rows, firsts)))["symbol"].to_pylist())
        uncovered = [s for s in uncovered if s not in covered]
        if not uncovered:
            break
    return from_current_quote(pa.concat_tables(parts), firsts)


def _per_row(rows: pa.Table, by_symbol: Mapping[str, datetime | None]) -> pa.Array:
    """`by_symbol[symbol]` for each row of `rows` (None where a symbol has no value), typed as its
    quote_time so that Arrow compares them."""
    return pa.array([by_symbol.get(s) for s in rows["symbol"].to_pylist()], type=rows.schema.field("quote_time").type)


def from_current_quote(rows: pa.Table, first_order: dict[str, datetime]) -> pa.Table:
    """Per symbol, the quotes from its newest quote time at or before `first_order[symbol]` on (all
    of a symbol's rows when it has none). Exact for the as-of choice: rules.quote_key orders by
    time first, so a quote older than that time is never the newest at or before any later order."""
    if rows.num_rows == 0:
        return rows
    start = (
        rows.filter(pc.less_equal(rows["quote_time"], _per_row(rows, first_order)))
        .group_by("symbol")
        .aggregate([("quote_time", "max")])
    )
    floor = _per_row(rows, dict(zip(start["symbol"].to_pylist(), start["quote_time_max"].to_pylist())))
    keep = pc.or_kleene(pc.is_null(floor), pc.greater_equal(rows["quote_time"], floor))
    return rows.filter(keep)


def merge_state(tables: LakeTables, newest: pa.Table, batch_id: int, guard=None) -> None:
    """Upsert the newest quote per symbol (`newest`: one row per symbol, NEWEST_COLUMNS, and a
    `batch_id` each where staged over several batches, lake.state_writes); an
    older quote (by the quote key) never overwrites. Through the table's writer (lake.lake_tables:
    delta-rs's MERGE, or Spark's where the protocol asks for it); the commit carries the batch's
    mark and honours the table's features (Change Data Feed records each update's pre- and
    post-image)."""
    rows = state_rows(newest, datetime.now(UTC), batch_id)
    tables.merge(
        "symbol_state",
        rows,
        batch_id,
        quote_key_greater_sql(),
        f"{quote_key_sql('s.')} > {quote_key_sql('t.')}",
        guard,
        replace=lambda stored: upserted(stored, rows),
    )


def upserted(stored: pa.Table, rows: pa.Table) -> pa.Table:
    """The state after the MERGE of `rows` into `stored` (both one row per symbol), in Arrow: a
    stored row is replaced only by a higher quote key (the MERGE's condition, rules.quote_key), a new
    symbol added. The order is kernel.columns.newest's; the stored rows come after the new ones and
    its sort is stable, so an exact tie keeps the stored row, as the MERGE's strict `>` does."""
    return newest_rows(pa.concat_tables([rows, stored.select(rows.schema.names).cast(rows.schema)]))


def newest_rows(rows: pa.Table) -> pa.Table:
    """Each symbol's row of `rows` (state or history rows, `quote_time` and any other columns) with
    the highest quote key: kernel.columns.newest, whose stable sort keeps the last of exact ties."""
    names = rows.schema.names
    keyed = rows.rename_columns(["time" if n == "quote_time" else n for n in names])
    return columns.newest(keyed).rename_columns(names)


def state_rows(newest: pa.Table, updated_at: datetime, batch_id: int) -> pa.Table:
    """symbol_state rows: the newest quotes (`newest_per_symbol` in Arrow), stamped with the time and
    `batch_id` (or each row's own `batch_id`, where `newest` has the column: staged batches)."""
    schema = lake_mod.arrow_schema("symbol_state")
    n = newest.num_rows
    stamped = newest.select([c for c in schema.names if c in newest.column_names and c != "batch_id"])
    stamped = stamped.append_column("updated_at", pa.array([updated_at] * n, type=schema.field("updated_at").type))
    own = newest["batch_id"] if "batch_id" in newest.column_names else pa.array([batch_id] * n, type=pa.int64())
    stamped = stamped.append_column("batch_id", pc.cast(own, pa.int64()))
    return stamped.select(schema.names).cast(schema)

"""The state MERGE through delta-rs (the stream's writer for a table it can write) leaves exactly the
table that Spark's MERGE leaves (the writer for a table whose protocol needs delta-spark), keeps the
newer-only rule, and marks its commits with the batch (Delta's txn)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal as D

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from market_spread.domain.rules import quote_key_sql
from market_spread.kernel import columns
from market_spread.lake import tables as lake_mod
from market_spread.lake.lake_tables import LakeTables
from market_spread.lake.state import merge_state, state_rows
from tests.helpers.lake import read_table

SCHEMA = "symbol STRING, bid DECIMAL(18,8), offer DECIMAL(18,8), quote_time TIMESTAMP, seq BIGINT, should_reject_trades BOOLEAN"
T0, T1 = datetime(2026, 11, 23, 14, 30), datetime(2026, 11, 23, 14, 31)
BATCHES = [
    [("AAPL", D("1.10"), D("1.20"), T0, 5, True), ("MSFT", D("2.00"), D("2.01"), T0, None, False)],
    # older AAPL (ignored), same-time MSFT with a seq (wins over none), new IBM
    [
        ("AAPL", D("1.00"), D("1.01"), T0, 4, False),
        ("MSFT", D("2.10"), D("2.11"), T0, 1, False),
        ("IBM", D("3"), D("3.5"), T1, 9, True),
    ],
    # exact tie on time and seq: the higher bid wins; IBM replayed unchanged (a no-op)
    [("AAPL", D("1.15"), D("1.20"), T0, 5, False), ("IBM", D("3"), D("3.5"), T1, 9, True)],
]
EXPECTED = {"AAPL": (D("1.15000000"), 5, False), "MSFT": (D("2.10000000"), 1, False), "IBM": (D("3.00000000"), 9, True)}


def _newest(spark, rows: list) -> pa.Table:
    """The batch's newest quote per symbol (kernel.columns.newest), as the stream hands it to the MERGE."""
    table = spark.createDataFrame(rows, SCHEMA).toArrow()
    keyed = table.rename_columns(["time" if n == "quote_time" else n for n in table.column_names])
    return columns.newest(keyed).rename_columns(table.column_names)


def run_merges(spark, lake, writer: str, batches: list = BATCHES) -> dict:
    lake_mod.ensure_tables(spark, lake)
    tables = LakeTables(str(lake), "a-stream", spark)
    for batch_id, rows in enumerate(batches):
        newest = _newest(spark, rows)
        if writer == "delta-rs":
            merge_state(tables, newest, batch_id)
        else:  # the route of a table whose protocol delta-rs cannot write
            source = spark.createDataFrame(state_rows(newest, datetime.now(UTC), batch_id))
            tables.spark_merge("symbol_state", source, batch_id, f"{quote_key_sql('s.')} > {quote_key_sql('t.')}")
    state = read_table(spark, lake, "symbol_state")
    return {
        r.symbol: tuple(r[1:])
        for r in state.select(
            "symbol", "bid", "offer", "quote_time", "seq", "should_reject_trades", "batch_id"
        ).collect()
    }


@pytest.mark.parametrize("writer", ["delta-rs", "spark"])
def test_state_merge_keeps_the_newest_quote_per_symbol(spark, tmp_path, writer):
    table = run_merges(spark, tmp_path / "lake", writer)
    assert {s: (v[0], v[3], v[4]) for s, v in table.items()} == EXPECTED
    assert table["AAPL"][5] == 2 and table["MSFT"][5] == 1, "batch_id names the batch that last moved the row"


def test_driver_and_spark_merges_leave_the_same_table(spark, tmp_path, monkeypatch):
    on_driver = run_merges(spark, tmp_path / "driver", "delta-rs")
    by_spark = run_merges(spark, tmp_path / "spark", "spark")
    assert on_driver == by_spark
    for where in ("driver", "spark"):
        table = DeltaTable(lake_mod.table_path(tmp_path / where, "symbol_state"))
        # Spark MERGEs; the driver, with no Change Data Feed to record, overwrites the state in one commit.
        merges = [h for h in table.history() if h["operation"] == ("WRITE" if where == "driver" else "MERGE")]
        assert len(merges) == len(BATCHES), where
        assert [lake_mod.tagged_batch(m.get("userMetadata")) for m in reversed(merges)] == list(range(len(BATCHES)))
        assert table.transaction_version("a-stream") == len(BATCHES) - 1, f"{where}: the last batch's txn"


def test_driver_and_spark_merges_agree_over_random_batches_with_ties(spark, tmp_path, monkeypatch):
    """Ties at every level of rules.quote_key (time, seq or none, bid, offer), older quotes after
    newer ones, symbols coming and going: the Arrow rule (lake.state.merged_state) picks as Spark's
    MERGE does, batch after batch."""
    rng = random.Random(11)
    batches = []
    for _ in range(6):
        rows = {}
        for _ in range(60):
            bid = D(rng.choice(["1.10", "1.20"]))
            rows[f"S{rng.randrange(25)}"] = (
                bid,
                D(rng.choice(["1.30", "1.40"])),
                T0 + timedelta(milliseconds=rng.randrange(3)),
                rng.choice([None, -1, 0, 2]),
                bid < D("1.15"),
            )
        batches.append([(s, *v) for s, v in rows.items()])  # one row per symbol, as the MERGE's source
    assert run_merges(spark, tmp_path / "driver", "delta-rs", batches) == run_merges(
        spark, tmp_path / "spark", "spark", batches
    )


def test_reads_by_symbol_take_any_number_of_symbols(tmp_path) -> None:
    """The stored quotes of a batch's symbols and the late orders' history are read with SQL `IN`
    lists; delta-rs's engine overflowed its stack on 40,000 names (the stream died at 1,000,000
    symbols): lists are cut at IN_LIMIT, and a long one reads the state table once instead."""
    from market_spread.lake.state import IN_LIMIT, late_history_rows
    from market_spread.lake.state_mirror import StateMirror

    lake = tmp_path / "lake"
    for name in ("symbol_state", "quotes"):
        lake_mod.create_table(lake, name)
    stored = [f"S{i:05d}" for i in range(0, 50_000, 5_000)]  # 10 symbols with a quote
    tables = LakeTables(lake)
    rows = state_rows(_quotes(stored, T0), datetime(2026, 11, 23, 15, tzinfo=UTC), 0)
    tables.append("symbol_state", rows, 0)
    tables.append("quotes", _history(_quotes(stored, T0)), 0)
    wanted = [f"S{i:05d}" for i in range(50_000)]  # far past IN_LIMIT, every stored symbol among them
    assert len(wanted) > 20 * IN_LIMIT
    mirror = StateMirror(LakeTables(lake), 0)
    assert sorted(mirror._read(wanted)["symbol"].to_pylist()) == stored
    assert sorted(mirror._read(wanted[:3])["symbol"].to_pylist()) == ["S00000"]
    first = T1.replace(tzinfo=UTC)
    late = [{"symbol": s, "first_order": first, "last_order": first} for s in wanted]
    assert sorted(set(late_history_rows(LakeTables(lake), late)["symbol"].to_pylist())) == stored


def _quotes(symbols: list[str], at: datetime) -> pa.Table:
    """One quote per symbol at `at`, as the kernel's newest quotes (state MERGE source)."""
    n = len(symbols)
    return pa.table(
        {
            "symbol": symbols,
            "bid": pa.array([D("1.10")] * n, pa.decimal128(18, 8)),
            "offer": pa.array([D("1.20")] * n, pa.decimal128(18, 8)),
            "quote_time": pa.array([at.replace(tzinfo=UTC)] * n, pa.timestamp("us", tz="UTC")),
            "seq": pa.array([1] * n, pa.int64()),
            "should_reject_trades": [True] * n,
        }
    )


def _history(quotes: pa.Table) -> pa.Table:
    schema = lake_mod.arrow_schema("quotes")
    n = quotes.num_rows
    extra = {"batch_id": pa.array([0] * n, pa.int64()), "quote_date": pa.array([T0.date()] * n, pa.date32())}
    return pa.table(
        {f.name: (quotes[f.name] if f.name in quotes.column_names else extra[f.name]) for f in schema}
    ).cast(schema)

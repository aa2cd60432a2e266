"""The state MERGE done from the driver (the stream's path: Arrow rows, delta-rs's MERGE) leaves
exactly the table that Spark's MERGE leaves, keeps the newer-only rule, and marks its commits with
the batch (Delta's txn)."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from decimal import Decimal as D

import pytest
from deltalake import DeltaTable

from market_spread.lake import tables as lake_mod
from market_spread.lake.lake_tables import LakeTables
from market_spread.lake.state import merge_state, newest_of_rows, newest_per_symbol
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


def run_merges(spark, lake, monkeypatch, driver_commits: str, batches: list = BATCHES) -> dict:
    monkeypatch.setenv("MARKET_SPREAD_DRIVER_COMMITS", driver_commits)
    lake_mod.ensure_tables(spark, lake)
    tables = LakeTables(str(lake), "a-stream", spark)
    for batch_id, rows in enumerate(batches):
        newest = newest_per_symbol(spark.createDataFrame(rows, SCHEMA))
        # On the driver (Arrow), as the stream hands it over: merged by delta-rs, or by Spark when off.
        merge_state(tables, newest.toArrow(), batch_id)
    state = read_table(spark, lake, "symbol_state")
    return {
        r.symbol: tuple(r[1:])
        for r in state.select(
            "symbol", "bid", "offer", "quote_time", "seq", "should_reject_trades", "batch_id"
        ).collect()
    }


@pytest.mark.parametrize("driver_commits", ["on", "off"])
def test_state_merge_keeps_the_newest_quote_per_symbol(spark, tmp_path, monkeypatch, driver_commits):
    table = run_merges(spark, tmp_path / "lake", monkeypatch, driver_commits)
    assert {s: (v[0], v[3], v[4]) for s, v in table.items()} == EXPECTED
    assert table["AAPL"][5] == 2 and table["MSFT"][5] == 1, "batch_id names the batch that last moved the row"


def test_driver_and_spark_merges_leave_the_same_table(spark, tmp_path, monkeypatch):
    on_driver = run_merges(spark, tmp_path / "driver", monkeypatch, "on")
    by_spark = run_merges(spark, tmp_path / "spark", monkeypatch, "off")
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
    assert run_merges(spark, tmp_path / "driver", monkeypatch, "on", batches) == run_merges(
        spark, tmp_path / "spark", monkeypatch, "off", batches
    )


def test_the_newest_quote_from_rows_on_the_driver_is_the_one_spark_picks(spark):
    """A large batch takes its newest quote per symbol from its history rows on the driver
    (lake.state.newest_of_rows), not from a Spark job: the same rows, the same columns and types,
    over ties at every level of rules.quote_key (time, seq or none, bid, offer)."""
    rng = random.Random(7)
    rows = []
    for _ in range(3_000):
        bid = D(rng.choice(["1.10", "1.20"]))
        rows.append(
            (
                f"S{rng.randrange(40)}",
                bid,
                D(rng.choice(["1.30", "1.40"])),
                T0 + timedelta(milliseconds=rng.randrange(3)),
                rng.choice([None, -1, 0, 2]),
                bid < D("1.15"),
            )
        )  # derived from the quote, as the stream derives it
    quotes = spark.createDataFrame(rows, SCHEMA)
    by_spark = newest_per_symbol(quotes).toArrow()
    on_driver = newest_of_rows(quotes.toArrow())
    assert on_driver.schema == by_spark.schema
    assert sorted(on_driver.to_pylist(), key=lambda r: r["symbol"]) == sorted(
        by_spark.to_pylist(), key=lambda r: r["symbol"]
    )
    assert newest_of_rows(quotes.limit(0).toArrow()).num_rows == 0

"""Users own their tables (contract 4): a running stream meets Delta features turned on from Spark
one after another, on local disk and on S3, and keeps committing correct alerts through the library
that can write each table (lake.protocol); the features stay on, Spark and delta-rs (where it reads
the table) see the same rows.

`make test` turns them on in two steps (SHORT); MARKET_SPREAD_RELIABILITY=full (`make reliability`)
one feature at a time on every table where Delta allows it (STEPS): a step costs a few seconds of
ALTERs and a batch committed through delta-spark."""

from __future__ import annotations

import time

import pytest
from deltalake import DeltaTable

from market_spread.lake import tables as lake_mod
from market_spread.lake.protocol import FeatureNotHonoured
from market_spread.runtime.storage import delta_rs_target
from tests.helpers.campaign import FULL
from tests.helpers.lake import duckdb_counts, rows, rows_with_spark
from tests.helpers.landing import land
from tests.helpers.records import order, quote
from tests.stream.test_freshness import running, wait_for

SYMBOLS = [f"F{k}" for k in range(4)]
DAY = "2026-11-24T10:"
ALL = lake_mod.TABLES
CLUSTER_BY = {"alerts": "symbol", "symbol_state": "symbol", "quarantine": "stream", "batch_metrics": "batch_id"}
# (what a user does, per table: the statements), in the order the test turns them on.
STEPS: list[tuple[str, dict[str, list[str]]]] = [
    (
        "deletion vectors, row tracking, in-commit timestamps",
        {
            t: [
                "SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', 'delta.enableRowTracking' = 'true', "
                "'delta.enableInCommitTimestamps' = 'true')"
            ]
            for t in ALL
        },
    ),
    ("liquid clustering", {t: [f"CLUSTER BY ({c})"] for t, c in CLUSTER_BY.items()}),
    (
        "change data feed, column mapping by name",
        {
            t: ["SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true', 'delta.columnMapping.mode' = 'name')"]
            for t in ALL
        },
    ),
    (
        "CHECK constraints",
        {
            "alerts": ["ADD CONSTRAINT sane_qty CHECK (qty < 1000000)"],
            "quotes": ["ADD CONSTRAINT bid_below_1000 CHECK (bid < 1000)"],
            "symbol_state": ["ADD CONSTRAINT offer_below_5000 CHECK (offer < 5000)"],
        },
    ),
    (
        "type widening",
        {
            t: ["SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')", f"ALTER COLUMN {c} TYPE DECIMAL(20, 8)"]
            for t, c in (("alerts", "price"), ("quotes", "offer"), ("symbol_state", "bid"))
        },
    ),
    ("v2 checkpoints", {t: ["SET TBLPROPERTIES ('delta.checkpointPolicy' = 'v2')"] for t in ALL}),
]
# Every feature in two steps, each table's in as few statements as Delta allows; the tables whose
# rows the checks depend on get them all, the product's own (quarantine, batch_metrics) the cheap
# ones (a protocol change, no rewrite of their rows), which move them to delta-spark as well.
CHECKED = ("alerts", "quotes", "symbol_state")
OWN = ("quarantine", "batch_metrics")
SHORT: list[tuple[str, dict[str, list[str]]]] = [
    (
        "deletion vectors, row tracking, in-commit timestamps, change data feed, column mapping",
        {
            **{
                t: [
                    "SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', 'delta.enableRowTracking' = 'true', "
                    "'delta.enableInCommitTimestamps' = 'true', 'delta.enableChangeDataFeed' = 'true', "
                    "'delta.columnMapping.mode' = 'name')"
                ]
                for t in CHECKED
            },
            **{
                t: [
                    "SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', 'delta.enableInCommitTimestamps' = 'true')"
                ]
                for t in OWN
            },
        },
    ),
    (
        "liquid clustering, CHECK constraints, type widening, v2 checkpoints",
        {
            **{
                t: [
                    "SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true', 'delta.checkpointPolicy' = 'v2')",
                    *STEPS[1][1].get(t, []),
                    *STEPS[3][1].get(t, []),
                    *STEPS[4][1].get(t, [])[1:],
                ]
                for t in CHECKED
            },
            **{t: ["SET TBLPROPERTIES ('delta.checkpointPolicy' = 'v2')"] for t in OWN},
        },
    ),
]
PLAN = STEPS if FULL else SHORT
EXPECTED_FEATURES = {
    "alerts": {"deletionVectors", "rowTracking", "inCommitTimestamp", "clustering", "changeDataFeed"}
    | {"columnMapping", "checkConstraints", "typeWidening", "v2Checkpoint"},
    "quotes": {"deletionVectors", "rowTracking", "inCommitTimestamp", "changeDataFeed", "columnMapping"}
    | {"checkConstraints", "typeWidening", "v2Checkpoint"},
}


def turn_on(spark, lake, statements: dict[str, list[str]]) -> None:
    """Each table's statements in order, the tables side by side (as several users might)."""
    from concurrent.futures import ThreadPoolExecutor

    def alter(table: str) -> None:
        for sql in statements[table]:
            spark.sql(f"ALTER TABLE delta.`{lake_mod.table_path(lake, table)}` {sql}")

    with ThreadPoolExecutor(max_workers=max(1, len(statements))) as pool:
        list(pool.map(alter, statements))


def step_input(step: int) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    """A step's quotes (even symbols wide, odd narrow, a minute apart per step), its orders half a
    minute later, and the alerts they must give: (order id, reason)."""
    minute = f"{10 + step:02d}"
    quotes = [
        quote(s, f"{DAY}{minute}:00Z", "10.00", "11.00" if k % 2 == 0 else "10.01") for k, s in enumerate(SYMBOLS)
    ]
    orders = [order(f"{s}-{step}", s, f"{DAY}{minute}:30Z") for s in SYMBOLS] + [
        order(f"nomarket-{step}", "F9", f"{DAY}{minute}:30Z")
    ]
    alerts = [(f"{s}-{step}", "wide_spread") for k, s in enumerate(SYMBOLS) if k % 2 == 0]
    return quotes, orders, alerts + [(f"nomarket-{step}", "no_market_data")]


def breaking_input(step: int) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    """Lines whose rows break the constraints (the step's narrow and wide quotes stand): a quote of
    F0 whose bid breaks `quotes`', one of F1 whose offer breaks `symbol_state`'s, both between the
    step's quotes and its orders (were they taken, F0's orders would see a narrow quote and F1's a
    wide one); an order of F0 whose alert breaks `alerts`'. Each goes to quarantine, naming them."""
    minute = f"{10 + step:02d}"
    quotes = [quote("F0", f"{DAY}{minute}:10Z", "2000.00", "2000.01"), quote("F1", f"{DAY}{minute}:10Z", "10", "6000")]
    orders = [order(f"F0-huge-{step}", "F0", f"{DAY}{minute}:40Z", qty="5000000")]
    reasons = [
        (quotes[0], "check_constraint:quotes.bid_below_1000"),
        (quotes[1], "check_constraint:symbol_state.offer_below_5000"),
        (orders[0], "check_constraint:alerts.sane_qty"),
    ]
    return quotes, orders, reasons


def features(lake, table: str) -> set[str]:
    uri, options = delta_rs_target(lake_mod.table_path(lake, table))
    protocol = DeltaTable(uri, storage_options=options).protocol()
    return set(protocol.writer_features or ())


def test_features_turned_on_one_after_another_mid_stream_keep_it_committing_correct_alerts(spark, place):
    landing, lake = place / "landing", place / "lake"
    expected: list[tuple[str, str]] = []
    quarantined: list[tuple[str, str]] = []
    with running(spark, landing, lake, symbols=[*SYMBOLS, "F9"]) as (batches, query):
        for step, (what, statements) in enumerate([("none", {}), *PLAN]):
            t0 = time.monotonic()
            turn_on(spark, lake, statements)
            t1 = time.monotonic()
            quotes, orders, alerts = step_input(step)
            if any("ADD CONSTRAINT" in alter for alters in statements.values() for alter in alters):
                bad_quotes, bad_orders, reasons = breaking_input(step)
                quotes, orders, quarantined = quotes + bad_quotes, orders + bad_orders, quarantined + reasons
            target = sum(b.input_lines for b in batches) + len(quotes) + len(orders)
            land(landing, "quotes", quotes)
            land(landing, "orders", orders)
            wait_for(batches, query, lambda n=target: sum(b.input_lines for b in batches) >= n)
            print(f"{what}: turned on in {t1 - t0:.1f}s, its input committed in {time.monotonic() - t1:.1f}s")
            expected += alerts
            if step == 1:  # a data-protection request: Spark's DELETE writes a deletion vector
                spark.sql(f"DELETE FROM delta.`{lake_mod.table_path(lake, 'alerts')}` WHERE order_id = 'F0-0'")
                expected.remove(("F0-0", "wide_spread"))
        assert query.isActive and query.exception() is None
        last = batches[-1]
    assert sorted((a["order_id"], a["reason"]) for a in rows_with_spark(spark, lake, "alerts")) == sorted(expected)
    assert sorted((q["raw"], q["reason"]) for q in rows_with_spark(spark, lake, "quarantine")) == sorted(quarantined)
    assert sum(b.quarantined for b in batches) == 3 and sum(b.input_lines for b in batches) == sum(
        b.quotes + b.orders + b.quarantined for b in batches
    ), "every line in exactly one place"
    for table, wanted in EXPECTED_FEATURES.items():
        assert wanted <= features(lake, table), f"{table}: a user's feature was turned off"
    assert last.writers["alerts"][0] == "delta-spark" and "rowTracking" in last.writers["alerts"][1], last.writers
    for table in ("quarantine", "batch_metrics"):  # no type widening: delta-rs reads them
        assert rows(spark, lake, table, drop=()) == rows_with_spark(spark, lake, table, drop=()), table
    if not place.s3:  # and a delta-kernel reader, DuckDB's, sees the rows Spark sees in every table
        assert duckdb_counts(lake, ALL) == {t: len(rows_with_spark(spark, lake, t)) for t in ALL}


def test_a_feature_no_library_can_write_stops_the_stream_in_one_line_with_exit_5(spark, tmp_path, capfd, monkeypatch):
    """Deletion vectors stand in for a feature neither library writes (say a commit coordinator's):
    the run after a user turns it on stops before its batch commits anything, with one line naming
    the table, the feature and the statement that drops it, and exit code 5."""
    from market_spread.lake import protocol
    from market_spread.stream.query import run_query
    from market_spread.stream.spec import StreamSpec

    monkeypatch.setattr(protocol, "DELTA_SPARK_WRITES", protocol.DELTA_SPARK_WRITES - {"deletionVectors"})
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    spec = StreamSpec(lake=lake, symbols=SYMBOLS, landing=landing, available_now=True)
    quotes, orders, _ = step_input(0)
    land(landing, "quotes", quotes)
    assert run_query(spark, spec) == 0
    turn_on(spark, lake, {"alerts": ["SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"]})
    before = {t: DeltaTable(lake_mod.table_path(lake, t)).version() for t in ALL}
    land(landing, "orders", orders)
    capfd.readouterr()
    assert run_query(spark, spec) == FeatureNotHonoured.exit_code == 5
    said = [line for line in capfd.readouterr().err.splitlines() if "market-spread stream: error" in line]
    assert len(said) == 1, said
    assert "table alerts has the Delta feature deletionVectors" in said[0] and "DROP FEATURE deletionVectors" in said[0]
    assert {t: DeltaTable(lake_mod.table_path(lake, t)).version() for t in ALL} == before, "nothing committed"


@pytest.fixture(autouse=True)
def _no_compaction(monkeypatch):
    """Compaction is tested elsewhere; here it would only add commits between the steps."""
    monkeypatch.setenv("MARKET_SPREAD_COMPACT_EVERY", "0")


# One table per feature, as a user turns it on (make reliability: a minute of Spark DDL).
PROBES = {
    "deletion vectors": ["SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')", "DELETE FROM {t} WHERE n = 2"],
    "row tracking": ["SET TBLPROPERTIES ('delta.enableRowTracking' = 'true')"],
    "clustering": ["CLUSTER BY (symbol)"],
    "in-commit timestamps": ["SET TBLPROPERTIES ('delta.enableInCommitTimestamps' = 'true')"],
    "change data feed": ["SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')"],
    "column mapping": ["SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name')"],
    "type widening": ["SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')", "ALTER COLUMN n TYPE BIGINT"],
    "v2 checkpoints": ["SET TBLPROPERTIES ('delta.checkpointPolicy' = 'v2')"],
}


@pytest.mark.skipif(not FULL, reason="make reliability (MARKET_SPREAD_RELIABILITY=full): a minute of DDL")
@pytest.mark.parametrize("feature", PROBES)
def test_the_routes_feature_sets_agree_with_what_delta_rs_does(spark, tmp_path, feature):
    """lake.protocol's sets, measured once, against deltalake as installed: a table is routed to
    delta-rs exactly when delta-rs commits to it, and read by delta-rs exactly when it reads it."""
    import pyarrow as pa
    from deltalake import QueryBuilder, write_deltalake

    from market_spread.lake.protocol import DELTA_RS, route

    path = str(tmp_path / "t")
    spark.sql(f"CREATE TABLE delta.`{path}` (symbol STRING, n INT) USING delta")
    spark.sql(f"INSERT INTO delta.`{path}` VALUES ('A', 1), ('B', 2)")
    for sql in PROBES[feature]:
        spark.sql(sql.format(t=f"delta.`{path}`") if sql.startswith("DELETE") else f"ALTER TABLE delta.`{path}` {sql}")
    chosen = route(DeltaTable(path), "t", path)
    try:
        QueryBuilder().register("t", DeltaTable(path)).execute("SELECT * FROM t").read_all()
        reads = True
    except Exception:  # noqa: BLE001 - delta-rs refuses the table's reader features
        reads = False
    written = DeltaTable(path).schema().to_arrow()
    try:
        write_deltalake(DeltaTable(path), pa.table({"symbol": ["C"], "n": [3]}).cast(pa.schema(written)), mode="append")
        writes = True
    except Exception:  # noqa: BLE001 - delta-rs refuses the table's writer features
        writes = False
    assert (chosen.writer == DELTA_RS, chosen.reader == DELTA_RS) == (writes, reads), (feature, chosen)

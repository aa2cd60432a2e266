"""`market-spread sql`: the lake's tables as named views, in table, json and csv output."""

from __future__ import annotations

import json

from tests.helpers.cli import market_spread
from tests.helpers.lake import read_table, stream
from tests.helpers.landing import land
from tests.helpers.records import order, quote
from tests.helpers.storage import arg


def test_sql_queries_tables_by_name_in_every_format(spark, place):
    landing, lake = place / "landing", place / "lake"
    land(landing, "quotes", [quote("AAPL", "2026-11-23T14:30:01.000Z", "1.10", "1.15")])
    land(
        landing,
        "orders",
        [order("O-1", "AAPL", "2026-11-23T14:30:02.000Z"), order("O-2", "GOOG", "2026-11-23T14:30:02.000Z")],
    )
    assert stream(spark, landing, lake) == 0

    query = "SELECT order_id, reason, offer FROM alerts ORDER BY order_id"
    done = market_spread("sql", "--lake", arg(lake), "--format", "json", query, timeout=300)
    assert done.returncode == 0, done.stderr
    assert [json.loads(l) for l in done.stdout.splitlines()] == [
        {"order_id": "O-1", "reason": "wide_spread", "offer": "1.15000000"},  # decimals stay exact text
        {"order_id": "O-2", "reason": "no_market_data", "offer": None},
    ]
    done = market_spread(
        "sql",
        "--lake",
        arg(lake),
        "--format",
        "csv",
        "SELECT s.symbol, s.should_reject_trades, m.quotes FROM symbol_state s CROSS JOIN batch_metrics m",
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["symbol,should_reject_trades,quotes", "AAPL,True,1"]

    bad = market_spread("sql", "--lake", arg(lake), "SELECT * FROM no_such_table", timeout=300)
    last = bad.stderr.strip().splitlines()[-1]  # Spark's own start-up lines come first
    assert bad.returncode == 1 and last.startswith("market-spread sql: error:") and "no_such_table" in last
    missing = market_spread("sql", "--lake", arg(place / "nowhere"), "SELECT 1", timeout=60)
    assert missing.returncode == 2 and "no Delta tables" in missing.stderr


REFUSED = [
    "DELETE FROM alerts WHERE reason = 'wide_spread'",
    "UPDATE alerts SET reason = 'x'",
    "INSERT INTO alerts SELECT * FROM alerts",
    "WITH a AS (SELECT * FROM alerts) INSERT INTO alerts SELECT * FROM a",
    "MERGE INTO alerts t USING alerts s ON t.order_id = s.order_id WHEN MATCHED THEN DELETE",
    "DROP TABLE alerts",
    "VACUUM delta.`{alerts}` RETAIN 0 HOURS",
    "OPTIMIZE delta.`{alerts}`",
    "RESTORE TABLE delta.`{alerts}` TO VERSION AS OF 0",
    "CREATE TABLE delta.`{lake}/new_table` (a INT) USING DELTA",
    "ALTER TABLE delta.`{alerts}` SET TBLPROPERTIES ('x' = 'y')",
    "SET spark.sql.shuffle.partitions = 7",
    "CACHE TABLE alerts",
    "SELECT 1; DELETE FROM alerts",
    "/* a comment first */ DELETE FROM alerts",
    "EXECUTE IMMEDIATE 'DELETE FROM alerts'",
    "CALL system.some_procedure()",
    "TRUNCATE TABLE alerts",
    "SELECT reflect('java.lang.System', 'setProperty', 'market.spread', 'x')",
    "SELECT * FROM alerts WHERE order_id IN (SELECT java_method('java.lang.System', 'getProperty', 'user.dir'))",
]


def _lake_state(spark, lake):
    """Each table's commit files and row count: what a refused statement must leave unchanged."""
    from market_spread.lake import tables as lake_mod

    out = {}
    for table in lake_mod.existing_tables(lake):
        out[table] = (
            sorted(p.name for p in (lake / table / "_delta_log").iterdir()),
            read_table(spark, lake, table).count(),
        )
    return out


def test_sql_is_read_only_decided_from_the_parsed_plan(spark, place):
    import io

    from market_spread.lake.query import execute

    landing, lake = place / "landing", place / "lake"
    land(landing, "quotes", [quote("AAPL", "2026-11-23T14:30:01.000Z", "1.10", "1.15")])
    land(
        landing,
        "orders",
        [order("O-1", "AAPL", "2026-11-23T14:30:02.000Z"), order("O-2", "GOOG", "2026-11-23T14:30:02.000Z")],
    )
    assert stream(spark, landing, lake) == 0
    before = _lake_state(spark, lake)
    assert before["alerts"][1] == 2
    alerts = (lake / "alerts").absolute()
    for statement in REFUSED:
        out, err = io.StringIO(), io.StringIO()
        rc = execute(spark, str(lake), statement.format(alerts=alerts, lake=lake.absolute()), "json", out, err)
        assert rc == 2, (statement, err.getvalue())
        assert err.getvalue().count("\n") == 1 and err.getvalue().startswith("market-spread sql: error:"), statement
        assert out.getvalue() == ""
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"  # SET refused, session untouched
    assert spark._jvm.java.lang.System.getProperty("market.spread") is None  # reflect() refused before it ran
    assert _lake_state(spark, lake) == before, "a refused statement changed the lake"

    for statement in (
        "SELECT count(*) AS n FROM alerts",
        "WITH a AS (SELECT * FROM alerts) SELECT count(*) AS n FROM a",
        "SHOW TABLES",
        "DESCRIBE alerts",
        "SHOW COLUMNS IN alerts",
        "EXPLAIN SELECT * FROM alerts",
        f"DESCRIBE HISTORY delta.`{alerts}`",
    ):
        out, err = io.StringIO(), io.StringIO()
        assert execute(spark, str(lake), statement, "json", out, err) == 0, (statement, err.getvalue())
        assert out.getvalue(), statement
    # EXPLAIN of a write would not run it, but it is no query either.
    assert execute(spark, str(lake), "EXPLAIN DELETE FROM alerts", "json", io.StringIO(), io.StringIO()) == 2
    assert _lake_state(spark, lake) == before

    # Through the command itself: one line, exit 2, nothing deleted.
    done = market_spread("sql", "--lake", arg(lake), "DELETE FROM alerts WHERE reason = 'wide_spread'", timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("market-spread sql: error: sql is read-only")
    assert _lake_state(spark, lake) == before

"""`market-spread sql`: the lake's tables as named views, in table, json and csv output, on DataFusion
(a plain query, no JVM) or on Spark SQL (anything else), with the same output."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from market_spread.runtime.spark_jvm import JVM_NOTICE
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


# On local disk only: the refusal reads the parsed plan, which no storage changes (the S3 lake's
# queries are test_sql_queries_tables_by_name_in_every_format's and the engines' comparison's).
@pytest.mark.parametrize("place", ["local"], indirect=True)
def test_sql_is_read_only_decided_from_the_parsed_plan(spark, place, monkeypatch):
    from market_spread.lake import query as query_mod
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

    # Through the command itself: one line, exit 2, nothing deleted. (The check reads the parsed plan,
    # whatever the storage: on local disk only, a JVM start saved.)
    if not place.s3:
        statement = "DELETE FROM alerts WHERE reason = 'wide_spread'"
        done = market_spread("sql", "--lake", arg(lake), statement, timeout=300)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines()[-1].startswith("market-spread sql: error: sql is read-only")
        assert _lake_state(spark, lake) == before

    # query_lake (the command's call) on every refused statement: the router sends it to Spark with
    # a note, Spark's check exits 2; --engine fast refuses it without running anything.
    monkeypatch.setattr(  # Spark's turn on this session (query_lake's own would stop it at its end)
        query_mod, "_on_spark", lambda spec, o, e: execute(spark, str(spec.lake), spec.query, spec.format, o, e)
    )
    for statement in REFUSED:
        text = statement.format(alerts=alerts, lake=lake.absolute())
        rc, out, err_text = _fast(lake, text, engine="auto")
        lines = err_text.splitlines()
        assert (rc, out, len(lines)) == (2, "", 2), (statement, err_text)
        assert lines[0].startswith("market-spread sql: note: running on Spark SQL ("), (statement, err_text)
        assert lines[1].startswith("market-spread sql: error: sql "), (statement, err_text)
        rc, out, err_text = _fast(lake, text, engine="fast")
        assert (rc, out) == (2, ""), (statement, err_text)
        assert err_text.startswith("market-spread sql: error: --engine fast runs one plain query only:"), statement
    assert _lake_state(spark, lake) == before


def _small_lake(spark, place):
    """A lake of 2 alerts (one without a market), 1 symbol, 2 quotes over 2 days, 1 batch."""
    landing, lake = place / "landing", place / "lake"
    land(
        landing,
        "quotes",
        [
            quote("AAPL", "2026-11-22T20:00:00.000Z", "1.00", "1.01"),
            quote("AAPL", "2026-11-23T14:30:01.250Z", "1.10", "1.15"),
        ],
    )
    land(
        landing,
        "orders",
        [order("O-1", "AAPL", "2026-11-23T14:30:02.000Z"), order("O-2", "GOOG", "2026-11-23T14:30:02.000Z")],
    )
    assert stream(spark, landing, lake) == 0
    return lake


# Queries whose output must not depend on the engine: decimals (columns, literals, arithmetic), naive
# UTC times with and without a fraction, dates, booleans, NULLs and their order, joins, CTEs, Spark's
# quoting and names in any case.
SAME_ON_BOTH = [
    "SELECT order_id, reason, offer FROM alerts ORDER BY order_id",
    "SELECT s.symbol, s.should_reject_trades, m.quotes FROM symbol_state s CROSS JOIN batch_metrics m",
    "SELECT reason, count(*) AS n FROM alerts GROUP BY reason ORDER BY reason",
    "SELECT order_id, order_time, quote_time, bid FROM alerts ORDER BY quote_time",
    "SELECT order_id, offer FROM alerts ORDER BY offer DESC",
    "SELECT symbol, bid, offer, quote_time, updated_at IS NOT NULL AS updated FROM Symbol_State",
    "SELECT quote_date, count(*) AS n, sum(bid) AS bids, max(offer) AS top FROM quotes GROUP BY quote_date ORDER BY quote_date",
    "WITH a AS (SELECT * FROM alerts WHERE reason = \"no_market_data\") SELECT count(*) AS n, 'it''s' AS s FROM a",
    "SELECT batch_id, quotes, orders, alerts, quarantined FROM batch_metrics",
    "SELECT order_id, detected_at, batch_id FROM alerts ORDER BY order_id",
    "SELECT avg(bid) AS mean, min(quote_time) AS first FROM quotes",
    "SELECT order_id, offer - bid AS spread, bid * 1.5 AS more, round(2.5) AS r, 0.1 + 0.2 AS s FROM alerts ORDER BY 1",
    "SELECT order_id FROM alerts WHERE offer >= 1.15 OR bid IS NULL ORDER BY order_id",
    "SELECT `order_id` AS id, qty, price, side FROM alerts WHERE order_id IN ('O-1', 'O-2') ORDER BY 1 LIMIT 5",
]


def _fast(lake, query: str, fmt: str = "json", engine: str = "fast") -> tuple[int, str, str]:
    from market_spread.lake.query import QuerySpec, query_lake

    out, err = io.StringIO(), io.StringIO()
    return query_lake(QuerySpec(lake, query, fmt, engine), out, err), out.getvalue(), err.getvalue()


def test_datafusion_and_spark_give_the_same_output(spark, place):
    """The same queries in the three formats through `--engine fast` and Spark's path; a misspelt
    table listed alike on both; the user's own mistakes and what DataFusion cannot run."""
    from market_spread.lake.query import execute

    lake = _small_lake(spark, place)
    # Both engines' rows go through one renderer (lake/query.py's render): json, which keeps strings
    # and numbers apart, for every query; the other two formats for the first two.
    for i, query in enumerate(SAME_ON_BOTH):
        for fmt in ("json", "table", "csv") if i < 2 else ("json",):
            on_spark, spark_err = io.StringIO(), io.StringIO()
            assert execute(spark, str(lake), query, fmt, on_spark, spark_err) == 0, (query, spark_err.getvalue())
            rc, out, err = _fast(lake, query, fmt)
            assert (rc, err) == (0, ""), (query, err)
            assert out == on_spark.getvalue(), (query, fmt)
    rc, out, _ = _fast(lake, "SELECT order_id, quote_time, order_time FROM alerts ORDER BY order_id", "csv")
    assert out.splitlines()[1:] == ["O-1,2026-11-23 14:30:01.250000,2026-11-23 14:30:02", "O-2,,2026-11-23 14:30:02"]

    listed = (
        "market-spread sql: error: no table 'alertz' in the lake; its tables: "
        "alerts, batch_metrics, quarantine, quotes, symbol_state\n"
    )
    assert _fast(lake, "SELECT * FROM alertz") == (1, "", listed)
    assert _fast(lake, "SELECT * FROM alertz", engine="auto") == (1, "", listed)  # no retry on Spark
    err = io.StringIO()
    assert execute(spark, str(lake), "SELECT * FROM alertz", "table", io.StringIO(), err) == 1
    assert err.getvalue() == listed
    # An unknown column: DataFusion's error on one line, no retry on Spark.
    rc, out, err_text = _fast(lake, "SELECT nope FROM alerts", engine="auto")
    assert (rc, out, err_text.count("\n")) == (1, "", 1)
    assert err_text.startswith("market-spread sql: error: Schema error: No field named nope")
    # --engine fast does not fall back: not a plain query (2), or one DataFusion cannot run (1).
    assert _fast(lake, "SELECT count(*) FROM alerts VERSION AS OF 0") == (
        2,
        "",
        "market-spread sql: error: --engine fast runs one plain query only: time travel is Spark's syntax\n",
    )
    rc, out, err_text = _fast(lake, "SELECT order_id FROM alerts SORT BY order_id")
    assert (rc, out, err_text.count("\n")) == (1, "", 1) and "not implemented" in err_text, err_text


def test_auto_runs_on_spark_what_datafusion_cannot_and_a_plain_query_starts_no_jvm(spark, place):
    from market_spread.lake import tables as lake_mod

    lake = _small_lake(spark, place)
    # Time travel, through the command: Spark's answer with one note. Version 0 is the empty table
    # the stream created, so the time travel really ran (2 alerts now).
    alerts = lake_mod.table_path(lake, "alerts")
    query = f"SELECT count(*) AS n FROM delta.`{alerts}` VERSION AS OF 0"
    done = market_spread("sql", "--lake", arg(lake), "--format", "csv", query, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["n", "0"]
    notes = [line for line in done.stderr.splitlines() if line.startswith("market-spread sql:")]
    assert notes == [
        "market-spread sql: note: running on Spark SQL (time travel is Spark's syntax); this takes a few seconds"
    ], done.stderr
    assert JVM_NOTICE.decode() not in done.stderr, "the JVM's incubator notice is dropped"
    query = "SELECT count(*) AS n FROM alerts"
    if not place.s3:  # the command's Spark path on S3 is the time travel's above
        # --engine spark: Spark for a plain query too, without a note.
        done = market_spread("sql", "--lake", arg(lake), "--engine", "spark", "--format", "csv", query, timeout=300)
        assert done.returncode == 0 and done.stdout.splitlines() == ["n", "2"], done.stderr
        assert "market-spread sql:" not in done.stderr and JVM_NOTICE.decode() not in done.stderr
    # The default on a plain query, in a child: the answer, and neither pyspark (no JVM) nor Great
    # Expectations (nor pandas, a second of imports) loaded.
    child = (
        "import sys\n"
        "from market_spread.cli.main import main\n"
        "rc = main(['sql', '--lake', sys.argv[1], '--format', 'csv', sys.argv[2]])\n"
        "loaded = sorted({m.split('.')[0] for m in sys.modules} & {'pyspark', 'py4j', 'great_expectations', 'pandas'})\n"
        "print('loaded:', loaded, 'rc:', rc)\n"
    )
    done = subprocess.run([sys.executable, "-c", child, arg(lake), query], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["n", "2", "loaded: [] rc: 0"], done.stdout
    assert done.stderr == ""

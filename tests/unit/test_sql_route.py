"""`sql`'s router (lake/sql_route.py): only one plain query reaches DataFusion; everything else goes to
Spark, whose plan check refuses writes. Pure text: no Spark, no lake."""

from __future__ import annotations

import pytest

from market_spread.lake.sql_route import route, tokens

FAST = [
    "SELECT reason, count(*) FROM alerts GROUP BY reason",
    "select * from alerts",
    "  \n SELECT 1",
    "WITH a AS (SELECT * FROM alerts) SELECT count(*) AS n FROM a",
    "VALUES (1, 2)",
    "(SELECT 1) UNION ALL (SELECT 2)",
    "SELECT 1;",
    "SELECT 1;  -- the end\n",
    "SELECT 1; /* done */",
    # Keywords inside strings, quoted identifiers and comments are not code.
    "SELECT * FROM alerts WHERE reason = 'DELETE FROM alerts; DROP TABLE x'",
    'SELECT "update", "a; COPY (SELECT 1) TO \'/tmp/x\'" FROM alerts',
    "SELECT `update`, `insert into` FROM alerts",
    "SELECT 1 -- ; DELETE FROM alerts\n",
    "SELECT /* INSERT INTO alerts; */ 1",
    "SELECT 'it''s', `a``b` FROM alerts",
    "SELECT 'a/b', '@v1', '${x}' FROM alerts",
    "SELECT deleted_at, updated_at, offset_value FROM symbol_state",
    "SELECT symbol FROM alerts ORDER BY symbol DESC NULLS LAST LIMIT 10",
    "SELECT 1.5, .5, 5., 0.1 + 0.2",
    "SELECT left(raw, 60), concat_ws('-', symbol, side), coalesce(bid, 0) FROM quarantine",
]


@pytest.mark.parametrize("text", FAST)
def test_a_plain_query_runs_on_datafusion(text):
    assert route(text).fast, route(text)


SPARK = {
    "DELETE FROM alerts": "DELETE",
    "SELECT 1; DELETE FROM alerts": "several statements",
    "SELECT 1; SELECT 2": "several statements",
    "SELECT 1;;": "several statements",
    "/* a comment first */ DELETE FROM alerts": "DELETE",
    "-- a comment first\nDELETE FROM alerts": "DELETE",
    "WITH a AS (SELECT * FROM alerts) INSERT INTO alerts SELECT * FROM a": "INSERT",
    "SELECT * INTO copy FROM alerts": "INTO",
    "COPY (SELECT 1) TO '/tmp/out.csv'": "COPY",
    "(COPY (SELECT 1) TO '/tmp/out.csv')": "COPY",
    "SET datafusion.execution.batch_size = 1": "SET",
    "CREATE TABLE x AS SELECT 1": "CREATE",
    "SELECT count(*) FROM alerts VERSION AS OF 0": "time travel",
    "SELECT count(*) FROM alerts TIMESTAMP AS OF '2026-01-01'": "time travel",
    "SELECT * FROM alerts FOR SYSTEM_TIME AS OF '2026-01-01'": "time travel",
    "SELECT * FROM delta.`/lake/alerts@v3`": "time travel",
    "SELECT * FROM alerts@v3": "time travel",
    "SELECT reflect('java.lang.System', 'getProperty', 'x')": "reflect",
    "SELECT java_method('java.lang.System', 'getProperty', 'x')": "java_method",
    "SELECT try_reflect('java.lang.System', 'getProperty', 'x')": "try_reflect",
    "SELECT * FROM alerts TABLESAMPLE (10 PERCENT)": "TABLESAMPLE",
    "SELECT 1 / 2": "division",
    "SELECT (offer - bid) / offer FROM alerts": "division",
    "SELECT '${spark.app.name}', ${x}": "variable",
    "SELECT 1L": "typed literal",
    "SELECT 1.5BD": "typed literal",
    "SELECT 1e3": "double",
    "SELECT 2E-3 AS x": "double",
    "SELECT concat(symbol, side) FROM alerts": "concat",
    "SELECT substr(symbol, -2) FROM alerts": "substr",
    "SELECT substring(symbol, -2) FROM alerts": "substring",
    "SELECT CAST(quote_time AS STRING) FROM alerts": "STRING",
    "SELECT quote_time::varchar FROM alerts": "STRING",
    "SELECT 'a\\' ; DELETE FROM alerts --'": "backslash",
    "SELECT 'a' 'b'": "adjacent strings",
    "SELECT /* a /* nested */ DELETE */ 1": "nested comment",
    "SELECT 'unclosed": "unclosed quote",
    "SELECT `unclosed": "unclosed quote",
    "SELECT 1 /* unclosed": "unclosed comment",
    "SHOW TABLES": "SHOW",
    "DESCRIBE alerts": "DESCRIBE",
    "EXPLAIN SELECT 1": "EXPLAIN",
    "FROM alerts SELECT *": "FROM",
    "": "no statement",
    "  -- only a comment": "no statement",
    "EXECUTE IMMEDIATE 'DELETE FROM alerts'": "EXECUTE",
    "CALL system.some_procedure()": "CALL",
    "SELECT replace(symbol, 'A', 'B') FROM alerts": "REPLACE",  # a false alarm, on the safe side
}


@pytest.mark.parametrize("text", list(SPARK))
def test_anything_else_goes_to_spark_with_its_reason(text):
    decision = route(text)
    assert not decision.fast
    assert SPARK[text].lower() in decision.reason.lower(), decision.reason


def test_every_statement_spark_refuses_goes_to_spark():
    from tests.lake.test_sql_cli import REFUSED

    for statement in REFUSED:
        assert not route(statement.format(alerts="/lake/alerts", lake="/lake")).fast, statement


def test_the_tokens_skip_strings_identifiers_and_comments():
    text = "SELECT \"update\", `x@y`, 'DROP' -- DELETE\n FROM /* INSERT */ alerts WHERE a.b >= 1.5;"
    assert " ".join(tokens(text)) == "SELECT ' , ` @ , ' FROM ALERTS WHERE A . B > = 1.5 ;"

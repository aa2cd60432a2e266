"""`sql` on DataFusion (lake/fast_sql.py) over a lake delta-rs writes: Spark's forms of the values,
DataFusion's errors sorted into the user's mistakes and what Spark may run. No Spark."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from decimal import Decimal

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from market_spread.lake import fast_sql
from market_spread.lake.query import QuerySpec, query_lake
from market_spread.lake.tables import arrow_schema

T = datetime(2026, 11, 23, 14, 30, 1, 250000, tzinfo=UTC)


@pytest.fixture
def lake(tmp_path):
    alert = {
        "order_id": "O-1",
        "symbol": "AAPL",
        "reason": "wide_spread",
        "bid": Decimal("1.1"),
        "offer": Decimal("1.15"),
    }
    write_deltalake(
        tmp_path / "alerts",
        pa.Table.from_pylist(
            [{**alert, "quote_time": T}, {"order_id": "O-2", "symbol": "GOOG", "reason": "no_market_data"}],
            schema=arrow_schema("alerts"),
        ),
    )
    state = {"symbol": "AAPL", "bid": Decimal("1.1"), "offer": Decimal("1.15"), "should_reject_trades": True}
    write_deltalake(tmp_path / "symbol_state", pa.Table.from_pylist([state], schema=arrow_schema("symbol_state")))
    return tmp_path


def run(lake, query: str, fmt: str = "json", engine: str = "fast") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return query_lake(QuerySpec(lake, query, fmt, engine), out, err), out.getvalue(), err.getvalue()


def test_values_take_sparks_forms(lake):
    query = "SELECT order_id, offer, quote_time, reason = 'wide_spread' AS wide FROM alerts ORDER BY offer"
    rc, out, err = run(lake, query)
    assert (rc, err) == (0, "")
    assert [json.loads(line) for line in out.splitlines()] == [
        {"order_id": "O-2", "offer": None, "quote_time": None, "wide": False},  # NULLs first, as in Spark
        {"order_id": "O-1", "offer": "1.15000000", "quote_time": "2026-11-23T14:30:01.250000", "wide": True},
    ]
    rc, out, _ = run(lake, query, "csv")
    assert out.splitlines() == [
        "order_id,offer,quote_time,wide",
        "O-2,,,False",
        "O-1,1.15000000,2026-11-23 14:30:01.250000,True",
    ]
    rc, out, _ = run(lake, 'SELECT Symbol AS s, "a string" AS t FROM Symbol_State', "table")
    assert out.splitlines()[3] == "| AAPL | a string |" and out.splitlines()[-1] == "(1 row)"


def test_a_misspelt_table_lists_the_tables_and_an_unknown_column_is_one_line(lake):
    listed = "market-spread sql: error: no table 'alertz' in the lake; its tables: alerts, symbol_state\n"
    assert run(lake, "SELECT * FROM alertz", engine="auto") == (1, "", listed)
    rc, out, err = run(lake, "SELECT nope FROM alerts", engine="auto")
    assert (rc, out) == (1, "") and err.startswith("market-spread sql: error: Schema error: No field named nope")
    assert err.count("\n") == 1


def test_engine_fast_never_falls_back(lake):
    assert run(lake, "SHOW TABLES") == (
        2,
        "",
        "market-spread sql: error: --engine fast runs one plain query only: SHOW is not a plain query\n",
    )
    rc, out, err = run(lake, "SELECT order_id FROM alerts SORT BY order_id")
    assert (rc, out, err.count("\n")) == (1, "", 1) and "not implemented" in err


@pytest.mark.parametrize(
    ("message", "spark_may_run", "why"),
    [
        ('SQL error: ParserError("Expected: end of statement, found: AS")', True, "syntax DataFusion does not parse"),
        ("This feature is not implemented: SORT BY", True, "a feature DataFusion lacks"),
        (
            "Error during planning: Invalid function 'date_format'.\nDid you mean 'to_char'?",
            True,
            "DataFusion has no date_format()",
        ),
        (
            "Error during planning: table 'datafusion.delta./lake/alerts' not found",
            True,
            "a table by path or catalog is Spark's to find",
        ),
        ("Schema error: No field named nope.\nValid fields are alerts.order_id.", False, None),
    ],
)
def test_datafusions_errors_are_sorted_by_their_text(message, spark_may_run, why):
    failed = fast_sql.classify(RuntimeError(message), ["alerts"])
    assert isinstance(failed, fast_sql.Failed) and failed.spark_may_run is spark_may_run
    assert "\n" not in str(failed)
    if why:
        assert fast_sql.why_spark(failed) == why
    missing = fast_sql.classify(
        RuntimeError("Error during planning: table 'datafusion.public.alertz' not found"), ["alerts"]
    )
    assert str(missing) == "no table 'alertz' in the lake; its tables: alerts"


def test_rows_keep_duplicate_names_and_give_naive_utc_times():
    table = pa.table(
        [
            pa.array([T], pa.timestamp("us", tz="UTC")),
            pa.array([T.replace(tzinfo=None)], pa.timestamp("ns")),
            pa.array([1]),
        ],
        names=["t", "t", "n"],
    )
    assert fast_sql.rows(table) == (["t", "t", "n"], [(T.replace(tzinfo=None), T.replace(tzinfo=None), 1)])

"""`market-spread sql`: the lake's tables as named views, in table, json and csv output."""
from __future__ import annotations

import json
import subprocess
import sys

from lakeutil import land, order, quote, stream

CLI = [sys.executable, "-m", "market_spread.cli", "sql"]


def test_sql_queries_tables_by_name_in_every_format(spark, tmp_path):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    land(landing, "quotes", [quote("AAPL", "2026-11-23T14:30:01.000Z", "1.10", "1.15")])
    land(landing, "orders", [order("O-1", "AAPL", "2026-11-23T14:30:02.000Z"), order("O-2", "GOOG", "2026-11-23T14:30:02.000Z")])
    assert stream(spark, landing, lake) == 0

    query = "SELECT order_id, reason, offer FROM alerts ORDER BY order_id"
    done = subprocess.run(CLI + ["--lake", str(lake), "--format", "json", query], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert [json.loads(l) for l in done.stdout.splitlines()] == [
        {"order_id": "O-1", "reason": "wide_spread", "offer": "1.15000000"},  # decimals stay exact text
        {"order_id": "O-2", "reason": "no_market_data", "offer": None},
    ]
    done = subprocess.run(CLI + ["--lake", str(lake), "--format", "csv",
                                 "SELECT s.symbol, s.should_reject_trades, m.quotes FROM symbol_state s CROSS JOIN batch_metrics m"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["symbol,should_reject_trades,quotes", "AAPL,True,1"]

    bad = subprocess.run(CLI + ["--lake", str(lake), "SELECT * FROM no_such_table"], capture_output=True, text=True, timeout=300)
    last = bad.stderr.strip().splitlines()[-1]  # Spark's own start-up lines come first
    assert bad.returncode == 1 and last.startswith("market-spread sql: error:") and "no_such_table" in last
    missing = subprocess.run(CLI + ["--lake", str(tmp_path / "nowhere"), "SELECT 1"], capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "no Delta tables" in missing.stderr

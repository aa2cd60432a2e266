"""The stream run in-process on the shared session, and the lake's tables read back and compared."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

from market_spread.domain.rules import Thresholds
from market_spread.lake import tables as lake_mod
from market_spread.runtime.storage import location
from market_spread.stream.query import run_query
from market_spread.stream.spec import StreamSpec
from tests.helpers.symbols import SYMBOLS

# Columns that differ from run to run however the data was cut: left out when lakes are compared.
PROCESSING_COLUMNS = ("detected_at", "updated_at", "batch_id", "started_at", "finished_at")


def stream(spark, landing: Path, lake: Path, symbols=SYMBOLS, max_spread="0.05", max_spread_ratio="0.05") -> int:
    """Run the file stream over `landing` into `lake` until no file is left (available-now); either
    may be local or on S3 (runtime.storage.location)."""
    spec = StreamSpec(
        lake=location(lake),
        symbols=list(symbols),
        landing=location(landing),
        thresholds=Thresholds(Decimal(max_spread), Decimal(max_spread_ratio)),
        available_now=True,
    )
    return run_query(spark, spec)


def read_table(spark, lake: Path, table: str):
    """One table of the lake as a DataFrame."""
    return spark.read.format("delta").load(lake_mod.table_path(lake, table))


def rows(spark, lake: Path, table: str, drop=PROCESSING_COLUMNS) -> list[dict]:
    """A table's rows as dicts in a stable order, processing-time columns (`drop`) left out."""
    df = read_table(spark, lake, table)
    keep = [c for c in df.columns if c not in drop]
    return sorted(
        (r.asDict() for r in df.select(*keep).collect()), key=lambda d: json.dumps(d, default=str, sort_keys=True)
    )


def alerts_by_order(spark, lake: Path) -> dict[str, dict]:
    return {r["order_id"]: r for r in rows(spark, lake, "alerts")}


def assert_same_tables(spark, lake, reference, tables=("alerts", "symbol_state", "quotes")) -> None:
    """The product tables of two lakes hold the same rows (any order), processing-time columns aside."""
    from pyspark.testing import assertDataFrameEqual

    def frame(root: Path, table: str):
        df = read_table(spark, root, table)
        return df.drop(*[c for c in PROCESSING_COLUMNS if c in df.columns])

    for table in tables:
        assertDataFrameEqual(frame(lake, table), frame(reference, table))


def comparable_tables(spark, lake: Path) -> dict[str, list[dict]]:
    """Every product table minus processing-time columns: equal across cuttings, runs and crashes."""
    out = {t: rows(spark, lake, t) for t in lake_mod.TABLES if t != "batch_metrics"}
    out["quarantine"] = [
        {k: v for k, v in r.items() if k != "source_file"} | {"file": Path(r["source_file"]).name}
        for r in out["quarantine"]
    ]
    return out


def comparable_tables_delta_rs(lake) -> dict[str, list[dict]]:
    """comparable_tables read with delta-rs instead of Spark (local or S3): the same rows, timestamps
    with their zone, in a second instead of the shared session's half-minute of table scans. Compare
    only with lakes read the same way."""
    from market_spread.runtime.storage import open_delta

    out = {}
    for table in lake_mod.TABLES:
        if table == "batch_metrics":
            continue
        found = open_delta(location(lake_mod.table_path(lake, table))).to_pyarrow_table().to_pylist()
        kept = [{k: v for k, v in r.items() if k not in PROCESSING_COLUMNS} for r in found]
        if table == "quarantine":
            kept = [
                {k: v for k, v in r.items() if k != "source_file"} | {"file": Path(r["source_file"]).name} for r in kept
            ]
        out[table] = sorted(kept, key=lambda d: json.dumps(d, default=str, sort_keys=True))
    return out


def metrics_totals(spark, lake: Path) -> dict[str, int]:
    """What batch_metrics adds up to over every batch, and how many batches there were."""
    df = read_table(spark, lake, "batch_metrics")
    row = df.selectExpr("sum(quotes) q", "sum(orders) o", "sum(alerts) a", "sum(quarantined) x", "count(*) n").first()
    return {
        "quotes": row.q or 0,
        "orders": row.o or 0,
        "alerts": row.a or 0,
        "quarantined": row.x or 0,
        "batches": row.n,
    }

"""The stream run in-process on the shared session, and the lake's tables read back and compared."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from market_spread.domain.rules import Thresholds
from market_spread.lake import tables as lake_mod
from market_spread.runtime.storage import location, open_delta
from market_spread.stream.query import run_query
from market_spread.stream.spec import StreamSpec
from tests.helpers.symbols import SYMBOLS

# Columns that differ from run to run however the data was cut: left out when lakes are compared.
PROCESSING_COLUMNS = ("detected_at", "updated_at", "batch_id", "started_at", "finished_at")


def stream(
    spark, landing: Path, lake: Path, symbols=SYMBOLS, max_spread="0.05", max_spread_ratio="0.05", placement="auto"
) -> int:
    """Run the file stream over `landing` into `lake` until no file is left (available-now); either
    may be local or on S3 (runtime.storage.location). `placement`: `stream --placement`."""
    spec = StreamSpec(
        lake=location(lake),
        symbols=list(symbols),
        landing=location(landing),
        thresholds=Thresholds(Decimal(max_spread), Decimal(max_spread_ratio)),
        available_now=True,
        placement=placement,
    )
    return run_query(spark, spec)


def read_table(spark, lake: Path, table: str):
    """One table of the lake as a DataFrame."""
    return spark.read.format("delta").load(lake_mod.table_path(lake, table))


def rows(spark, lake: Path, table: str, drop=PROCESSING_COLUMNS) -> list[dict]:
    """A table's rows as dicts in a stable order, processing-time columns (`drop`) left out. Read
    with delta-rs (milliseconds; the shared session's scan of a table costs a JVM second or more),
    through Spark when delta-rs cannot read the table's features; timestamps naive UTC as Spark gives
    them. `rows_with_spark` reads with Spark whatever the table."""
    from deltalake.exceptions import DeltaProtocolError

    try:
        found = open_delta(location(lake_mod.table_path(lake, table))).to_pyarrow_table().to_pylist()
    except DeltaProtocolError:
        return rows_with_spark(spark, lake, table, drop)
    return _stable([{k: _naive_utc(v) for k, v in r.items() if k not in drop} for r in found])


def rows_with_spark(spark, lake: Path, table: str, drop=PROCESSING_COLUMNS) -> list[dict]:
    """`rows` as Spark reads them."""
    df = read_table(spark, lake, table)
    keep = [c for c in df.columns if c not in drop]
    return _stable([r.asDict() for r in df.select(*keep).collect()])


def duckdb_counts(lake: Path, tables) -> dict[str, int]:
    """Each table's row count as DuckDB's delta reader (delta-kernel) sees it: the extension from
    PyPI (duckdb-ext-delta), loaded from its file, nothing downloaded. Local lakes only."""
    import glob
    import site

    import duckdb

    found = [
        p for d in site.getsitepackages() for p in glob.glob(f"{d}/duckdb_ext/extensions/*/*/delta.duckdb_extension")
    ]
    con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    con.execute(f"LOAD '{found[0]}'")
    path = lambda t: lake_mod.table_path(lake, t).replace("'", "''")  # noqa: E731 - one use
    return {t: con.execute(f"SELECT count(*) FROM delta_scan('{path(t)}')").fetchone()[0] for t in tables}


def _stable(found: list[dict]) -> list[dict]:
    return sorted(found, key=lambda d: json.dumps(d, default=str, sort_keys=True))


def _naive_utc(value):
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


def alerts_by_order(spark, lake: Path) -> dict[str, dict]:
    return {r["order_id"]: r for r in rows(spark, lake, "alerts")}


def assert_same_tables(spark, lake, reference, tables=("alerts", "symbol_state", "quotes")) -> None:
    """The product tables of two lakes hold the same rows (any order), processing-time columns aside."""
    for table in tables:
        assert rows(spark, lake, table) == rows(spark, reference, table), table


def comparable_tables(spark, lake: Path, read=None) -> dict[str, list[dict]]:
    """Every product table minus processing-time columns: equal across cuttings, runs and crashes
    (`read`: `rows` unless told, or `rows_with_spark`)."""
    read = read or rows
    out = {t: read(spark, lake, t) for t in lake_mod.TABLES if t != "batch_metrics"}
    out["quarantine"] = [
        {k: v for k, v in r.items() if k != "source_file"} | {"file": Path(r["source_file"]).name}
        for r in out["quarantine"]
    ]
    return out


def metrics_totals(spark, lake: Path) -> dict[str, int]:
    """What batch_metrics adds up to over every batch, and how many batches there were."""
    found = rows(spark, lake, "batch_metrics", drop=())
    totals = {key: sum(r[key] or 0 for r in found) for key in ("quotes", "orders", "alerts", "quarantined")}
    return totals | {"batches": len(found)}

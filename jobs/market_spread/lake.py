"""The lake: Delta table names, schemas and locations (contract section 4)."""
from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

# Column order is the schema's order. Extra columns beyond the contract are documented in the README.
SCHEMAS: dict[str, str] = {
    "symbol_state": (
        "symbol STRING NOT NULL, bid DECIMAL(18,8), offer DECIMAL(18,8), quote_time TIMESTAMP, "
        "seq BIGINT, should_reject_trades BOOLEAN, updated_at TIMESTAMP, batch_id BIGINT"
    ),
    "alerts": (
        "order_id STRING, account BIGINT, symbol STRING, side STRING, qty DECIMAL(18,8), "
        "price DECIMAL(18,8), order_time TIMESTAMP, reason STRING, bid DECIMAL(18,8), "
        "offer DECIMAL(18,8), quote_time TIMESTAMP, detected_at TIMESTAMP, batch_id BIGINT, "
        "order_seq BIGINT, quote_seq BIGINT"
    ),
    "quotes": (
        "symbol STRING, bid DECIMAL(18,8), offer DECIMAL(18,8), quote_time TIMESTAMP, seq BIGINT, "
        "batch_id BIGINT, should_reject_trades BOOLEAN, quote_date DATE"
    ),
    "quarantine": (
        "stream STRING, raw STRING, reason STRING, source_file STRING, detected_at TIMESTAMP, "
        "batch_id BIGINT"
    ),
    "batch_metrics": (
        "batch_id BIGINT, started_at TIMESTAMP, finished_at TIMESTAMP, quotes BIGINT, orders BIGINT, "
        "alerts BIGINT, quarantined BIGINT, input_lines BIGINT, late_symbols BIGINT, "
        "parse_ms BIGINT, check_ms BIGINT, write_ms BIGINT, merge_ms BIGINT"
    ),
}

# The quote history is partitioned by day so that checks of late orders read only the days they need.
PARTITIONS: dict[str, list[str]] = {"quotes": ["quote_date"]}

# Written to every table so that delta-rs can read it: no deletion vectors, no column mapping.
TABLE_PROPERTIES = {"delta.enableDeletionVectors": "false"}

TABLES = tuple(SCHEMAS)
CHECKPOINT_SUBDIR = "_checkpoints/stream"


def table_path(lake: str | Path, table: str) -> str:
    # Absolute: Delta's SQL takes `delta.`path`` as a path only when it is absolute (a relative
    # `--lake data/lake` otherwise fails with "schema spark_catalog.delta cannot be found").
    return str(Path(lake).expanduser().absolute() / table)


def is_delta_table(path: str | Path) -> bool:
    return (Path(path) / "_delta_log").is_dir() and any((Path(path) / "_delta_log").glob("*.json"))


def existing_tables(lake: str | Path) -> list[str]:
    """Every Delta table directly under the lake (the product's and any others, e.g. quality)."""
    lake = Path(lake)
    if not lake.is_dir():
        return []
    return sorted(p.name for p in lake.iterdir() if p.is_dir() and is_delta_table(p))


def ensure_tables(spark: SparkSession, lake: str | Path) -> None:
    """Create missing tables empty, with their schema, so readers never meet a missing table."""
    props = ", ".join(f"'{k}' = '{v}'" for k, v in TABLE_PROPERTIES.items())
    for name, schema in SCHEMAS.items():
        path = table_path(lake, name)
        if is_delta_table(path):
            continue
        partition = f"PARTITIONED BY ({', '.join(PARTITIONS[name])})" if name in PARTITIONS else ""
        spark.sql(
            f"CREATE TABLE IF NOT EXISTS delta.`{path}` ({schema}) USING DELTA {partition} "
            f"TBLPROPERTIES ({props})"
        )


def register_views(spark: SparkSession, lake: str | Path) -> list[str]:
    """Expose every table of the lake as a temporary view of the same name."""
    names = existing_tables(lake)
    for name in names:
        spark.read.format("delta").load(table_path(lake, name)).createOrReplaceTempView(name)
    return names

"""The lake: Delta table names, schemas and locations (contract section 4)."""

from __future__ import annotations

import json
import re

from pyspark.sql import SparkSession

from market_spread.runtime.storage import Location, location

# Column order is the schema's order. Extra columns beyond the contract are documented in docs/contract.md.
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
        "stream STRING, raw STRING, reason STRING, source_file STRING, detected_at TIMESTAMP, batch_id BIGINT"
    ),
    "batch_metrics": (
        "batch_id BIGINT, started_at TIMESTAMP, finished_at TIMESTAMP, quotes BIGINT, orders BIGINT, "
        "alerts BIGINT, quarantined BIGINT, input_lines BIGINT, late_symbols BIGINT, "
        "parse_ms BIGINT, check_ms BIGINT, write_ms BIGINT, merge_ms BIGINT, spark_jobs BIGINT"
    ),
}
# Columns added after a table's first release: ensure_tables adds them to older lakes.
ADDED_COLUMNS: dict[str, dict[str, str]] = {"batch_metrics": {"spark_jobs": "BIGINT"}}

# The quote history is partitioned by day so that checks of late orders read only the days they need.
PARTITIONS: dict[str, list[str]] = {"quotes": ["quote_date"]}

# Written to every table. No deletion vectors, no column mapping: delta-rs must read the tables.
# Bounded growth at one commit a second: commit files older than 30 minutes go at the next
# checkpoint, and so do the tombstones of removed files. Each delta-rs commit and each Spark
# snapshot update lists the whole `_delta_log` (and a checkpoint carries every tombstone), so a
# batch's cost grows with what the log keeps (measured: docs/performance.md, row '30 minutes of
# log and tombstones'). 30 minutes is the time-travel window: six times the quality DAG's 5-minute
# schedule (it reads alerts as of its last validated version, and continues from that version's
# newest batch once the version is gone: quality/slices.py).
# Delta requires the deleted-file retention to be no longer than the log's; VACUUM keeps its own
# `--retain-hours` (7 days) for the data files.
# A checkpoint every 10 commits (Delta's default, stated so that it cannot drift; per table, see
# CHECKPOINT_INTERVALS) keeps the log replay of a snapshot short.
TABLE_PROPERTIES = {
    "delta.enableDeletionVectors": "false",
    "delta.logRetentionDuration": "interval 30 minutes",
    "delta.deletedFileRetentionDuration": "interval 30 minutes",
    "delta.checkpointRetentionDuration": "interval 2 days",
    "delta.checkpointInterval": "10",
}

# Each table checkpoints at its own interval. A checkpoint costs its table a state reconstruction,
# a checksum validation and a Parquet write, and the stream commits to every table in every batch:
# with one interval for all, every tenth batch wrote four checkpoints at once, the latency's worst
# case (measured: docs/performance.md, row 'checkpoint intervals 10-13'). Intervals of 10 to 13
# spread them over different batches (two fall together at most every 60 batches). All stay far
# below the 400 commits after which Delta forces a checksum validation before a commit
# (`versionChecksum.forcedValidationInterval`).
CHECKPOINT_INTERVALS = {"quotes": 10, "alerts": 11, "symbol_state": 12, "batch_metrics": 13}


def stats_columns(name: str) -> list[str]:
    """The columns whose statistics (min, max, nulls) each data file records: all but the decimals,
    the booleans (Delta keeps none for them), the partition columns and the raw quarantined lines. delta-rs writes a decimal's bounds through a
    binary float (1234567890.12345678 became 1234567890.1234567, below the value it bounds), so any
    reader that skips files by them could miss rows: an equality on an 18-digit price found nothing."""
    columns = [c.strip().split(" ", 1) for c in re.split(r",(?![^()]*\))", SCHEMAS[name])]
    return [
        c
        for c, kind in columns
        if not kind.upper().startswith(("DECIMAL", "BOOLEAN")) and c not in PARTITIONS.get(name, ()) and c != "raw"
    ]


def table_properties(name: str) -> dict[str, str]:
    """The properties written to table `name` (TABLE_PROPERTIES with its checkpoint interval and
    statistics columns)."""
    interval = CHECKPOINT_INTERVALS.get(name, int(TABLE_PROPERTIES["delta.checkpointInterval"]))
    return {
        **TABLE_PROPERTIES,
        "delta.checkpointInterval": str(interval),
        "delta.dataSkippingStatsColumns": ",".join(stats_columns(name)),
    }


TABLES = tuple(SCHEMAS)
CHECKPOINT_SUBDIR = "_checkpoints/stream"


def table_path(lake: str | Location, table: str) -> str:
    # Absolute: Delta's SQL takes `delta.`path`` as a path only when it is absolute (a relative
    # `--lake data/lake` otherwise fails with "schema spark_catalog.delta cannot be found").
    # On S3 the s3a:// URI Spark reads (delta-rs is given s3://: runtime.storage.delta_rs_target).
    return str(location(lake).absolute() / table)


def is_delta_table(path: str | Location) -> bool:
    return any((location(path) / "_delta_log").glob("*.json"))


def existing_tables(lake: str | Location) -> list[str]:
    """Every Delta table directly under the lake (the product's and any others, e.g. quality)."""
    lake = location(lake)
    if not lake.is_dir():
        return []
    return sorted(p.name for p in lake.iterdir() if p.is_dir() and is_delta_table(p))


def ensure_tables(spark: SparkSession, lake: str | Location) -> None:
    """Create missing tables empty, with their schema, so readers never meet a missing table."""
    from concurrent.futures import ThreadPoolExecutor

    def create(name: str) -> None:
        props = ", ".join(f"'{k}' = '{v}'" for k, v in table_properties(name).items())
        partition = f"PARTITIONED BY ({', '.join(PARTITIONS[name])})" if name in PARTITIONS else ""
        spark.sql(
            f"CREATE TABLE IF NOT EXISTS delta.`{table_path(lake, name)}` ({SCHEMAS[name]}) USING DELTA {partition} "
            f"TBLPROPERTIES ({props})"
        )

    missing = []
    for name in SCHEMAS:
        path = table_path(lake, name)
        if is_delta_table(path):
            _upgrade(spark, name, path)
        else:
            missing.append(name)
    # Five commits to five tables: side by side, as a new lake's start otherwise waits for each in
    # turn (measured: docs/performance.md, row 'start-up reads the Delta log with delta-rs').
    with ThreadPoolExecutor(max_workers=max(1, len(missing)), thread_name_prefix="create-table") as pool:
        for done in [pool.submit(create, name) for name in missing]:
            done.result()


def register_views(spark: SparkSession, lake: str | Location) -> list[str]:
    """Expose every table of the lake as a temporary view of the same name."""
    names = existing_tables(lake)
    for name in names:
        spark.read.format("delta").load(table_path(lake, name)).createOrReplaceTempView(name)
    return names


def _upgrade(spark: SparkSession, name: str, path: str) -> None:
    """Bring a table made by an earlier release up to date: added columns, then properties.

    Read from the log with delta-rs: Spark's `detail()` is a snapshot and a job per table at every
    start (measured: docs/performance.md, row 'start-up reads the Delta log with delta-rs')."""
    from market_spread.lake.deltalog import properties_and_columns

    view = properties_and_columns(path)
    if view is None:
        from delta.tables import DeltaTable

        detail = DeltaTable.forPath(spark, path).detail().first()
        assert detail is not None  # DESCRIBE DETAIL answers one row
        view = (
            detail["properties"] or {},
            spark.read.format("delta").load(path).columns,
        )
    have, columns = view
    # Columns first: the statistics columns a property names must exist.
    add_missing_columns(spark, path, columns, ADDED_COLUMNS.get(name, {}))
    missing = {k: v for k, v in table_properties(name).items() if have.get(k) != v}
    if missing:
        props = ", ".join(f"'{k}' = '{v}'" for k, v in missing.items())
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({props})")


def add_missing_columns(spark: SparkSession, path: str, present: list[str], added: dict[str, str]) -> None:
    """Add to the Delta table at `path` the columns of `added` (name -> SQL type) not in `present`:
    the columns a later release added to a table an earlier one made."""
    missing = {c: t for c, t in added.items() if c not in present}
    if missing:
        columns = ", ".join(f"{c} {t}" for c, t in missing.items())
        spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS ({columns})")


# Every commit of the stream carries this in its commitInfo.userMetadata, with the batch id, beside
# Delta's txn action (lake.commits): what `DESCRIBE HISTORY` shows of a batch, and what the quality
# run reads of a commit whose files lack batch_id statistics (quality.versions).
BATCH_TAG = "market-spread"


def batch_tag(batch_id: int) -> str:
    return json.dumps({"writer": BATCH_TAG, "batch_id": batch_id}, separators=(",", ":"))


def tagged_batch(user_metadata: object) -> int | None:
    """The batch id of a commit's userMetadata written by `batch_tag`, or None."""
    if not isinstance(user_metadata, str) or BATCH_TAG not in user_metadata:
        return None
    try:
        value = json.loads(user_metadata)
    except ValueError:
        return None
    if isinstance(value, dict) and value.get("writer") == BATCH_TAG and isinstance(value.get("batch_id"), int):
        return value["batch_id"]
    return None

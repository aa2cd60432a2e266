"""The lake: Delta table names, schemas and locations (contract section 4)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from market_spread.kernel.columns import PRICE, TIME
from market_spread.runtime.storage import Location, delta_rs_target, location

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_SQL_TYPES = {
    pa.string(): "STRING",
    pa.int64(): "BIGINT",
    pa.bool_(): "BOOLEAN",
    pa.date32(): "DATE",
    TIME: "TIMESTAMP",
}


def _sql_type(kind: pa.DataType) -> str:
    if pa.types.is_decimal(kind):
        return f"DECIMAL({kind.precision},{kind.scale})"
    return _SQL_TYPES[kind]


@dataclass(frozen=True)
class Table:
    """One table of the lake, declared once: its Spark DDL, its Arrow rows, its properties and the
    stream's upkeep of it are all read from here."""

    name: str
    schema: pa.Schema  # column order is the table's; a field with nullable=False is NOT NULL
    partitions: tuple[str, ...] = ()
    checkpoint_interval: int = 10
    compacted: bool = True  # the stream compacts its small files (lake.compaction): append-only tables
    added: tuple[str, ...] = ()  # columns added after the first release: ensure_tables adds them to older lakes

    def columns(self) -> list[tuple[str, str]]:
        """(name, Spark SQL type) of each column, in order."""
        return [(f.name, _sql_type(f.type)) for f in self.schema]

    def added_columns(self) -> dict[str, str]:
        """The columns added after the first release, name -> Spark SQL type."""
        return {name: kind for name, kind in self.columns() if name in self.added}

    @property
    def ddl(self) -> str:
        """The Spark DDL of the columns (CREATE TABLE's column list)."""
        return ", ".join(f"{f.name} {_sql_type(f.type)}{'' if f.nullable else ' NOT NULL'}" for f in self.schema)

    @property
    def arrow(self) -> pa.Schema:
        """The Arrow schema rows are written in (every column nullable, as delta-rs reads them back)."""
        return pa.schema([f.with_nullable(True) for f in self.schema])


def schema(*columns: tuple[str, pa.DataType] | tuple[str, pa.DataType, bool]) -> pa.Schema:
    """An Arrow schema of (name, type) or (name, type, nullable) columns."""
    return pa.schema([pa.field(*c) for c in columns])


# Each table checkpoints at its own interval. A checkpoint costs its table a state reconstruction,
# a checksum validation and a Parquet write, and the stream commits to every table in every batch:
# with one interval for all, every tenth batch wrote four checkpoints at once, the latency's worst
# case (docs/performance.md, row 'checkpoint intervals 10-13'). Intervals of 10 to 13 spread them
# over different batches; all stay far below the 400 commits after which Delta forces a checksum
# validation before a commit (`versionChecksum.forcedValidationInterval`).
# The quote history is partitioned by day so that checks of late orders read only the days they need.
# Columns beyond the contract are documented in docs/contract.md.
DECLARED: dict[str, Table] = {
    t.name: t
    for t in (
        Table(
            "symbol_state",
            schema(
                ("symbol", pa.string(), False),
                ("bid", PRICE),
                ("offer", PRICE),
                ("quote_time", TIME),
                ("seq", pa.int64()),
                ("should_reject_trades", pa.bool_()),
                ("updated_at", TIME),
                ("batch_id", pa.int64()),
            ),
            checkpoint_interval=12,
            compacted=False,  # rewritten whole or MERGEd each batch: no small files pile up
        ),
        Table(
            "alerts",
            schema(
                ("order_id", pa.string()),
                ("account", pa.int64()),
                ("symbol", pa.string()),
                ("side", pa.string()),
                ("qty", PRICE),
                ("price", PRICE),
                ("order_time", TIME),
                ("reason", pa.string()),
                ("bid", PRICE),
                ("offer", PRICE),
                ("quote_time", TIME),
                ("detected_at", TIME),
                ("batch_id", pa.int64()),
                ("order_seq", pa.int64()),
                ("quote_seq", pa.int64()),
            ),
            checkpoint_interval=11,
        ),
        Table(
            "quotes",
            schema(
                ("symbol", pa.string()),
                ("bid", PRICE),
                ("offer", PRICE),
                ("quote_time", TIME),
                ("seq", pa.int64()),
                ("batch_id", pa.int64()),
                ("should_reject_trades", pa.bool_()),
                ("quote_date", pa.date32()),
            ),
            partitions=("quote_date",),
        ),
        Table(
            "quarantine",
            schema(
                ("stream", pa.string()),
                ("raw", pa.string()),
                ("reason", pa.string()),
                ("source_file", pa.string()),
                ("detected_at", TIME),
                ("batch_id", pa.int64()),
            ),
        ),
        Table(
            "batch_metrics",
            schema(
                ("batch_id", pa.int64()),
                ("started_at", TIME),
                ("finished_at", TIME),
                *[(c, pa.int64()) for c in ("quotes", "orders", "alerts", "quarantined", "input_lines")],
                ("late_symbols", pa.int64()),
                *[(c, pa.int64()) for c in ("parse_ms", "check_ms", "write_ms", "merge_ms", "spark_jobs")],
                ("placement", pa.string()),  # where the batch's kernel ran, and why (stream.placement)
                ("state_batch", pa.int64()),  # symbol_state is current up to this batch (lake.state_writes)
            ),
            checkpoint_interval=13,
            added=("spark_jobs", "placement", "state_batch"),
        ),
    )
}
# Spark's DDL of each table (derived from DECLARED).
SCHEMAS: dict[str, str] = {name: table.ddl for name, table in DECLARED.items()}


def arrow_schema(table: str) -> pa.Schema:
    """The Arrow schema of the rows written to `table`."""
    return DECLARED[table].arrow


# Written to every new table. No deletion vectors, no column mapping: the product enables no feature
# delta-rs cannot read; a user may enable them later (USER_PROPERTIES, lake.protocol).
# Bounded growth: commit files older than 5 minutes go at the next log clean-up (lake.commits), and
# so do the tombstones of removed files. Each delta-rs commit lists the whole `_delta_log` (a local
# file system enumerates the folder even from an offset), so a commit's cost grows with what the log
# keeps (measured: docs/performance.md, row '5 minutes of log instead of 30'). 5 minutes is the
# time-travel window; older states are read by `batch_id`. Nothing of the product reads an old
# version (quality selects alerts by batch: quality/slices.py).
# Delta requires the deleted-file retention to be no longer than the log's; VACUUM keeps its own
# `--retain-hours` (7 days) for the data files.
# A checkpoint every 10 commits (Delta's default, stated so that it cannot drift; each table's own:
# Table.checkpoint_interval) keeps the log replay of a snapshot short.
TABLE_PROPERTIES = {
    "delta.enableDeletionVectors": "false",
    "delta.logRetentionDuration": "interval 5 minutes",
    "delta.deletedFileRetentionDuration": "interval 5 minutes",
    "delta.checkpointRetentionDuration": "interval 2 days",
    "delta.checkpointInterval": "10",
}


def stats_columns(name: str) -> list[str]:
    """The columns whose statistics (min, max, nulls) each data file records: all but the decimals,
    the booleans (Delta keeps none for them), the partition columns and the raw quarantined lines.
    delta-rs writes a decimal's bounds through a binary float (1234567890.12345678 became
    1234567890.1234567, below the value it bounds), so any reader that skips files by them could
    miss rows: an equality on an 18-digit price found nothing."""
    table = DECLARED[name]
    return [
        f.name
        for f in table.schema
        if not (pa.types.is_decimal(f.type) or pa.types.is_boolean(f.type))
        and f.name not in table.partitions
        and f.name != "raw"
    ]


def table_properties(name: str) -> dict[str, str]:
    """The properties written to table `name` (TABLE_PROPERTIES with its checkpoint interval and
    statistics columns)."""
    return {
        **TABLE_PROPERTIES,
        "delta.checkpointInterval": str(DECLARED[name].checkpoint_interval),
        "delta.dataSkippingStatsColumns": ",".join(stats_columns(name)),
    }


TABLES = tuple(DECLARED)
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

    missing = []
    for name in DECLARED:
        path = table_path(lake, name)
        if is_delta_table(path):
            _upgrade(spark, name, path)
        else:
            missing.append(name)
    # Side by side: on S3 each creation is a few requests.
    with ThreadPoolExecutor(max_workers=max(1, len(missing)), thread_name_prefix="create-table") as pool:
        for done in [pool.submit(create_table, lake, name) for name in missing]:
            done.result()


def create_table(lake: str | Location, name: str) -> None:
    """Table `name` created empty by delta-rs, unless it exists: the same protocol, schema and
    properties as Spark's CREATE TABLE, in milliseconds where Spark's took a new lake's start a
    second of JVM work (docs/performance.md, row 'new tables created by delta-rs')."""
    create_declared(table_path(lake, name), DECLARED[name], table_properties(name))


def create_declared(path: str, table: Table, properties: dict[str, str]) -> None:
    """`table` created empty at `path` by delta-rs with `properties`, unless it exists."""
    from deltalake import DeltaTable, Schema

    uri, options = delta_rs_target(path)
    try:
        DeltaTable.create(
            uri,
            schema=Schema.from_arrow(table.schema),  # keeps NOT NULL, which Table.arrow drops
            mode="ignore",
            partition_by=list(table.partitions) or None,
            configuration=properties,
            storage_options=options,
            # delta-rs 1.6 cannot parse delta.checkpointRetentionDuration's interval (Spark can)
            raise_if_key_not_exists=False,
        )
    except Exception:
        if not is_delta_table(path):  # another writer's creation won the race
            raise


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
    add_missing_columns(spark, path, columns, DECLARED[name].added_columns())
    missing = {k: v for k, v in table_properties(name).items() if have.get(k) != v and ours(k, have.get(k))}
    if missing:
        props = ", ".join(f"'{k}' = '{v}'" for k, v in missing.items())
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({props})")


# Properties a user may change and keep (contract 4: users own their tables), with the values
# earlier releases wrote: those, or none, are this release's to set; any other value is the user's.
# The rest (deletion vectors off, the statistics columns) are what delta-rs and exact decimals need.
USER_PROPERTIES = {
    "delta.enableDeletionVectors": {"false"},  # a user's `true` stays (lake.protocol routes the commits)
    "delta.logRetentionDuration": {"interval 7 days", "interval 30 minutes"},
    "delta.deletedFileRetentionDuration": {"interval 30 minutes"},
    "delta.checkpointRetentionDuration": set(),
    "delta.checkpointInterval": {"10"},
}


def ours(key: str, value: str | None) -> bool:
    """Whether this release may set property `key` of a table that holds `value` (None: unset)."""
    return value is None or key not in USER_PROPERTIES or value in USER_PROPERTIES[key]


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

"""Arrow rows for the driver's delta-rs commits (lake.lake_tables): the tables' Arrow schemas and a
Spark DataFrame's rows brought to the driver in them.

Why commit from the driver: a Spark MERGE of a few thousand rows costs Delta a snapshot of the
table's new version, then analysis, a touched-files job and a rewrite job, all on the batch's
critical path; the same commit through delta-rs is a small fraction of that (measured:
docs/performance.md, row 'commits from the driver with delta-rs'). The MERGE's source
(one row per symbol) and the metrics are already on the driver; a small batch's rows are brought
there by the one Spark job that computes them. `MARKET_SPREAD_DRIVER_COMMITS=off` sends every write
through Spark again.
"""

from __future__ import annotations

import re

import pyarrow as pa
from pyspark.sql import DataFrame

from market_spread.runtime import settings

_TYPES = {
    "STRING": pa.string(),
    "BIGINT": pa.int64(),
    "BOOLEAN": pa.bool_(),
    "DATE": pa.date32(),
    "TIMESTAMP": pa.timestamp("us", tz="UTC"),
}


def enabled() -> bool:
    """Whether the driver's delta-rs commits are on (MARKET_SPREAD_DRIVER_COMMITS=on|off, default on)."""
    return settings.value("MARKET_SPREAD_DRIVER_COMMITS")  # SettingError unless on or off (or true/false...)


def arrow_schema(schema_sql: str) -> pa.Schema:
    """The Arrow schema of a table's SQL schema (lake.tables.SCHEMAS)."""
    fields = []
    for column in re.split(r",(?![^()]*\))", schema_sql):  # not the comma inside DECIMAL(18,8)
        name, kind = column.strip().split(" ", 1)
        kind = kind.replace(" NOT NULL", "").strip().upper()
        decimal = re.fullmatch(r"DECIMAL\((\d+),\s*(\d+)\)", kind)
        fields.append(pa.field(name, pa.decimal128(int(decimal[1]), int(decimal[2])) if decimal else _TYPES[kind]))
    return pa.schema(fields)


def arrow_rows(schema_sql: str, frame: DataFrame) -> pa.Table:
    """A DataFrame's rows on the driver as Arrow, in the table schema `schema_sql` (one Spark job)."""
    schema = arrow_schema(schema_sql)
    return frame.select(*schema.names).toArrow().cast(schema)

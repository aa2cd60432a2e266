"""Arrow rows for the driver's delta-rs commits (lake.lake_tables): a Spark DataFrame's rows
brought to the driver in a table's Arrow schema (lake.tables.DECLARED).

Why commit from the driver: a Spark MERGE of a few thousand rows costs Delta a snapshot of the
table's new version, then analysis, a touched-files job and a rewrite job, all on the batch's
critical path; the same commit through delta-rs is a small fraction of that (measured:
docs/performance.md, row 'commits from the driver with delta-rs'). The MERGE's source
(one row per symbol) and the metrics are already on the driver; a small batch's rows are brought
there by the one Spark job that computes them. `MARKET_SPREAD_DRIVER_COMMITS=off` sends every write
through Spark again.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame

from market_spread.lake import tables as lake_mod
from market_spread.runtime import settings


def enabled() -> bool:
    """Whether the driver's delta-rs commits are on (MARKET_SPREAD_DRIVER_COMMITS=on|off, default on)."""
    return settings.value("MARKET_SPREAD_DRIVER_COMMITS")  # SettingError unless on or off (or true/false...)


def arrow_rows(table: str, frame: DataFrame) -> pa.Table:
    """A DataFrame's rows on the driver as Arrow, in the rows' schema of `table` (one Spark job)."""
    schema = lake_mod.arrow_schema(table)
    return frame.select(*schema.names).toArrow().cast(schema)

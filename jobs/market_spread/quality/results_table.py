"""The quality_results Delta table: one row per expectation per run, and the alerts high-water mark
it keeps (the last alerts version a passing run validated)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from market_spread.lake import tables as lake_mod

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

RESULTS_TABLE = "quality_results"
RESULTS_SCHEMA = (
    "run_id STRING, suite STRING, expectation STRING, critical BOOLEAN, success BOOLEAN, "
    "unexpected_count BIGINT, from_version BIGINT, to_version BIGINT, validated_at TIMESTAMP, "
    "rows_validated BIGINT, run_passed BOOLEAN, observed STRING, "
    "max_spread DECIMAL(18,8), max_spread_ratio DECIMAL(18,8)"
)


def ensure_results_table(spark: SparkSession, lake: str | Path) -> str:
    path = lake_mod.table_path(lake, RESULTS_TABLE)
    if not lake_mod.is_delta_table(path):
        # Same properties as the product's tables, so delta-rs readers can open it too.
        props = ", ".join(f"'{k}' = '{v}'" for k, v in lake_mod.TABLE_PROPERTIES.items())
        spark.sql(
            f"CREATE TABLE IF NOT EXISTS delta.`{path}` ({RESULTS_SCHEMA}) USING DELTA TBLPROPERTIES ({props})"
        )
    return path


def high_water_mark(lake: str | Path) -> int | None:
    """The last alerts version validated by a run that recorded its results and passed.

    Read with delta-rs: a few columns of a small table, without the Spark jobs of a Delta snapshot.
    """
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    path = lake_mod.table_path(lake, RESULTS_TABLE)
    if not lake_mod.is_delta_table(path):
        return None
    passed = (pc.field("suite") == "alerts") & pc.field("run_passed") & pc.field("to_version").is_valid()
    table = DeltaTable(path).to_pyarrow_dataset().to_table(columns=["to_version"], filter=passed)
    value = pc.max(table["to_version"]).as_py() if table.num_rows else None
    return None if value is None else int(value)


def _next_mark(before: int | None, to_version: int, passed: bool) -> int | None:
    """What high_water_mark() reads once this run is recorded, without reading it back."""
    if not passed:
        return before
    return to_version if before is None else max(before, to_version)

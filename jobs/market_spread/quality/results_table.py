"""The quality_results Delta table: one row per expectation per run, and the alerts high-water mark
it keeps (the last alerts version a passing run validated, and the newest batch in it)."""
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
    "max_spread DECIMAL(18,8), max_spread_ratio DECIMAL(18,8), to_batch BIGINT"
)
# Columns added after the table's first release: ensure_results_table adds them to older tables.
ADDED_RESULTS_COLUMNS = {"to_batch": "BIGINT"}


def ensure_results_table(spark: SparkSession, lake: str | Path) -> str:
    path = lake_mod.table_path(lake, RESULTS_TABLE)
    if not lake_mod.is_delta_table(path):
        # Same properties as the product's tables, so delta-rs readers can open it too.
        props = ", ".join(f"'{k}' = '{v}'" for k, v in lake_mod.TABLE_PROPERTIES.items())
        spark.sql(
            f"CREATE TABLE IF NOT EXISTS delta.`{path}` ({RESULTS_SCHEMA}) USING DELTA TBLPROPERTIES ({props})"
        )
        return path
    from market_spread.lake.deltalog import properties_and_columns

    known = properties_and_columns(path)
    columns = known[1] if known is not None else spark.read.format("delta").load(path).columns
    lake_mod.add_missing_columns(spark, path, columns, ADDED_RESULTS_COLUMNS)
    return path


def _passed_alert_runs(lake: str | Path, columns: list[str]):
    """`columns` of the alerts rows of passing runs (an Arrow table), or None without a results
    table or without one of the columns (a table from before it was added).

    Read with delta-rs: a few columns of a small table, without the Spark jobs of a Delta snapshot.
    """
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    path = lake_mod.table_path(lake, RESULTS_TABLE)
    if not lake_mod.is_delta_table(path):
        return None
    table = DeltaTable(path)
    if not set(columns) <= {f.name for f in table.schema().fields}:
        return None
    passed = (pc.field("suite") == "alerts") & pc.field("run_passed") & pc.field("to_version").is_valid()
    return table.to_pyarrow_dataset().to_table(columns=columns, filter=passed)


def _largest(values) -> int | None:
    import pyarrow.compute as pc

    value = pc.max(values).as_py() if len(values) else None
    return None if value is None else int(value)


def high_water_mark(lake: str | Path) -> int | None:
    """The last alerts version validated by a run that recorded its results and passed."""
    runs = _passed_alert_runs(lake, ["to_version"])
    return None if runs is None else _largest(runs["to_version"])


def mark_batch(lake: str | Path, version: int) -> int | None:
    """The newest batch whose alerts a passing run validated up to alerts version `version` (None
    when not recorded, as in runs before this column). It lets the next run find the alerts after
    the mark by their batch when that version can no longer be read (log retention, VACUUM)."""
    import pyarrow.compute as pc

    runs = _passed_alert_runs(lake, ["to_version", "to_batch"])
    if runs is None:
        return None
    return _largest(runs.filter(pc.equal(runs["to_version"], version))["to_batch"])


def _next_mark(before: int | None, to_version: int, passed: bool) -> int | None:
    """What high_water_mark() reads once this run is recorded, without reading it back."""
    if not passed:
        return before
    return to_version if before is None else max(before, to_version)

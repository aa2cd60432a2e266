"""The quality_results Delta table: one row per expectation per run, and what it keeps of the alerts
already checked: the batch ids each passing run validated (`batches`, ranges such as "0-2,5")."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import pyarrow as pa

from market_spread.kernel.columns import PRICE, TIME
from market_spread.lake import tables as lake_mod

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from market_spread.runtime.storage import Location

RESULTS_TABLE = "quality_results"
RESULTS = lake_mod.Table(
    RESULTS_TABLE,
    lake_mod.schema(
        *[(c, pa.string()) for c in ("run_id", "suite", "expectation")],
        *[(c, pa.bool_()) for c in ("critical", "success")],
        *[(c, pa.int64()) for c in ("unexpected_count", "from_version", "to_version")],
        ("validated_at", TIME),
        ("rows_validated", pa.int64()),
        ("run_passed", pa.bool_()),
        ("observed", pa.string()),
        *[(c, PRICE) for c in ("max_spread", "max_spread_ratio")],
        ("to_batch", pa.int64()),
        ("batches", pa.string()),
    ),
    compacted=False,  # written by the quality run, not the stream
    added=("to_batch", "batches"),  # ensure_results_table adds them to older tables
)
RESULTS_SCHEMA = RESULTS.ddl

Ranges = list[tuple[int | None, int]]  # inclusive, sorted, disjoint; None: from the first batch


def ensure_results_table(spark: SparkSession, lake: str | Location) -> str:
    path = lake_mod.table_path(lake, RESULTS_TABLE)
    if not lake_mod.is_delta_table(path):
        # Same properties as the product's tables; by delta-rs, without Spark's snapshot jobs.
        lake_mod.create_declared(path, RESULTS, dict(lake_mod.TABLE_PROPERTIES))
        return path
    from market_spread.lake.deltalog import properties_and_columns

    known = properties_and_columns(path)
    columns = known[1] if known is not None else spark.read.format("delta").load(path).columns
    lake_mod.add_missing_columns(spark, path, columns, RESULTS.added_columns())
    return path


def append_results(spark: SparkSession, path: str, rows: list[dict]) -> None:
    """Append `rows` (dicts of the table's columns) to the results table: by delta-rs where it
    writes every feature of the table (no Spark snapshot to build), else by Spark."""
    from deltalake import write_deltalake

    from market_spread.lake.protocol import constraints, delta_rs_writes
    from market_spread.runtime.storage import open_delta

    table = open_delta(path)
    if delta_rs_writes(table) and not constraints(table):
        write_deltalake(table, pa.Table.from_pylist(rows, schema=RESULTS.arrow), mode="append")
        return
    spark.createDataFrame(rows, RESULTS_SCHEMA).write.format("delta").mode("append").save(path)


def _passed_alert_runs(lake: str | Location, columns: list[str]):
    """`columns` of the alerts rows of passing runs (an Arrow table), or None without a results
    table. A column the table does not have yet (a table from before it was added) reads as nulls.

    Read with delta-rs: a few columns of a small table, without the Spark jobs of a Delta snapshot.
    """
    import pyarrow as pa

    from market_spread.runtime.storage import open_delta, read_rows

    path = lake_mod.table_path(lake, RESULTS_TABLE)
    if not lake_mod.is_delta_table(path):
        return None
    table = open_delta(path)
    present = {f.name for f in table.schema().fields}
    runs = read_rows(table, [c for c in columns if c in present], "suite = 'alerts' AND run_passed")
    for name in columns:
        if name not in present:
            runs = runs.append_column(name, pa.nulls(runs.num_rows, pa.int64()))
    return runs


def high_water_mark(lake: str | Location) -> int | None:
    """The newest alerts version a passing run has read (shown to users; the alerts still to check
    are found by batch, see validated_batches)."""
    import pyarrow.compute as pc

    runs = _passed_alert_runs(lake, ["to_version"])
    value = pc.max(runs["to_version"]).as_py() if runs is not None and runs.num_rows else None
    return None if value is None else int(value)


def validated_batches(lake: str | Location) -> Ranges:
    """The batches whose alerts a passing run validated, as merged ranges.

    A run recorded before the `batches` column validated every batch up to its `to_batch` (the
    mark was then a table version, and batches are committed in order)."""
    runs = _passed_alert_runs(lake, ["batches", "to_batch"])
    if runs is None:
        return []
    ranges: Ranges = []
    for text, to_batch in set(zip(runs["batches"].to_pylist(), runs["to_batch"].to_pylist())):
        if text is not None:
            ranges.extend(parse_ranges(str(text)))
        elif to_batch is not None:
            ranges.append((None, int(to_batch)))
    return merge(ranges)


def merge(ranges: Iterable[tuple[int | None, int]]) -> Ranges:
    ordered = sorted(ranges, key=lambda r: (-1 if r[0] is None else 0, r[0] or 0))
    out: Ranges = []
    for lo, hi in ordered:
        if out and (lo is None or out[-1][1] >= lo - 1):
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def format_ranges(batch_ids: Iterable[int]) -> str:
    """Sorted batch ids as "0-2,5" ("" for none)."""
    return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in merge((b, b) for b in batch_ids))


def parse_ranges(text: str) -> Ranges:
    out: Ranges = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out.append((int(lo), int(hi or lo)))
    return out

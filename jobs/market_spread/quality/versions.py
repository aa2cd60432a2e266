"""Delta versions as validate uses them: the version a read is pinned to, that read, and which
batches the newest commit that added rows wrote. The log itself is read in lake.deltalog."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from market_spread.lake.deltalog import latest_version, read_commit
from market_spread.runtime.storage import Location

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


# Tables up to this many rows are read with delta-rs and handed to Spark from memory: each Spark read
# of a Delta table builds its snapshot and plans a file scan, and every GX metric scanned it again
# (measured: docs/performance.md, row 'validate reads small tables with delta-rs').
LOCAL_ROWS = 200_000


def _read(spark: SparkSession, path: str, version: int | None = None) -> DataFrame:
    """Table `path` at `version` (None: the newest) as a Spark DataFrame."""
    local = _local_rows(path, version)
    if local is not None:
        return spark.createDataFrame(local)
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return reader.load(path)


def _local_rows(path: str, version: int | None) -> Any:
    """The table's rows at `version` as Arrow, read with delta-rs's query engine, when it reads every
    feature of the table and the table holds at most LOCAL_ROWS rows; else None (Spark reads it)."""
    from deltalake.exceptions import DeltaError

    from market_spread.lake.protocol import DELTA_RS_READS, reader_features
    from market_spread.runtime.storage import open_delta, read_rows

    try:
        table = open_delta(path)
        if version is not None:
            table.load_as_version(version)
        if not reader_features(table) <= DELTA_RS_READS:
            return None
        counts = table.get_add_actions(flatten=True).column("num_records").to_pylist()
        if None in counts or sum(counts) > LOCAL_ROWS:
            return None
        return read_rows(table, [f.name for f in table.schema().fields])
    except DeltaError:
        return None


def version_to_read(spark: SparkSession, path: str) -> int:
    """The table's newest version, to pin a Spark read to: delta-rs's, or Spark's own when delta-rs
    cannot read the table's log (a reader feature it lacks, such as geospatial, which Spark reads).
    FileNotFoundError when there is no Delta table at `path`."""
    from deltalake.exceptions import DeltaError

    try:
        version = latest_version(path)
    except DeltaError:
        quoted = path.replace("`", "``")
        row = spark.sql(f"DESCRIBE HISTORY delta.`{quoted}` LIMIT 1").first()
        if row is None:
            raise FileNotFoundError(f"no Delta commits under {path}") from None
        return int(row["version"])
    if version is None:
        raise FileNotFoundError(f"no Delta commits under {path}")
    return version


def _added_batches(actions: list[dict[str, Any]]) -> tuple[bool, set[int]]:
    """Whether a commit's actions add rows, and the batch ids they hold (per-file batch_id
    statistics, else the commit's batch tag)."""
    import json

    from market_spread.lake.tables import tagged_batch

    adds, batches, tag = False, set[int](), None
    for action in actions:
        add = action.get("add")
        if isinstance(action.get("commitInfo"), dict):
            tag = tagged_batch(action["commitInfo"].get("userMetadata"))
        if not isinstance(add, dict) or not add.get("dataChange", True):
            continue
        adds = True
        stats = json.loads(add.get("stats") or "{}")
        lo, hi = (stats.get(k, {}).get("batch_id") for k in ("minValues", "maxValues"))
        if isinstance(lo, int) and isinstance(hi, int):
            batches.update(range(lo, hi + 1))
    if adds and not batches and tag is not None:
        batches.add(tag)
    return adds, batches


def newest_data_commit(table: str | Location, newest: int, look_back: int = 50) -> tuple[float, set[int]] | None:
    """(commit time, batch ids) of the newest commit still in the log, among the `look_back` up to
    version `newest`, that added rows (compaction rewrites files without a data change and is passed
    over); None when none is found."""
    for version in range(newest, max(newest - look_back, -1), -1):
        try:
            commit = read_commit(table, version)
            if commit is None:
                break  # log clean-up deletes the oldest commits first: the older ones are gone too
            adds, batches = _added_batches(commit.actions)
        except (OSError, ValueError):
            continue
        if adds:
            return commit.time, batches
    return None

"""Delta versions of the lake's tables: the newest one, when one was committed, a read pinned to one,
and which batches the newest commit that added rows wrote."""

from __future__ import annotations

from typing import TYPE_CHECKING

from market_spread.runtime.storage import Location, S3Path, location

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def _read(spark: SparkSession, path: str, version: int | None = None) -> DataFrame:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return reader.load(path)


def latest_version(path: str | Location) -> int:
    """The table's newest committed version, from the commit files' names (no Spark job needed).

    Commits appear atomically as `_delta_log/<20 digits>.json`; in-flight ones are hidden temp files.
    """
    versions = [
        int(p.name[:20])
        for p in (location(path) / "_delta_log").glob("*.json")
        if len(p.name) == 25 and p.name[:20].isdigit()
    ]
    if not versions:
        raise FileNotFoundError(f"no Delta commits under {path}")
    return max(versions)


def commit_time(table: str | Location, version: int) -> float | None:
    """When `version` of the table was committed (epoch seconds): its commitInfo timestamp, else the
    commit file's modification time; None when the file is gone (cleaned up after a checkpoint)."""
    import json

    path = location(table) / "_delta_log" / f"{version:020d}.json"
    try:
        for line in path.read_text(encoding="utf-8").splitlines():
            info = json.loads(line).get("commitInfo") if line.strip() else None
            if isinstance(info, dict) and isinstance(info.get("timestamp"), (int, float)):
                return info["timestamp"] / 1000.0
        if isinstance(path, S3Path):
            return path.stat().modified.timestamp()
        return path.stat().st_mtime
    except (OSError, ValueError):
        return None


def _added_batches(lines: list[str]) -> tuple[bool, set[int]]:
    """Whether a commit's actions add rows, and the batch ids they hold (per-file batch_id
    statistics, else the commit's batch tag)."""
    import json

    from market_spread.lake.tables import tagged_batch

    adds, batches, tag = False, set[int](), None
    for line in lines:
        action = json.loads(line) if line.strip() else {}
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


def newest_data_commit(table: str | Location, look_back: int = 50) -> tuple[float, set[int]] | None:
    """(commit time, batch ids) of the newest commit still in the log that added rows (compaction
    rewrites files without a data change and is passed over); None when none is found."""
    log = location(table) / "_delta_log"
    versions = sorted((int(p.name[:20]) for p in log.glob("[0-9]" * 20 + ".json")), reverse=True)
    for version in versions[:look_back]:
        try:
            lines = (log / f"{version:020d}.json").read_text(encoding="utf-8").splitlines()
            adds, batches = _added_batches(lines)
        except (OSError, ValueError):
            continue
        committed = commit_time(table, version)
        if adds and committed is not None:
            return committed, batches
    return None

"""Delta versions of the lake's tables: the newest one, when one was committed, a read pinned to one."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def _read(spark: SparkSession, path: str, version: int | None = None) -> DataFrame:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return reader.load(path)


def latest_version(path: str | Path) -> int:
    """The table's newest committed version, from the commit files' names (no Spark job needed).

    Commits appear atomically as `_delta_log/<20 digits>.json`; in-flight ones are hidden temp files.
    """
    versions = [int(p.name[:20]) for p in (Path(path) / "_delta_log").glob("*.json")
                if len(p.name) == 25 and p.name[:20].isdigit()]
    if not versions:
        raise FileNotFoundError(f"no Delta commits under {path}")
    return max(versions)


def commit_time(table: str | Path, version: int) -> float | None:
    """When `version` of the table was committed (epoch seconds): its commitInfo timestamp, else the
    commit file's modification time; None when the file is gone (cleaned up after a checkpoint)."""
    import json

    path = Path(table) / "_delta_log" / f"{version:020d}.json"
    try:
        with open(path, encoding="utf-8") as log:
            for line in log:
                info = json.loads(line).get("commitInfo") if line.strip() else None
                if isinstance(info, dict) and isinstance(info.get("timestamp"), (int, float)):
                    return info["timestamp"] / 1000.0
        return path.stat().st_mtime
    except (OSError, ValueError):
        return None

"""What a Delta table's log says, read without Spark and in this module only: its latest version
and a stream's txn mark (delta-rs's snapshot), its properties and columns, and a column's maximum
from the files' statistics (delta-rs, a few milliseconds where Spark needs a snapshot and a job per
table); and the actions of one commit, the only read by hand (read_commit says why).

Delta's log clean-up deletes commit files (`N.json`) older than the newest checkpoint once they
pass `delta.logRetentionDuration`, so no single commit file can be relied on to exist; delta-rs's
snapshot starts from the newest checkpoint and always knows the version.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from market_spread.runtime.storage import Location, S3Path, location, open_delta


def latest_version(table: str | Location) -> int | None:
    """The newest version of the table at `table`, or None when there is no Delta table there (no
    log, or a log without commits). Raises delta-rs's DeltaError when it cannot read the log (a
    reader feature it lacks, such as geospatial): no caller may take that table for a missing one."""
    from deltalake.exceptions import TableNotFoundError

    try:
        return int(open_delta(table).version())
    except TableNotFoundError:
        return None


def marked_version(table: Any, stream_id: str) -> int | None:
    """The newest batch of `stream_id` the log of the open delta-rs `table` records (its txn
    version), or None."""
    return table.transaction_version(stream_id)


@dataclass(frozen=True)
class Commit:
    """One commit as its log file holds it."""

    actions: list[dict[str, Any]]
    time: float  # epoch seconds: its commitInfo timestamp, else the file's modification time


def read_commit(table: str | Location, version: int) -> Commit | None:
    """Commit `version` of the table, None when its file is gone (log clean-up deletes the oldest
    commits first); OSError or ValueError when it cannot be read or parsed.

    Read by hand: delta-rs gives a commit's commitInfo (`history`) and a version's live files, not
    the add actions of one commit with their statistics (a compaction since has replaced those
    files). A per-commit read of the actions in delta-rs (delta-kernel's table changes) would let it go.
    The time comes from the same read: `history` would read the file again, and it numbers its
    entries by counting down from the latest version, which is wrong past a commit without commitInfo.
    """
    path = location(table) / "_delta_log" / f"{version:020d}.json"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    actions = [json.loads(line) for line in text.splitlines() if line.strip()]
    info: dict[str, Any] = next((a["commitInfo"] for a in actions if isinstance(a.get("commitInfo"), dict)), {})
    if isinstance(info.get("timestamp"), (int, float)):
        return Commit(actions, info["timestamp"] / 1000.0)
    # commitInfo is optional in Delta's protocol
    if isinstance(path, S3Path):
        return Commit(actions, path.stat().modified.timestamp())
    return Commit(actions, path.stat().st_mtime)


def properties_and_columns(table: str | Location) -> tuple[dict[str, str], list[str]] | None:
    """The table's properties and top-level column names, or None when delta-rs cannot read it
    (callers then ask Spark)."""
    try:
        dt = open_delta(table)
        return dict(dt.metadata().configuration), [f.name for f in dt.schema().fields]
    except Exception:  # noqa: BLE001 - any failure: the caller's Spark path answers instead
        return None


def max_from_stats(table: str | Location, column: str) -> tuple[bool, Any]:
    """(known, value): the largest `column` value in the table from the per-file statistics of its
    log (value None for a table without rows). Not known (False) when delta-rs cannot read the
    table or a file with rows has no maximum recorded for the column; callers then scan the rows."""
    try:
        import pyarrow as pa

        files = pa.table(open_delta(table).get_add_actions(flatten=True))
        if files.num_rows == 0:
            return True, None
        if f"max.{column}" not in files.column_names:
            return False, None
        highest = None
        for value, rows in zip(files.column(f"max.{column}").to_pylist(), files.column("num_records").to_pylist()):
            if value is None:
                if rows is None or rows > 0:
                    return False, None  # rows without statistics (or all NULL): only a scan can tell
                continue
            highest = value if highest is None else max(highest, value)
        return True, highest
    except Exception:  # noqa: BLE001 - any failure: the caller scans the rows instead
        return False, None

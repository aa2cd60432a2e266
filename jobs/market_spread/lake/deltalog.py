"""What a Delta table's log says, read without Spark: its latest version (from the `_delta_log`
listing, standard library only), its properties and columns, and a column's maximum from the files'
statistics (both with delta-rs, a few milliseconds where Spark needs a snapshot and a job per table).

Delta's log clean-up deletes commit files (`N.json`) older than the newest checkpoint once they
pass `delta.logRetentionDuration`, so no single commit file can be relied on to exist; the newest
commit, checkpoint or `_last_checkpoint` record always survives and gives the version.
"""

from __future__ import annotations

import json
from typing import Any

from market_spread.runtime.storage import Location, list_names, location, open_delta

_DIGITS = 20


def latest_version(table: str | Location) -> int | None:
    """The newest version of the table at `table`, or None when it has no log (not a Delta table).

    Counts `N.json` commits, `N.checkpoint[...].parquet|json` checkpoints (classic, multi-part, v2),
    `N.M.compacted.json` log compactions (up to M) and `_last_checkpoint`; hidden temporary files
    of commits in flight are skipped.
    """
    log = location(table) / "_delta_log"
    names = list_names(log)
    if names is None:
        return None
    newest: int | None = None
    for name in names:
        head = name[:_DIGITS]
        if len(name) <= _DIGITS or not head.isdigit() or name[_DIGITS] != ".":
            continue
        version = int(head)
        rest = name[_DIGITS + 1 :]
        if rest.endswith(".compacted.json") and rest[:_DIGITS].isdigit():
            version = max(version, int(rest[:_DIGITS]))
        elif not (rest == "json" or rest.startswith("checkpoint.")):
            continue  # .crc and other side files do not prove a commit
        newest = version if newest is None else max(newest, version)
    try:
        recorded = json.loads((log / "_last_checkpoint").read_text(encoding="utf-8")).get("version")
        if isinstance(recorded, int):
            newest = recorded if newest is None else max(newest, recorded)
    except (OSError, ValueError, AttributeError):
        pass
    return newest


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

"""A Delta table's latest version from its `_delta_log` listing (standard library only, no Spark).

Delta's log clean-up deletes commit files (`N.json`) older than the newest checkpoint once they
pass `delta.logRetentionDuration`, so no single commit file can be relied on to exist; the newest
commit, checkpoint or `_last_checkpoint` record always survives and gives the version.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

_DIGITS = 20


def latest_version(table: str | Path) -> int | None:
    """The newest version of the table at `table`, or None when it has no log (not a Delta table).

    Counts `N.json` commits, `N.checkpoint[...].parquet|json` checkpoints (classic, multi-part, v2),
    `N.M.compacted.json` log compactions (up to M) and `_last_checkpoint`; hidden temporary files
    of commits in flight are skipped.
    """
    log = Path(table) / "_delta_log"
    try:
        names = os.listdir(log)
    except (FileNotFoundError, NotADirectoryError):
        return None
    newest: int | None = None
    for name in names:
        head = name[:_DIGITS]
        if len(name) <= _DIGITS or not head.isdigit() or name[_DIGITS] != ".":
            continue
        version = int(head)
        rest = name[_DIGITS + 1:]
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

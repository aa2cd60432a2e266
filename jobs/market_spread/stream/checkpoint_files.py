"""Reading and rewriting the files of a stream checkpoint that Spark keys by batch number
(`offsets/N`, `commits/N`), shared by the source-order move and the source log's trim."""

from __future__ import annotations

import os

from market_spread.runtime.storage import Location, S3Path


def numbered(folder: Location) -> list[Location]:
    """The folder's files named by a batch number, in batch order (none when it is missing)."""
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))


def offset_files(checkpoint: Location) -> list[Location]:
    return numbered(checkpoint / "offsets")


def last_committed(checkpoint: Location) -> int | None:
    commits = numbered(checkpoint / "commits")
    return int(commits[-1].name) if commits else None


def rewrite(path: Location, text: str) -> None:
    """Replace a checkpoint file atomically: a kill leaves the old text or the new one. Its Hadoop
    checksum would no longer match, so it goes first (a file without one is read unchecked). On
    object storage one PUT replaces an object whole, and S3A keeps no checksums."""
    if isinstance(path, S3Path):
        path.write_text(text)
        return
    tmp = path.with_name(f".{path.name}.rewrite")
    tmp.write_text(text, encoding="utf-8")
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    path.with_name(f".{path.name}.crc").unlink(missing_ok=True)
    os.replace(tmp, path)


def query_id(checkpoint: Location) -> str | None:
    """The streaming query's id, which Spark writes to the checkpoint's `metadata` when the query
    first starts and keeps across restarts: the stream's id in its Delta commits (lake.commits)."""
    import json

    try:
        found = json.loads((checkpoint / "metadata").read_text().splitlines()[0]).get("id")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return found if isinstance(found, str) and found else None

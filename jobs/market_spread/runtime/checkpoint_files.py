"""Reading and rewriting the files of a stream checkpoint that Spark keys by batch number
(`offsets/N`, `commits/N`), shared by the source-order move and the source log's trim: Spark's
on-disk format, the one reach into Spark's internals that is not a JVM call (runtime.spark_jvm).
Lets go when: Spark syncs a checkpoint's files itself (repair_torn_tail, planned_input), offers a
source log retention (stream.source_log) and names sources by name rather than position
(stream.checkpoint_layout)."""

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


def _whole(path: Location) -> bool:
    """Whether a numbered log file holds what Spark writes: a version line (`v1`), then JSON (the
    Kafka source's first offsets file starts with a zero byte, for Spark 2.1's sake)."""
    try:
        lines = path.read_text(encoding="utf-8").lstrip("\x00").splitlines()
    except (OSError, UnicodeDecodeError):
        return False
    return bool(lines) and lines[0].startswith("v") and lines[0][1:].isdigit()


def repair_torn_tail(checkpoint: Location) -> list[str]:
    """After a power loss on a local disk: drop the newest batch's checkpoint files that the disk
    left empty or cut short (Spark cannot start over them), each log's newest file only. Safe
    because every batch flushes the disk before its first commit (stream.batch): a batch whose
    `offsets/B` or source log entry is torn committed nothing (Spark plans it again), and one whose
    `commits/B` is torn is replayed, its commits skipped by their marks. Returns what was dropped (said by the caller); nothing on S3, where a PUT is whole."""
    if isinstance(checkpoint, S3Path):
        return []
    logs = [checkpoint / "offsets", checkpoint / "commits", *sorted(numbered_dirs(checkpoint / "sources"))]
    newest = [found[-1] for found in (numbered(log) for log in logs) if found]
    dropped = [path for path in newest if not _whole(path)]
    for path in dropped:
        path.with_name(f".{path.name}.crc").unlink(missing_ok=True)
        path.unlink(missing_ok=True)
    return [str(p) for p in dropped]


def numbered_dirs(folder: Location) -> list[Location]:
    """The source logs of a checkpoint's `sources/` (one folder per source, named by its index)."""
    if not folder.is_dir():
        return []
    return [p for p in folder.iterdir() if p.name.isdigit() and p.is_dir()]


def planned_input(checkpoint: Location, batch_id: int) -> list[Location]:
    """The checkpoint files Spark wrote for batch `batch_id` before running it: `offsets/B` and each
    source's log entry of B (a file source's; a Kafka source has only its first offsets). None on
    S3, where a PUT is durable once answered."""
    if isinstance(checkpoint, S3Path):
        return []
    return [checkpoint / "offsets" / str(batch_id)] + [
        log / str(batch_id) for log in numbered_dirs(checkpoint / "sources")
    ]

"""The stream's own commits from the driver: its data files and `_delta_log/N.json`, written here
as the Delta protocol's actions (add, remove, commitInfo), with no listing and no read of the log.

Why: delta-rs lists `_delta_log` twice in every commit (the latest version before it, its new
snapshot after), and the log keeps 30 minutes of commits (lake.tables): between batch 100 and 1,000
of the growth run an append went from 19 to 30 ms and the state MERGE from 35 to 43 ms. On the S3
server a delta-rs append was six requests (PUT, LIST, PUT, LIST, two GETs) and a MERGE nine. Here
either is its data file and its commit file.

Safe because the stream is the lake's only writer (lake.lock), so it knows N: the version it read
when it made the table's writer, plus its own commits. The commit file is put-if-absent (a hard
link on local disk, `If-None-Match: *` on S3): a commit this writer did not know of fails the batch
(`CommitRaced`) instead of being overwritten. A compaction commits while holding its table's
writer; Spark's plan's commits drop the writers (`forget`), which read their tables again.

Checkpoints at each table's interval, with expired-log clean-up (both read the log), and the
stream's compactions (lake.compaction) run on one background thread through delta-rs: no batch
waits for them.
"""
from __future__ import annotations

import io
import json
import sys
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from market_spread.lake.delta_actions import add_action, commit_info, commit_text, file_stats, partition_folder, partition_value, remove_action
from market_spread.lake.tables import batch_tag
from market_spread.runtime.storage import Location, S3Path, location, open_delta, put_if_absent

WRITER_VERSION = 2  # Delta's writer protocol these commits follow: column nullability (no table features)


class CommitRaced(RuntimeError):
    """A commit file this writer meant to create was there already: someone else wrote the table."""


def _write_data_file(root: Location, partition: dict[str, str | None], rows: pa.Table) -> tuple[str, int]:
    """Write `rows` as one Parquet file of the table at `root`; (path relative to it, size). On
    local disk straight to its place (a large batch's file is not held in memory twice); it is part
    of the table only once a commit names it."""
    relative = f"{partition_folder(partition)}part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    place = root / relative
    if isinstance(place, S3Path):
        sink = io.BytesIO()
        pq.write_table(rows, sink, compression="snappy")
        place.write_bytes(sink.getvalue())
        return relative, sink.tell()
    place.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(rows, str(place), compression="snappy")
    return relative, place.stat().st_size


# -- the writers --------------------------------------------------------------------------------------
@dataclass
class _Writer:
    """What one table's commits need: its next version, layout, and (once asked for) its rows."""

    path: str
    version: int
    interval: int
    partition_by: list[str]
    required: list[str] = field(default_factory=list)  # NOT NULL columns: writers enforce them
    files: list[tuple[str, dict[str, str | None], int]] | None = None  # path, partition, size
    rows: pa.Table | None = None
    opened: Any = None  # the DeltaTable read to make the writer, until `current_rows` takes it
    lock: threading.Lock = field(default_factory=threading.Lock)

    def commit(self, actions: list[dict]) -> None:
        version = self.version + 1
        log = location(self.path) / "_delta_log"
        if not put_if_absent(log / f"{version:020d}.json", commit_text(actions)):
            raise CommitRaced(f"{self.path}: version {version} was committed by someone else")
        self.version = version
        if version % self.interval == 0:
            _request_checkpoint(self.path)


_WRITERS: dict[str, _Writer] = {}
_WRITERS_LOCK = threading.Lock()


def _writer(path: str) -> _Writer:
    with _WRITERS_LOCK:
        known = _WRITERS.get(path)
    if known is not None:
        return known
    table = open_delta(path)
    protocol = table.protocol()
    if protocol.min_writer_version > WRITER_VERSION or protocol.writer_features:
        raise RuntimeError(f"{path}: the table asks writers for Delta writer version {protocol.min_writer_version} "
                           f"{protocol.writer_features or ''}; the stream's driver commits write version {WRITER_VERSION} "
                           "tables (as lake.tables creates them): set MARKET_SPREAD_DRIVER_COMMITS=off for this lake")
    metadata = table.metadata()
    interval = checkpoint_interval(table, default=10)  # Delta's own default
    required = [f.name for f in table.schema().fields if not f.nullable]
    made = _Writer(path, table.version(), interval, list(metadata.partition_columns), required, opened=table)
    with _WRITERS_LOCK:
        return _WRITERS.setdefault(path, made)


def checkpoint_interval(table: Any, default: int) -> int:
    """The table's `delta.checkpointInterval` (`default` when unset; at least 1)."""
    return max(1, int(table.metadata().configuration.get("delta.checkpointInterval") or default))


def forget(path: str | None = None) -> None:
    """Drop the writer of `path` (of every table when None, once the background upkeep is done): its
    next commit reads the table again. Called when a stream starts, a batch fails, or this process
    commits to the lake by other means (Spark's plan)."""
    if path is None:
        settle()
    with _WRITERS_LOCK:
        if path is None:
            _WRITERS.clear()
        else:
            _WRITERS.pop(path, None)


def append(path: str, rows: pa.Table, batch_id: int) -> None:
    """Append `rows` (in the table's schema, partition columns included) in one commit tagged with
    the batch; even no rows commit, as the batch's mark (lake.tables.committed_batches)."""
    writer = _writer(path)
    with writer.lock:
        writer.opened = None
        now_ms = int(time.time() * 1000)
        adds = [add_action(p, part, size, stats, now_ms) for p, part, size, stats in _data_files(writer, rows)]
        parameters = {"mode": "Append", "partitionBy": json.dumps(writer.partition_by)}
        metrics = {"numFiles": len(adds), "numOutputRows": rows.num_rows}
        writer.commit([commit_info("WRITE", parameters, metrics, writer.version, batch_id, now_ms), *adds])


def _data_files(writer: _Writer, rows: pa.Table) -> list[tuple[str, dict[str, str | None], int, str]]:
    """Write one file per partition of `rows`: (path, partition values, size, stats) of each."""
    if rows.num_rows == 0:
        return []
    for name in writer.required:
        if rows[name].null_count:
            raise ValueError(f"{writer.path}: {rows[name].null_count} rows without {name}, a NOT NULL column")
    root = location(writer.path)
    if not writer.partition_by:
        relative, size = _write_data_file(root, {}, rows)
        return [(relative, {}, size, file_stats(rows))]
    out = []
    keys = rows.select(writer.partition_by).group_by(writer.partition_by).aggregate([])
    for key in keys.to_pylist():
        mask = None
        for name, value in key.items():
            match = pc.is_null(rows[name]) if value is None else pc.equal(rows[name], pa.scalar(value, rows.schema.field(name).type))
            mask = match if mask is None else pc.and_(mask, match)
        part_rows = rows.filter(mask).drop_columns(writer.partition_by)
        partition = {name: partition_value(key[name]) for name in writer.partition_by}
        relative, size = _write_data_file(root, partition, part_rows)
        out.append((relative, partition, size, file_stats(part_rows)))
    return out


def current_rows(path: str, schema: pa.Schema) -> pa.Table:
    """Every row of the (unpartitioned) table at `path`, as this process last committed it."""
    writer = _writer(path)
    with writer.lock:
        if writer.rows is None:
            table, writer.opened = writer.opened or open_delta(path), None
            if table.version() != writer.version:
                raise CommitRaced(f"{path}: at version {table.version()}, its writer at {writer.version}")
            actions = pa.table(table.get_add_actions(flatten=True))
            writer.files = [(p, {}, s) for p, s in zip(actions["path"].to_pylist(), actions["size_bytes"].to_pylist())]
            writer.rows = table.to_pyarrow_table().select(schema.names).cast(schema)
        return writer.rows


def replace(path: str, rows: pa.Table | None, batch_id: int, parameters: dict[str, str]) -> None:
    """Make `rows` the whole content of the (unpartitioned) table at `path` in one commit tagged
    with the batch, recorded as a MERGE with `parameters`: its files removed, one file added.
    `rows` None: nothing changed, and the commit is the batch's mark alone. `current_rows` first."""
    writer = _writer(path)
    with writer.lock:
        if writer.files is None:
            raise RuntimeError(f"{path}: replace() before current_rows()")
        now_ms = int(time.time() * 1000)
        actions: list[dict] = []
        added = removed = 0
        if rows is not None:
            actions = [remove_action(p, part, size, now_ms) for p, part, size in writer.files]
            removed = len(actions)
            files = _data_files(writer, rows)
            actions += [add_action(p, part, size, stats, now_ms) for p, part, size, stats in files]
            added = len(files)
        metrics = {"numTargetFilesAdded": added, "numTargetFilesRemoved": removed,
                   "numOutputRows": rows.num_rows if rows is not None else 0}
        writer.commit([commit_info("MERGE", parameters, metrics, writer.version, batch_id, now_ms), *actions])
        if rows is not None:
            writer.files = [(p, part, size) for p, part, size, _ in files]
            writer.rows = rows


# -- work off the batch's path ------------------------------------------------------------------
class _Background:
    """One thread for the tables' upkeep (checkpoints, log clean-up, compaction), a job at a time:
    no two of them touch one table at once, and a batch waits for none of them."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._pending: dict[tuple[str, str], Future] = {}
        self._lock = threading.Lock()

    def submit(self, kind: str, path: str, job: Any, *args: Any) -> Future:
        with self._lock:
            queued = self._pending.get((kind, path))
            if queued is not None and not queued.done():
                return queued  # queued or running: a later interval asks again
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="delta-upkeep")
            self._pending[(kind, path)] = future = self._pool.submit(job, path, *args)
            return future

    def settle(self) -> None:
        """Wait for the jobs asked for so far (their errors stay with their futures)."""
        with self._lock:
            pending = list(self._pending.values())
            self._pending.clear()
        for future in pending:
            future.exception()


_BACKGROUND = _Background()


def _request_checkpoint(path: str) -> None:
    _BACKGROUND.submit("checkpoint", path, checkpoint)


def checkpoint(path: str) -> None:
    """Checkpoint the table at its latest version and delete its log files past retention (delta-rs,
    as its own post-commit hook did). A failure costs only the shortcut: said, not raised."""
    try:
        table = open_delta(path)
        table.create_checkpoint()
        table.cleanup_metadata()
        drop_stale_checksum(path)
    except Exception as exc:  # noqa: BLE001 - see above
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        print(f"warning: checkpoint of {path} failed (tried again at the next interval): {first}", file=sys.stderr, flush=True)


def compact(path: str, batch_id: int, target_bytes: int, guard: Callable[[], None] | None = None) -> Future:
    """Bin-pack the files of the append-only table at `path` smaller than `target_bytes` (delta-rs's
    compaction, one commit tagged with `batch_id`, the table's last batch) on the background thread.
    The future gives (delta-rs's metrics, milliseconds); it holds the table's writer while it runs,
    so the driver's next append to that table (only) waits for its commit. `guard` (the stream's
    proof that it still holds the lake) runs first, as before any of the stream's commits."""
    return _BACKGROUND.submit("compact", path, _compact, batch_id, target_bytes, guard)


def _compact(path: str, batch_id: int, target_bytes: int, guard: Callable[[], None] | None) -> tuple[dict[str, Any], int]:
    from deltalake import CommitProperties, PostCommitHookProperties

    began = time.perf_counter()
    writer = _writer(path)
    with writer.lock:
        if guard is not None:
            guard()
        table, writer.opened = writer.opened or open_delta(path), None
        if table.version() != writer.version:
            raise CommitRaced(f"{path}: at version {table.version()}, its writer at {writer.version}")
        metrics = table.optimize.compact(
            target_size=target_bytes, commit_properties=CommitProperties(custom_metadata={"userMetadata": batch_tag(batch_id)}),
            post_commithook_properties=PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False))
        writer.version = table.version()
    return metrics, int((time.perf_counter() - began) * 1000)


def settle() -> None:
    """Wait for the background upkeep asked for so far: before another engine commits to the lake,
    before the writers are dropped."""
    _BACKGROUND.settle()


def drop_stale_checksum(path: str) -> None:
    """Remove Hadoop's checksum of `_last_checkpoint` after delta-rs (re)wrote the file: Spark writes
    `._last_checkpoint.crc` beside it, delta-rs writes the file alone. With the checksum stale, every
    fresh Spark read of the table (a restarted stream, `sql`, a maintenance or quality run) failed to
    parse `_last_checkpoint`, slept and retried three times (about 3 s, with three stack traces), then
    listed the log. Without a checksum file Hadoop reads the file unchecked."""
    place = location(path)
    if isinstance(place, S3Path):
        return  # S3A writes no checksum files
    (place / "_delta_log" / "._last_checkpoint.crc").unlink(missing_ok=True)

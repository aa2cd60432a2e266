"""The stream's commits from the driver and the Delta tables it keeps open, all through delta-rs.

Every commit the driver makes (an append, the state MERGE, a compaction) is a delta-rs operation on
a table kept open between batches (`KeptTable`), so protocol checks, table features (appendOnly,
invariants, CHECK constraints, Change Data Feed), conflict detection, checkpoints and log clean-up
are the library's. Each commit of a batch carries its `BatchMark`: Delta's transaction identifier
(a `txn` action: the stream's id as appId, the batch as version), which any Delta reader sees and a
restarted stream reads to skip what a replayed batch already wrote.

Freshness: a kept table is advanced by the commit that changes it. Our own delta-rs commits advance
it in place; a commit this process makes through delta-spark (a table whose protocol needs it)
marks that table stale, and a stale table reads the log's new commits before its next use. Another writer's commit (a user
enabling Change Data Feed from Spark) is met by the next commit: delta-rs rebases a commit that does
not conflict, and one that does is tried again here against the table's new version.

A commit whose answer was lost (a timeout after the store took it) or that lost a race is told
apart by the mark: the table read again holds this batch's transaction, or it does not.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from market_spread.errors import DiskFull, MarketSpreadError
from market_spread.lake.deltalog import marked_version
from market_spread.lake.protocol import delta_rs_writes
from market_spread.lake.tables import batch_tag
from market_spread.runtime.lease import prove
from market_spread.runtime.storage import open_delta
from market_spread.runtime.stream_contract import EXIT_FEATURE

ATTEMPTS = 5  # a commit that lost a race is tried again against the new version this many times
REOPEN_DEFAULT = 100  # commits between two openings of a kept table whose log has no checkpoint interval
# Log clean-up lists and stats the whole `_delta_log`; at every checkpoint (each 10 commits) that
# listing grew with the retained log and slowed the batches beside it (docs/performance.md, row
# '5 minutes of log instead of 30'). Cleaning once every sixth of the retention lets the
# log overrun its retention by at most that sixth.
CLEANUP_SHARE = 6
DELTA_LOG_RETENTION_S = 30 * 86400.0  # Delta's default `delta.logRetentionDuration`: 30 days
_SECONDS = {
    "nanosecond": 1e-9,
    "microsecond": 1e-6,
    "millisecond": 1e-3,
    "second": 1,
    "minute": 60,
    "hour": 3600,
    "day": 86400,
    "week": 604800,
}

# A kept DeltaTable object gets slower with every commit made through it, and one opened again at
# each checkpoint does not (measured: docs/performance.md, row 'a kept table reopened from each new
# checkpoint'), so a table is opened afresh from each new checkpoint, off the batch's path (Upkeep).


class CommitRaced(MarketSpreadError):
    """A commit kept losing races against other writers of the table: the batch fails, nothing of it
    half-written; a restarted stream replays it."""


class ConstraintViolated(MarketSpreadError):
    """Rows of the batch break a CHECK constraint or invariant of the table: the batch fails without
    that table's commit, and the stream stops (exit 5: the product's own rows cannot be honoured).
    Drop or change the constraint, or fix the input."""

    exit_code = EXIT_FEATURE


class NeedsSpark(MarketSpreadError):
    """The table asks for a table feature delta-rs cannot write: its commits go through Spark."""


@dataclass(frozen=True)
class BatchMark:
    """Which micro-batch of which stream a commit belongs to."""

    stream_id: str  # the streaming query's id, kept in its checkpoint: stable across restarts
    batch_id: int

    def commit_properties(self) -> Any:
        from deltalake import CommitProperties, Transaction

        return CommitProperties(
            custom_metadata={"userMetadata": batch_tag(self.batch_id)},
            app_transactions=[Transaction(self.stream_id, self.batch_id)],
        )

    def spark_options(self) -> dict[str, str]:
        """Delta's idempotent-write options of a Spark DataFrame write."""
        return {"txnAppId": self.stream_id, "txnVersion": str(self.batch_id)}

    def spark_conf(self) -> dict[str, str]:
        """The same for Spark SQL commands (MERGE), as session settings."""
        return {
            "spark.databricks.delta.write.txnAppId": self.stream_id,
            "spark.databricks.delta.write.txnVersion": str(self.batch_id),
        }


def no_hooks() -> Any:
    """Checkpoints and log clean-up run on the upkeep thread, not inside a batch's commit."""
    from deltalake import PostCommitHookProperties

    return PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)


def checkpoint_interval(table: Any, default: int) -> int:
    """The table's `delta.checkpointInterval` (`default` when unset; at least 1)."""
    return max(1, int(table.metadata().configuration.get("delta.checkpointInterval") or default))


def log_retention_seconds(table: Any) -> float:
    """The table's `delta.logRetentionDuration` in seconds ('interval 5 minutes', 'interval 1 day 12
    hours'); Delta's default when unset or unreadable here: it only paces the log's clean-up, which
    must never stop a batch."""
    text = table.metadata().configuration.get("delta.logRetentionDuration") or ""
    words = text.lower().split()
    words = words[1:] if words[:1] == ["interval"] else words
    try:
        pairs = [(float(words[i]), _SECONDS[words[i + 1].rstrip("s")]) for i in range(0, len(words), 2)]
    except (IndexError, KeyError, ValueError):
        return DELTA_LOG_RETENTION_S
    return sum(number * unit for number, unit in pairs) or DELTA_LOG_RETENTION_S


def _already_marked(table: Any, mark: BatchMark) -> bool:
    """Whether the table's log holds `mark`'s batch (a mark of batch 0 is a mark: not `or -1`)."""
    marked = marked_version(table, mark.stream_id)
    return marked is not None and marked >= mark.batch_id


class KeptTable:
    """One Delta table kept open in delta-rs: committed to under `lock`, read by anyone."""

    def __init__(self, path: str, upkeep: "Upkeep") -> None:
        self.path, self.upkeep = path, upkeep
        self.lock = threading.RLock()
        self._table: Any = None
        self._opened_at = -1
        self._interval = REOPEN_DEFAULT
        self._cleanup_every = 0.0  # seconds between two log clean-ups (a share of the retention)
        self._cleaned_at = float("-inf")  # the last clean-up (monotonic): the first checkpoint cleans
        self._stale = False
        self._replacement: Any = None  # opened from a new checkpoint by the upkeep thread
        self.route: Any = None  # how it is committed to and read, as last decided (lake.protocol.Route)
        # The rows this process overwrote the table with, and the commit that wrote them: reading them
        # back cost a GET of the table's file each batch on S3. Any other commit changes the version.
        self._written: tuple[tuple[str, int], Any] | None = None

    def current(self) -> Any:
        """The table as of every commit made before now that this process knows of."""
        with self.lock:
            if self._table is None:
                self._open(open_delta(self.path))
            elif self._replacement is not None:
                fresh, self._replacement = self._replacement, None
                if fresh.version() < self._table.version() or self._stale:
                    fresh.update_incremental()
                self._open(fresh)
            elif self._stale:
                self._table.update_incremental()
            self._stale = False
            return self._table

    def _open(self, table: Any) -> None:
        self._table, self._opened_at, self._stale = table, table.version(), False
        self._interval = checkpoint_interval(table, REOPEN_DEFAULT)
        self._cleanup_every = log_retention_seconds(table) / CLEANUP_SHARE

    def refresh(self) -> Any:
        """The table with every commit in its log, whoever made it (after a failed commit)."""
        with self.lock:
            self._stale = True
            return self.current()

    def mark_stale(self) -> None:
        with self.lock:
            self._stale = True

    def forget(self) -> None:
        with self.lock:
            self._table = self._replacement = None

    def rows(self, table: Any, read: Callable[[], Any]) -> Any:
        """The table's rows (Arrow): those of this process's last overwrite while the table is still
        at that commit (the same table, the same version), else `read()` from the store."""
        if self._written is not None and self._written[0] == _identity(table):
            return self._written[1]
        return read()

    def overwritten(self, table: Any, rows: Any) -> None:
        """`table` was just overwritten with `rows` by this process (delta-rs advanced it in place)."""
        self._written = (_identity(table), rows)

    def after_commit(self) -> None:
        """A checkpoint at each interval of the table's versions, written off the batch's path
        (delta-rs's commits only: Spark checkpoints its own, and a table delta-rs cannot write may
        hold what its checkpoint would lose, such as domain metadata)."""
        version = self._table.version()
        if version % self._interval == 0 and delta_rs_writes(self._table):
            self.upkeep.submit("checkpoint", self.path, self._checkpoint)

    def _checkpoint(self) -> None:
        clean = time.monotonic() - self._cleaned_at >= self._cleanup_every
        if clean:
            self._cleaned_at = time.monotonic()
        fresh = checkpoint(self.path, clean)
        if fresh is not None:
            with self.lock:
                if self._table is not None and fresh.version() >= self._opened_at:
                    self._replacement = fresh

    def commit(self, operation: Callable[[Any], None], mark: BatchMark, guard: Callable[[], object] | None) -> None:
        """Run `operation` (one delta-rs commit of `mark`'s batch) on the kept table. A commit that
        lost a race is tried again on the table's new version; one found in the log already (its
        answer lost) counts as made. `guard` (the stream's proof it still holds the lake) runs right
        before each try, and its proof is asked again once the try has ended (runtime.lease)."""
        failure: BaseException | None = None
        for attempt in range(ATTEMPTS):
            with self.lock:
                table = self.current()
                proof = prove(guard)
                try:
                    operation(table)
                except Exception as exc:  # noqa: BLE001 - sorted below: raised, or tried again
                    failure = _classify(self.path, exc)
                else:
                    self.after_commit()
                    proof.still_held()  # LeaseLost: the try outlived the lease
                    return
                try:
                    if _already_marked(self.refresh(), mark):
                        return  # the store took it, the answer was lost
                except Exception:  # noqa: BLE001 - the table cannot be read now: try again, then give up
                    pass
            time.sleep(0.05 * 2**attempt)
        raise CommitRaced(
            f"{self.path}: batch {mark.batch_id} could not be committed after {ATTEMPTS} tries: {_first_line(failure)}"
        ) from failure


def _identity(table: Any) -> tuple[str, int]:
    """Which table at which commit: its Delta id (a table deleted and created again has another) and version."""
    return table.metadata().id, table.version()


def _classify(path: str, exc: Exception) -> Exception:
    """Raise what trying again cannot mend; return what it may (a lost race, a store's hiccup)."""
    text = str(exc)
    if "No space left on device" in text:
        raise DiskFull(path) from exc
    if "Unsupported table features" in text:
        raise NeedsSpark(f"{path}: {_first_line(exc)}") from exc
    if "Invalid data found" in text or "Check or Invariant" in text:
        raise ConstraintViolated(f"{path}: {_first_line(exc)}") from exc
    return exc


def _first_line(exc: BaseException | None) -> str:
    text = str(exc or "").strip()
    return (text.splitlines() or [type(exc).__name__])[0][:300]


class Upkeep:
    """One thread for the tables' upkeep (checkpoints, log clean-up, compaction), a job at a time:
    no two of them touch one table at once, and a batch waits for none of them."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._pending: dict[tuple[str, str], Future] = {}
        self._lock = threading.Lock()

    def submit(self, kind: str, path: str, job: Callable[..., Any], *args: Any) -> Future:
        with self._lock:
            queued = self._pending.get((kind, path))
            if queued is not None and not queued.done():
                return queued  # queued or running: a later interval asks again
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="delta-upkeep")
            self._pending[(kind, path)] = future = self._pool.submit(job, *args)
            return future

    def settle(self) -> None:
        """Wait for the jobs asked for so far (their errors stay with their futures)."""
        with self._lock:
            pending = list(self._pending.values())
            self._pending.clear()
        for future in pending:
            future.exception()


def checkpoint(path: str, clean: bool = True) -> Any:
    """Checkpoint the table at its latest version and, when `clean`, delete its log files past
    retention (delta-rs, as its own post-commit hook would); the table opened again from that
    checkpoint, or None when it failed (said, not raised: a failure costs only the shortcut)."""
    try:
        table = open_delta(path)
        if not delta_rs_writes(table):  # a user's feature since the commit: Spark's to checkpoint
            return None
        table.create_checkpoint()
        if clean:
            table.cleanup_metadata()
        drop_stale_checksum(path)
        return open_delta(path)
    except Exception as exc:  # noqa: BLE001 - see above
        print(
            f"warning: checkpoint of {path} failed (tried again at the next interval): {_first_line(exc)}",
            file=sys.stderr,
            flush=True,
        )
        return None


def drop_stale_checksum(path: str) -> None:
    """Remove Hadoop's checksum of `_last_checkpoint` after delta-rs (re)wrote the file: Spark writes
    `._last_checkpoint.crc` beside it, delta-rs writes the file alone, and with the checksum stale
    every fresh Spark read of the table failed to parse `_last_checkpoint`, slept and retried three
    times before listing the log. Without a checksum file Hadoop reads the file unchecked."""
    from market_spread.runtime.storage import S3Path, location

    place = location(path)
    if isinstance(place, S3Path):
        return  # S3A writes no checksum files
    (place / "_delta_log" / "._last_checkpoint.crc").unlink(missing_ok=True)

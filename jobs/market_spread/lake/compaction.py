"""Small-file compaction inside the stream: the append-only tables' files are bin-packed with
delta-rs every `every` commits to a table, on the upkeep thread (lake.lake_tables), so that no
batch waits for it (one did, as the last partly filled file grew; measured: docs/performance.md,
row 'compaction on the background thread').

Why: every micro-batch adds one small file to each table it appends to (quotes, alerts,
batch_metrics, quarantine), and `maintain` (the maintenance DAG, daily by default, with the stream
stopped) was the only thing that compacted them: at one batch a second, 86,400 files a table a day.
Each commit, checkpoint and re-opening of a table handles every file's entry, so the batch slowed
with the file count even with the log bounded (measured: docs/performance.md, row 'the stream
compacts its append-only tables').

A compaction is a delta-rs commit like the driver's others (lake.commits): it holds its table's
lock until its commit is made, so the driver's next append to that table comes after it, and
delta-rs checks it against any other writer's commit. A compaction commit
changes no row (`dataChange` false), keeps the files' statistics (so `LakeTables.marks` reads the
same last batch) and carries the tag of the table's last batch. A kill during it leaves at most
unreferenced files for VACUUM. Readers of older versions keep working until `maintain`'s VACUUM
deletes the replaced files (`--retain-hours`, 7 days by default).

`MARKET_SPREAD_COMPACT_EVERY=N` sets the period in commits (default 100); 0 turns it off.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from market_spread.lake import tables as lake_mod
from market_spread.lake.lake_tables import LakeTables
from market_spread.runtime import settings

# Files below this are bin-packed into files of about this size. It also bounds the work of one
# compaction: the last, partly filled file is read again with the new small ones, which keeps a
# compaction short (measured: docs/performance.md, row 'the stream compacts its append-only
# tables').
TARGET_BYTES = 8 << 20
# Tables that only ever receive appends (declared `compacted`): compaction cannot conflict with
# anything in them.
APPEND_ONLY = tuple(name for name, table in lake_mod.DECLARED.items() if table.compacted)


def every_from_env() -> int:
    """Commits to a table between two compactions (MARKET_SPREAD_COMPACT_EVERY, default 100; 0: off)."""
    return settings.value("MARKET_SPREAD_COMPACT_EVERY")  # SettingError unless a whole number >= 0


@dataclass
class Compaction:
    table: str
    files_removed: int
    files_added: int
    ms: int

    def __str__(self) -> str:  # in the stream's progress line
        return f"compacted {self.table}: {self.files_removed} files into {self.files_added} ({self.ms} ms)"


@dataclass
class Compactor:
    """Counts the commits to each append-only table of one lake and compacts a table once it has
    had `every` of them (at most one table a batch, so that no batch pays for all four)."""

    tables: LakeTables
    every: int = field(default_factory=every_from_env)
    # Per table, small files added since its last compaction; read from the lake at first use, so a
    # stream that restarts often still compacts.
    pending: dict[str, int] | None = None
    # The compaction on the upkeep thread: its table and future (LakeTables.compact).
    running: tuple[str, Future] | None = None

    def enabled(self) -> bool:
        return self.every > 0

    def _start(self) -> dict[str, int]:
        pending = {}
        for table in APPEND_ONLY:
            path = self.tables.path(table)
            pending[table] = small_files(self.tables.read(table)) if lake_mod.is_delta_table(path) else 0
        return pending

    def wrote(self, tables: list[str]) -> None:
        """The batch committed to these tables."""
        if not self.enabled():
            return
        if self.pending is None:
            self.pending = self._start()  # already counts this batch's files
            return
        for table in tables:
            if table in self.pending:
                self.pending[table] += 1

    def due(self) -> str | None:
        """The table to compact after this batch, if any: the one with the most small files."""
        pending = self.pending
        if not self.enabled() or not pending:
            return None
        table = max(pending, key=lambda t: pending[t])
        return table if pending[table] >= self.every else None

    def run(self, committed: dict[str, int], guard: Callable[[], object] | None = None) -> Compaction | None:
        """Start compacting the table that is due on the background thread, tagging the commit
        with its last batch (`committed`), unless a compaction is still running; `guard` runs
        before its commit (LakeTables.compact). Returns the compaction that has finished since the
        last call, if any (raises its error, if it failed)."""
        finished = self.finished(wait=False)
        table = self.due() if self.running is None else None
        if table is not None:
            assert self.pending is not None  # due() names a pending table
            self.pending[table] = 0
            self.running = (table, self.tables.compact(table, committed.get(table, -1), TARGET_BYTES, guard))
        return finished

    def finished(self, wait: bool) -> Compaction | None:
        """The compaction started last, once it has finished (`wait`: waiting for it), else None."""
        if self.running is None or not (wait or self.running[1].done()):
            return None
        (table, future), self.running = self.running, None
        metrics, ms = future.result()
        return Compaction(table, int(metrics.get("numFilesRemoved", 0)), int(metrics.get("numFilesAdded", 0)), ms)


def small_files(table) -> int:
    """Data files of the delta-rs table `table` smaller than the compaction's target."""
    import pyarrow as pa

    sizes = pa.table(table.get_add_actions(flatten=True))["size_bytes"].to_pylist()
    return sum(1 for s in sizes if s is not None and s < TARGET_BYTES)


def data_files(path: str) -> int:
    """Data files in the table's current version (for tests and the bench)."""
    from market_spread.runtime.storage import open_delta

    return len(open_delta(path).file_uris())

"""symbol_state written behind the checks (contract 4): it may trail the state the checks use by at
most 10 micro-batches or 5 seconds. Each batch stages its newest quote per symbol here; the staged
rows are committed in one upsert (lake.state.merge_state, marked with the newest staged batch) once
`trail_batches` batches are staged or the oldest has waited FLUSH_AFTER_S, from the batch that finds
it due (beside its other writes) or, when no batch comes, from a thread of its own.

Why: the upsert rewrites the table's files (or MERGEs into them) whatever the batch changed, so its
cost followed the symbol universe, not the input (measured: docs/performance.md, row '`symbol_state`
written every 10 batches'). The checks stay exact: the driver's copy (lake.state_mirror) moves on
with every batch, and reads of the table add the staged rows. Staged rows lost with the process are
the quote history's rows after the table's mark: `catch_up` stages them again at the next start.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from market_spread.lake import tables as lake_mod
from market_spread.lake.lake_tables import LakeTables
from market_spread.lake.state import NEWEST_COLUMNS, STATE_QUOTE_COLUMNS, merge_state, newest_rows, upserted

TRAIL_SECONDS = 5.0  # contract 4's bound on how far symbol_state trails the checks
FLUSH_AFTER_S = 4.0  # the oldest staged batch's wait before its commit starts: a second for the commit
IDLE_EVERY_S = 0.5  # how often the idle thread looks

# A staged row: a symbol's newest quote with its reject flag and the batch it came in.
STAGED = pa.schema(
    [lake_mod.arrow_schema("symbol_state").field(c).with_nullable(True) for c in (*NEWEST_COLUMNS, "batch_id")]
)


def merge_into(older: pa.Table | None, newer: pa.Table) -> pa.Table:
    """`newer` staged over `older` (both one row per symbol): a symbol moves only to a higher quote
    key, as the table's upsert does (an exact tie keeps the older row)."""
    return newer if older is None else upserted(older, newer)


class StateWrites:
    """The rows staged for symbol_state and their commit. `trail_batches` 1 commits every batch."""

    def __init__(self, tables: LakeTables, trail_batches: int, guard: Callable[[], object] | None = None) -> None:
        self.tables, self.trail_batches, self.guard = tables, trail_batches, guard
        self._lock = threading.Lock()  # the staged rows
        self._one_flush = threading.Lock()  # one commit at a time
        # Each staged batch's rows (NEWEST_COLUMNS and batch_id, one row per symbol), oldest first:
        # merged only when read or committed, so that staging a batch costs nothing of the others.
        self._staged: list[pa.Table] = []
        self._in_flight: pa.Table | None = None  # being committed: still read until the commit is in
        self._first: int | None = None  # the oldest staged batch (None: nothing staged)
        self._last, self._since = -1, 0.0  # the newest staged batch; when the oldest was staged
        self.written = -1  # the newest batch the table holds (its mark), as this process knows it
        self._idle: threading.Thread | None = None
        self._stop = threading.Event()
        self._warned = False

    def stage(self, newest: pa.Table, batch_id: int, first: int | None = None) -> None:
        """Stage a batch's newest quote per symbol (NEWEST_COLUMNS; a `batch_id` column kept if given:
        rows of batches `first` to `batch_id`)."""
        rows = newest.select(list(NEWEST_COLUMNS))
        ids = newest["batch_id"] if "batch_id" in newest.column_names else pa.array([batch_id] * len(rows), pa.int64())
        rows = rows.append_column("batch_id", pc.cast(ids, pa.int64())).cast(STAGED)
        with self._lock:
            self._staged.append(rows)
            if self._first is None:
                self._first, self._since = batch_id if first is None else first, time.monotonic()
            self._last = max(self._last, batch_id)
        if self._idle is None and self.trail_batches > 1:
            self._idle = threading.Thread(target=self._idle_loop, name="state-writes", daemon=True)
            self._idle.start()

    def due(self, batch_id: int | None = None) -> bool:
        """Whether what is staged must be committed now: `trail_batches` batches since the oldest
        staged one, counting batch `batch_id` (the one running), or FLUSH_AFTER_S since it was staged."""
        with self._lock:
            if self._first is None:
                return False
            behind = 0 if batch_id is None else batch_id - self._first + 1
            return behind >= self.trail_batches or time.monotonic() - self._since >= FLUSH_AFTER_S

    def current_through(self, batch_id: int) -> int | None:
        """Up to which batch the table is current while batch `batch_id` runs (None: none yet)."""
        with self._lock:
            current = self.written if self._first is not None or self._in_flight is not None else batch_id
        return current if current >= 0 else None

    def flush(self) -> None:
        """Commit what is staged in one upsert marked with its newest batch; on failure the rows stay
        staged (under any staged since) and the error is raised."""
        with self._one_flush:
            with self._lock:
                rows, last, first, since = _merged(self._staged), self._last, self._first, self._since
                self._staged, self._first, self._in_flight = [], None, rows
            if rows is None:
                return
            try:
                merge_state(self.tables, rows, last, self.guard)
            except BaseException:
                with self._lock:
                    self._staged.insert(0, rows)
                    self._first, self._since = first, since
                raise
            finally:
                with self._lock:
                    self._in_flight = None
            self.written = max(self.written, last)

    def overlay(self) -> pa.Table | None:
        """The rows staged or being committed (STATE_QUOTE_COLUMNS), to lay over a read of the table.
        Taken before the read: a commit that lands in between is then in the table."""
        with self._lock:
            self._staged = [_merged(self._staged)] if len(self._staged) > 1 else self._staged
            parts = [t for t in (self._in_flight, *self._staged) if t is not None]
        rows = _merged(parts)
        return None if rows is None else rows.select(list(STATE_QUOTE_COLUMNS))

    def catch_up(self, committed: dict[str, int]) -> None:
        """At a start (or after a failed batch): stage the newest quote per symbol of the history rows
        committed after the table's mark (`committed`: table -> the stream's last batch there)."""
        mark, history = committed.get("symbol_state", -1), committed.get("quotes", -1)
        self.written = max(self.written, mark)
        if history <= mark:
            return
        names = ", ".join((*NEWEST_COLUMNS, "batch_id"))
        where = f"batch_id > {mark} AND batch_id <= {history}"
        rows = self.tables.query("quotes", f"SELECT {names} FROM {{t}} WHERE {where}").cast(STAGED)
        if rows.num_rows:
            self.stage(newest_rows(rows), history, first=mark + 1)

    def close(self) -> None:
        """At the stream's end: stop the idle thread and commit what is staged (said, not raised, when
        it fails: the next start stages it again from the history)."""
        self._stop.set()
        try:
            self.flush()
        except Exception as exc:  # noqa: BLE001 - see above
            _warn(f"symbol_state was left at batch {self.written} ({_first_line(exc)}); the next start writes the rest")

    def _idle_loop(self) -> None:
        while not self._stop.wait(IDLE_EVERY_S):
            if not self.due():
                continue
            try:
                self.flush()
                self._warned = False
            except Exception as exc:  # noqa: BLE001 - the next batch's commit tries again and raises
                if not self._warned:
                    self._warned = True
                    _warn(f"symbol_state could not be written between batches ({_first_line(exc)}); tried again")


def _merged(parts: list[pa.Table]) -> pa.Table | None:
    """Staged batches' rows (oldest first) as one row per symbol: the highest quote key, an exact tie
    kept by the older row (the upsert's strict `>`): newest first into a stable sort's last-wins."""
    if len(parts) <= 1:
        return parts[0] if parts else None
    return newest_rows(pa.concat_tables(parts[::-1]))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines() or [type(exc).__name__])[0][:300]


def _warn(text: str) -> None:
    print(f"warning: {text}", file=sys.stderr, flush=True)

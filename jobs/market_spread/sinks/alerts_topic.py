"""`stream --alerts-topic`: every alert row the stream commits, published to a Kafka topic exactly
once for `read_committed` consumers (contract 4b).

An outbox: the alerts table is the truth and the publisher follows it by `batch_id`. A thread of its
own, woken after each batch, reads the rows past the position the topic holds (the alerts of the
batches after the last one published) and publishes them, a batch or several per Kafka transaction
that also commits the new position (sinks.topic_position). After a kill -9, the next start fences
the dead producer, reads the position back from Kafka and publishes what follows it: nothing is
skipped or repeated. A broker outage never holds up a batch: the thread retries, the lag shows in
`status()` (metrics, Stream page), and publishing catches up once the broker answers."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from market_spread.lake import tables as lake_mod
from market_spread.lake.lake_tables import LakeTables
from market_spread.runtime import settings
from market_spread.sinks.alert_records import records, transactional_id
from market_spread.sinks.topic_position import NONE_PUBLISHED, TopicTransactions
from market_spread.sinks.topic_settings import AlertsTopic

MAX_TRANSACTION_ROWS = 10_000  # a catch-up is cut at batch boundaries into transactions of about this many rows
RETRY_SECONDS = 1.0  # between two tries while the broker does not answer
IDLE_SECONDS = 5.0  # the thread looks at the clock this often when no batch wakes it
COLUMNS = lake_mod.arrow_schema("alerts").names


class AlertsPublisher(threading.Thread):
    """See the module docstring: `committed(result)` after each batch, `status()` at any time,
    `close(drain_seconds)` at the stream's end."""

    def __init__(self, target: AlertsTopic, lake: Any, spark: Any = None) -> None:
        super().__init__(name="market-spread-alerts-topic", daemon=True)
        self.target = target
        self.tables = LakeTables(lake, spark=spark)
        self.tx: TopicTransactions | None = None
        self.position: int | None = None  # the last batch published (None: not read from Kafka yet)
        self.unpublished: int | None = None  # alert rows past the position (None: not known yet)
        self.published = 0  # records published by this process
        self.problem: str | None = None  # why publishing waits, while it does
        self._wake, self._stopping = threading.Event(), threading.Event()
        self._dirty = True  # rows may wait in the table past the position
        self._counted = False  # the lag counted since the last batch (while the broker is away)
        self._deadline = float("inf")

    # -- the stream's side ------------------------------------------------------------------------
    def committed(self, result: Any) -> None:
        """A batch's commits are in: wake the thread if its alerts (or a replay's) may wait."""
        if result.alerts or "alerts" in result.skipped:
            self._dirty, self._counted = True, False
            self._wake.set()

    def status(self) -> dict[str, Any]:
        return {
            "topic": self.target.topic,
            "servers": self.target.bootstrap_servers,
            "published_through": self.position,
            "unpublished": self.unpublished,
            "published": self.published,
            "problem": self.problem,
        }

    def before(self, on_batch: Callable[[Any], None]) -> Callable[[Any], None]:
        """The stream's batch callback with this publisher told of each batch first."""

        def both(result: Any) -> None:
            self.committed(result)
            on_batch(result)

        return both

    def finish(self) -> None:
        """At the stream's end: publish what waits for up to MARKET_SPREAD_ALERTS_DRAIN_SECONDS,
        then say what could not be (the next start publishes it)."""
        left = self.close(settings.value("MARKET_SPREAD_ALERTS_DRAIN_SECONDS"))
        if left:
            self._say(
                f"warning: {left} alert row(s) not yet published to {self.target.topic} "
                f"({self.problem or 'out of time'}); the next start publishes them"
            )

    def close(self, drain_seconds: float) -> int | None:
        """Publish what waits for up to `drain_seconds`, then stop; the rows still unpublished."""
        self._deadline = time.monotonic() + drain_seconds
        self._stopping.set()
        self._wake.set()
        if self.ident is not None:  # started (a stream that failed to start never started it)
            self.join(drain_seconds + 15.0)  # a Kafka call in flight ends within its own timeout
        if self.tx is not None:
            self.tx.reset()
        return self.unpublished

    # -- the thread -------------------------------------------------------------------------------
    def run(self) -> None:
        pause = 0.0
        while True:
            self._wake.wait(pause)
            self._wake.clear()
            if self._stopping.is_set() and (self._caught_up() or time.monotonic() >= self._deadline):
                return
            pause = IDLE_SECONDS if self._cycle() else RETRY_SECONDS

    def _caught_up(self) -> bool:
        return not self._dirty and self.problem is None and self.unpublished == 0

    def _cycle(self) -> bool:
        """One look: publish what waits. False when something failed (said once; tried again)."""
        try:
            if (self.tx is None or not self.tx.open) and not self._start():
                return True  # no alerts table yet: the stream's first start creates it
            if self._dirty:
                self._dirty = False
                self._publish_waiting()
            elif self.tx is not None and self.position is not None and self.tx.due_refresh():
                self._publish(None, self.position)  # the same position again: Kafka keeps it (topic_position)
        except Exception as exc:  # noqa: BLE001 - publishing waits and retries; the stream goes on
            self._dirty = True
            self._waiting(exc)
            self._count_lag()
            return False
        if self.problem is not None:
            self._say(f"publishing alerts to {self.target.topic} again, through batch {self.position}")
            self.problem = None
        return True

    def _start(self) -> bool:
        """Open the topic's transactions and read its position; False while the table is not there."""
        if self.tx is None:
            if not lake_mod.is_delta_table(self.tables.path("alerts")):
                return False
            table_id = self.tables.read("alerts").metadata().id
            self.tx = TopicTransactions(self.target.bootstrap_servers, self.target.topic, transactional_id(table_id))
        first = self.position is None
        self.position = self.tx.start()
        self._dirty = True
        if first:
            self._say(
                f"publishing alerts to {self.target.topic} at {self.target.bootstrap_servers} "
                f"(published so far: {'through batch ' + str(self.position) if self.position >= 0 else 'none'})"
            )
        return True

    def _publish_waiting(self) -> None:
        waiting = self._rows_after(self.position if self.position is not None else NONE_PUBLISHED)
        self.unpublished = waiting.num_rows
        for chunk, through in chunks(waiting):
            self._publish(chunk, through)

    def _publish(self, chunk: pa.Table | None, through: int) -> None:
        assert self.tx is not None  # opened by _start
        self.tx.publish(records(chunk) if chunk is not None else [], through)
        self.position = through
        if chunk is not None:
            self.published += chunk.num_rows
            self.unpublished = max(0, (self.unpublished or 0) - chunk.num_rows)

    def _count_lag(self) -> None:
        """While publishing waits: the rows past the last known position, once per new batch."""
        if self._counted or self.position is None:
            return
        try:
            self.unpublished = int(self._after(self.position, "count(*) AS n").column("n")[0].as_py())
            self._counted = True
        except Exception:  # noqa: BLE001,S110 - the count is for the metrics: tried again after the next batch
            pass

    def _rows_after(self, batch_id: int) -> pa.Table:
        """The alerts table's rows past `batch_id`, by batch."""
        return self._after(batch_id, ", ".join(COLUMNS), " ORDER BY batch_id")

    def _after(self, batch_id: int, select: str, order: str = "") -> pa.Table:
        """`select` over the alerts table's rows past `batch_id`, with every commit made before now."""
        self.tables.kept("alerts").refresh()
        return self.tables.query("alerts", f"SELECT {select} FROM {{t}} WHERE batch_id > {int(batch_id)}{order}")

    def _waiting(self, exc: BaseException) -> None:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        if self.problem is None:
            self._say(
                f"warning: alerts wait to be published to {self.target.topic} ({first}); the tables go on, "
                "publishing catches up once the broker answers"
            )
        self.problem = first

    @staticmethod
    def _say(line: str) -> None:
        print(f"market-spread stream: {line}", file=sys.stderr, flush=True)


def chunks(rows: pa.Table) -> list[tuple[pa.Table, int]]:
    """`rows` (sorted by batch_id) cut at batch boundaries into transactions of about
    MAX_TRANSACTION_ROWS rows, each with the last batch it holds."""
    if rows.num_rows == 0:
        return []
    ids = rows.column("batch_id").to_numpy()
    ends = [*(np.flatnonzero(np.diff(ids)) + 1).tolist(), len(ids)]  # where each batch's rows end
    cuts, start = [], 0
    for end in ends:
        if end == len(ids) or end - start >= MAX_TRANSACTION_ROWS:
            cuts.append((rows.slice(start, end - start), int(ids[end - 1])))
            start = end
    return cuts

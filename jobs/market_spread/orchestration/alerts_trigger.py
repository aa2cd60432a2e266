"""The watcher of the alerts table: an Airflow event trigger that announces new alerts (an `alerts`
asset event, so the quality DAG runs) when the stream commits rows to the table.

It runs in the triggerer, beside every other trigger, in one event loop: it reads only the Delta
table's commit log (`_delta_log/<version>.json`, small JSON files), in a worker thread, with the
standard library; no Spark, no Arrow. A commit counts when it adds data (an `add` action with
dataChange and rows); compaction (dataChange false), vacuum and empty commits do not.

Throttled, so quality checks do not run back to back: at most one event per `throttle_seconds`, and
none while a quality run is queued (that run has not started, so it reads these alerts anyway).
Airflow keeps one pending asset-triggered run per DAG (the asset queue collapses repeated events) and
the quality DAG has max_active_runs=1: at most one check runs and one more waits, whatever the rate.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from market_spread.runtime.storage import Location, location

COMMIT = re.compile(r"^(\d{20})\.json$")  # never the writers' temporary files
STATE_KEY = "alerts_version"  # the last commit seen, kept in Airflow's asset state store


def commit_versions(log: Location) -> list[int]:
    """The table's commit versions still in its log, oldest first; [] when there is no table."""
    try:
        names = [entry.name for entry in log.iterdir()]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(int(m.group(1)) for name in names if (m := COMMIT.match(name)))


def adds_rows(commit: Location) -> bool:
    """Whether the commit added data rows. An unreadable commit or one without statistics counts:
    one check too many is cheaper than an alert nobody checks."""
    try:
        lines = commit.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return False  # removed by log cleanup: long checked
    except OSError:
        return True
    for line in lines:
        try:
            add = json.loads(line).get("add") if line.strip() else None
        except ValueError:
            return True
        if not add or add.get("dataChange") is False:
            continue
        try:
            rows = json.loads(add["stats"])["numRecords"]
        except (KeyError, TypeError, ValueError):
            return True
        if rows > 0:
            return True
    return False


def scan(log: Location, after: int) -> tuple[int, bool]:
    """(the newest version, whether a commit after `after` added rows). Newest first, it stops at the
    first commit with rows: one JSON read per poll while the stream runs."""
    versions = commit_versions(log)
    newest = versions[-1] if versions else -1
    found = any(adds_rows(log / f"{v:020d}.json") for v in reversed(versions) if v > after)
    return newest, found


def queued_runs(dag_id: str) -> int:
    """Queued runs of `dag_id`, asked of the API server through the triggerer (blocking)."""
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    return RuntimeTaskInstance.get_dr_count(dag_id=dag_id, states=["queued"])


class NewAlertsTrigger(BaseEventTrigger):
    """Fires when rows were committed to the Delta table `table` since the last event, at most once
    per `throttle_seconds`, never while a run of `quality_dag_id` is queued."""

    def __init__(
        self,
        table: str,
        poll_seconds: float = 10.0,
        throttle_seconds: float = 120.0,
        quality_dag_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.poll_seconds = float(poll_seconds)
        self.throttle_seconds = float(throttle_seconds)
        self.quality_dag_id = quality_dag_id

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "table": self.table,
                "poll_seconds": self.poll_seconds,
                "throttle_seconds": self.throttle_seconds,
                "quality_dag_id": self.quality_dag_id,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        log = location(self.table) / "_delta_log"  # a local folder or an S3 prefix
        seen = await self._start_version(log)
        last_event: float | None = None
        waiting = False  # rows committed and not announced yet
        while True:
            newest, found = await asyncio.to_thread(scan, log, seen)
            if newest < seen:  # the table was recreated: all its commits are new
                newest, found = await asyncio.to_thread(scan, log, -1)
            if newest != seen:
                waiting = waiting or found
                seen = newest
                await self._remember(seen)
            throttled = last_event is not None and time.monotonic() - last_event < self.throttle_seconds
            if waiting and not throttled:
                waiting = False
                if await self._quality_run_queued():
                    self.log.info("new alerts up to version %s: a queued quality run will check them", seen)
                else:
                    last_event = time.monotonic()
                    yield TriggerEvent({"table": self.table, "alerts_version": seen})
            await asyncio.sleep(self.poll_seconds)

    async def _start_version(self, log: Location) -> int:
        """Where to start: the version seen before a restart of the triggerer (asset state store), else
        the table's newest (its history was checked by earlier runs or the time-based schedule)."""
        newest = (await asyncio.to_thread(commit_versions, log) or [-1])[-1]
        try:
            stored = await self.asset_state_store.aget(STATE_KEY) if self.asset_state_store else None
        except Exception as exc:  # noqa: BLE001 - no state store: start from the table as it is
            self.log.warning("could not read the alerts watcher's state: %s", exc)
            stored = None
        return stored if isinstance(stored, int) and stored <= newest else newest

    async def _remember(self, version: int) -> None:
        if self.asset_state_store is None:
            return
        try:
            await self.asset_state_store.aset(STATE_KEY, version)
        except Exception as exc:  # noqa: BLE001 - only a restart's starting point is lost
            self.log.warning("could not store the alerts watcher's state: %s", exc)

    async def _quality_run_queued(self) -> bool:
        if not self.quality_dag_id:
            return False
        try:
            return await asyncio.to_thread(queued_runs, self.quality_dag_id) > 0
        except Exception as exc:  # noqa: BLE001 - the API out of reach: announce, the DAG's limits still hold
            self.log.warning("could not count queued %s runs: %s", self.quality_dag_id, exc)
            return False

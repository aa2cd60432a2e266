"""The alerts watcher (orchestration/alerts_trigger.py) on a small Delta table written with delta-rs:
its async run() polls the commit log and fires when alert rows were committed, never for commits
without rows, at most once per throttle window, never while a quality run is queued. No Spark, no
live Airflow: the trigger runs in this test's event loop, as it would in the triggerer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from market_spread.orchestration import alerts_trigger
from market_spread.orchestration.alerts_trigger import NewAlertsTrigger

POLL = 0.05
SETTLE = 0.5  # several polls


def alerts(*batch_ids: int) -> pa.Table:
    return pa.table({"batch_id": pa.array(batch_ids, pa.int64()), "symbol": pa.array(["SYM"] * len(batch_ids))})


def append(table: Path, rows: pa.Table) -> Callable[[], None]:
    return lambda: write_deltalake(str(table), rows, mode="append")


def events_after_each(trigger: NewAlertsTrigger, *steps: Callable[[], None] | float) -> list[list[dict]]:
    """Run the trigger; after it has started, do each step (a function, or a pause of that many
    seconds) and then let it poll a few times. The events fired so far, after each step."""

    async def scenario() -> list[list[dict]]:
        events: list[dict] = []

        async def consume() -> None:
            async for event in trigger.run():
                events.append(event.payload)

        task = asyncio.create_task(consume())
        await asyncio.sleep(SETTLE)  # the trigger has read where the table starts
        seen = []
        for step in steps:
            await (asyncio.sleep(step) if isinstance(step, float) else asyncio.to_thread(step))
            await asyncio.sleep(SETTLE)
            seen.append(list(events))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return seen

    return asyncio.run(scenario())


def watcher(table: Path, throttle: float = 0.0) -> NewAlertsTrigger:
    return NewAlertsTrigger(
        table=str(table), poll_seconds=POLL, throttle_seconds=throttle, quality_dag_id="market_spread_quality"
    )


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "alerts"
    write_deltalake(str(path), alerts(1, 2))  # history: checked before the watcher started
    return path


@pytest.fixture(autouse=True)
def no_queued_run(monkeypatch) -> None:
    monkeypatch.setattr(alerts_trigger, "queued_runs", lambda dag_id: 0)


def test_new_alert_rows_fire_one_event(table: Path) -> None:
    at_start, after_append = events_after_each(watcher(table), lambda: None, append(table, alerts(3)))
    assert at_start == []  # the table's history is not announced again
    assert after_append == [{"table": str(table), "alerts_version": 1}]


def test_commits_without_alert_rows_fire_nothing(table: Path) -> None:
    write_deltalake(str(table), alerts(3), mode="append")  # two files, so compaction has work

    def compact() -> None:
        assert DeltaTable(str(table)).optimize.compact().get("numFilesRemoved") == 2

    empty, compacted = events_after_each(watcher(table), append(table, alerts()), compact)
    assert DeltaTable(str(table)).version() == 3  # both were real commits
    assert empty == [] and compacted == []


def test_at_most_one_event_per_throttle_window(table: Path) -> None:
    # A window long enough for the next two steps even on a busy machine, then a pause past it.
    steps = events_after_each(
        watcher(table, throttle=4.0), append(table, alerts(3)), append(table, alerts(4)), append(table, alerts(5)), 3.5
    )
    first, second, third, after_window = steps
    assert len(first) == 1
    assert second == first and third == first  # new alerts inside the window: no second event yet
    # Once the window has passed, the alerts committed meanwhile are announced, in one event.
    assert after_window == first + [{"table": str(table), "alerts_version": 3}]


def test_no_event_while_a_quality_run_is_queued(table: Path, monkeypatch) -> None:
    queued = {"market_spread_quality": 1}
    monkeypatch.setattr(alerts_trigger, "queued_runs", lambda dag_id: queued[dag_id])

    def run_started() -> None:
        queued["market_spread_quality"] = 0

    while_queued, started, new_alerts = events_after_each(
        watcher(table), append(table, alerts(3)), run_started, append(table, alerts(4))
    )
    # The queued run has not started: it checks those alerts, no event needed.
    assert while_queued == [] and started == []
    assert new_alerts == [{"table": str(table), "alerts_version": 2}]


def test_a_table_created_after_the_start_is_announced(tmp_path: Path) -> None:
    table = tmp_path / "alerts"
    (created,) = events_after_each(watcher(table), lambda: write_deltalake(str(table), alerts(1)))
    assert created == [{"table": str(table), "alerts_version": 0}]


class StateStore:
    """Airflow's asset state store as the triggerer gives it to a watcher (the async half)."""

    def __init__(self, **values: int) -> None:
        self.values = dict(values)

    async def aget(self, key: str, default=None):
        return self.values.get(key, default)

    async def aset(self, key: str, value) -> None:
        self.values[key] = value


def test_alerts_committed_while_the_triggerer_was_down_are_announced(table: Path) -> None:
    write_deltalake(str(table), alerts(3), mode="append")  # version 1, after the stored version 0
    trigger = watcher(table)
    trigger.asset_state_store = StateStore(alerts_version=0)
    (events,) = events_after_each(trigger, lambda: None)
    assert events == [{"table": str(table), "alerts_version": 1}]
    assert trigger.asset_state_store.values == {"alerts_version": 1}


def test_it_serializes_to_what_it_was_built_from(table: Path) -> None:
    classpath, kwargs = watcher(table, throttle=7.0).serialize()
    assert classpath == "market_spread.orchestration.alerts_trigger.NewAlertsTrigger"
    assert NewAlertsTrigger(**kwargs).serialize() == (classpath, kwargs)
    assert kwargs["throttle_seconds"] == 7.0 and kwargs["quality_dag_id"] == "market_spread_quality"

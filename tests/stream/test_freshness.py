"""A running stream sees every commit made before its batch (contract 5.8) and keeps running while
users change its tables (contract 4): late orders checked on the driver path against quotes
committed seconds before, on local disk and on S3; Change Data Feed and CHECK constraints turned on
from Spark mid-stream, and honoured by the commits after."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from market_spread.stream.query import started
from market_spread.stream.spec import StreamSpec
from tests.helpers.lake import rows
from tests.helpers.landing import land
from tests.helpers.records import order, quote

SYMBOLS = [f"S{k:02d}" for k in range(18)]
DAY = "2026-11-23T09:"


@contextmanager
def running(spark, landing, lake, symbols=SYMBOLS, placement="auto") -> Iterator[tuple[list, "object"]]:
    """A continuous stream with the defaults, in this process; yields (batch results, query)."""
    batches: list = []
    spec = StreamSpec(
        lake=lake, symbols=symbols, landing=landing, available_now=False, interval=0.0, placement=placement
    )
    with started(spark, spec, on_batch=batches.append) as run:
        try:
            yield batches, run.query
        finally:
            while run.busy.is_set():
                time.sleep(0.1)
            run.query.stop()


def wait_for(batches: list, query, done, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline and query.isActive:
        time.sleep(0.1)
    assert done(), f"not reached in {timeout}s: {[b.progress_line() for b in batches]}, {query.exception()}"


def land_and_wait(batches, query, landing, feed, lines) -> None:
    seen = sum(b.input_lines for b in batches)
    land(landing, feed, lines)
    wait_for(batches, query, lambda: sum(b.input_lines for b in batches) >= seen + len(lines))


def test_late_orders_are_checked_against_quotes_committed_a_moment_before(spark, place, placement):
    """Per symbol: narrow quotes at 09:01:40 and 09:03:20; a batch later an order at 09:02:30 (older
    than the state: checked against history); then quotes at 09:05:00 (wide) and 09:06:40 (narrow);
    two seconds later an order at 09:05:50, whose quote is the wide one, committed a moment before."""
    landing, lake = place / "landing", place / "lake"
    with running(spark, landing, lake, placement=placement) as (batches, query):
        land_and_wait(
            batches,
            query,
            landing,
            "quotes",
            [
                line
                for s in SYMBOLS
                for line in (quote(s, DAY + "01:40Z", "10.00", "10.01"), quote(s, DAY + "03:20Z", "10.00", "10.01"))
            ],
        )
        land_and_wait(batches, query, landing, "orders", [order(f"{s}-early", s, DAY + "02:30Z") for s in SYMBOLS])
        land_and_wait(
            batches,
            query,
            landing,
            "quotes",
            [
                line
                for s in SYMBOLS
                for line in (quote(s, DAY + "05:00Z", "10.00", "11.00"), quote(s, DAY + "06:40Z", "10.00", "10.01"))
            ],
        )
        time.sleep(2)
        land_and_wait(batches, query, landing, "orders", [order(f"{s}-late", s, DAY + "05:50Z") for s in SYMBOLS])
    assert {b.placement for b in batches} == {placement}, "clean batches run where the stream places them"
    assert [b.late_symbols for b in batches if b.orders] == [len(SYMBOLS)] * 2, "both order batches were late"
    alerts = rows(spark, lake, "alerts")
    assert sorted((a["order_id"], a["reason"], a["quote_time"].strftime("%H:%M:%S")) for a in alerts) == sorted(
        (f"{s}-late", "wide_spread", "09:05:00") for s in SYMBOLS
    )


def test_features_turned_on_mid_stream_keep_it_running_and_are_honoured(spark, tmp_path, capfd):
    """A user turns on Change Data Feed on symbol_state and alerts and adds a CHECK constraint to
    alerts from Spark while the stream runs: the stream's next commits lose their race, are made on
    the new versions, record change data; an order whose alert would break the constraint goes to
    quarantine with a reason naming it (contract 5.5), and the stream runs on."""
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    state, alerts = lake / "symbol_state", lake / "alerts"
    with running(spark, landing, lake) as (batches, query):
        land_and_wait(batches, query, landing, "quotes", [quote(s, DAY + "01:00Z", "10.00", "11.00") for s in SYMBOLS])
        land_and_wait(batches, query, landing, "orders", [order(f"{s}-1", s, DAY + "01:30Z") for s in SYMBOLS])
        for table in (state, alerts):
            spark.sql(f"ALTER TABLE delta.`{table}` SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')")
        spark.sql(f"ALTER TABLE delta.`{alerts}` ADD CONSTRAINT sane_qty CHECK (qty < 1000000)")
        from_version = {
            t: spark.sql(f"DESCRIBE HISTORY delta.`{t}` LIMIT 1").first()["version"] + 1 for t in (state, alerts)
        }
        land_and_wait(batches, query, landing, "quotes", [quote(s, DAY + "02:00Z", "10.00", "10.50") for s in SYMBOLS])
        land_and_wait(batches, query, landing, "orders", [order(f"{s}-2", s, DAY + "02:30Z") for s in SYMBOLS])
        assert query.isActive and query.exception() is None
        huge = order("huge", SYMBOLS[0], DAY + "02:40Z", qty="5000000")
        land_and_wait(batches, query, landing, "orders", [huge, order(f"{SYMBOLS[0]}-3", SYMBOLS[0], DAY + "02:45Z")])
        assert query.isActive and query.exception() is None
    assert [(q["raw"], q["reason"]) for q in rows(spark, lake, "quarantine")] == [
        (huge, "check_constraint:alerts.sane_qty")
    ]
    assert sorted(a["order_id"] for a in rows(spark, lake, "alerts")) == sorted(
        [f"{s}-1" for s in SYMBOLS] + [f"{s}-2" for s in SYMBOLS] + [f"{SYMBOLS[0]}-3"]
    ), "the rest of the batch is committed"
    changes = spark.sql(
        f"SELECT symbol, _change_type FROM table_changes_by_path('{state}', {from_version[state]})"
    ).collect()
    assert sorted((r.symbol, r._change_type) for r in changes) == sorted(
        (s, kind) for s in SYMBOLS for kind in ("update_preimage", "update_postimage")
    )
    inserted = spark.sql(
        f"SELECT order_id FROM table_changes_by_path('{alerts}', {from_version[alerts]}) WHERE _change_type = 'insert'"
    ).collect()
    assert sorted(r.order_id for r in inserted) == sorted([f"{s}-2" for s in SYMBOLS] + [f"{SYMBOLS[0]}-3"])


@pytest.fixture(autouse=True)
def _no_compaction(monkeypatch):
    """No compaction commit among the few commits these tests read change data from, and
    symbol_state committed in each batch (its change data then has an update for each batch's quote,
    not one for the batches staged together: lake.state_writes)."""
    monkeypatch.setenv("MARKET_SPREAD_COMPACT_EVERY", "0")
    monkeypatch.setenv("MARKET_SPREAD_STATE_TRAIL_BATCHES", "1")


def test_a_stream_started_by_its_caller_leaves_nothing_running_when_its_block_ends(spark, tmp_path):
    """`started` (the bench's and the tools' way to run a query they supervise) settles the processor
    as the `stream` command does: its reader (threads, a Kafka consumer) closed, its upkeep done.
    Without it the bench's later parts measured earlier streams' consumers as the idle stream's CPU."""
    from market_spread.stream.query import supervise

    landing, lake = tmp_path / "landing", tmp_path / "lake"
    land(landing, "quotes", [quote(s, DAY + "01:40Z", "10.00", "10.01") for s in SYMBOLS])
    land(landing, "orders", [order(f"{s}-1", s, DAY + "02:30Z") for s in SYMBOLS])
    spec = StreamSpec(lake=lake, symbols=SYMBOLS, landing=landing, available_now=True)
    batches: list = []
    with started(spark, spec, on_batch=batches.append) as run:
        supervise(run.query, run.busy, threading.Event())
    assert len(batches) == 1 and batches[0].orders == len(SYMBOLS), "a batch ran: it opened the processor's reader"
    assert run.processor.reader is None, "the reader was closed when the block ended"

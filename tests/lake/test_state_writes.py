"""symbol_state trailing the checks (contract 4, lake.state_writes): staged batches are committed in
one upsert once `trail_batches` are staged, marked with the newest; reads of the table add what is
staged; a failed commit keeps the rows staged; staged rows lost with the process are staged again
from the quote history at the next start."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal as D

import pyarrow as pa
import pytest

from market_spread.lake import state_writes
from market_spread.lake import tables as lake_mod
from market_spread.lake.lake_tables import LakeTables
from market_spread.lake.state_mirror import StateMirror
from market_spread.runtime.storage import open_delta, read_rows

T0 = datetime(2026, 11, 23, 14, 30, tzinfo=UTC)


def _newest(symbols: list[str], second: int, bid: str = "1.10") -> pa.Table:
    """One quote per symbol `second` seconds after T0 (a batch's newest quotes)."""
    n = len(symbols)
    return pa.table(
        {
            "symbol": symbols,
            "bid": pa.array([D(bid)] * n, pa.decimal128(18, 8)),
            "offer": pa.array([D("1.20")] * n, pa.decimal128(18, 8)),
            "quote_time": pa.array([T0 + timedelta(seconds=second)] * n, pa.timestamp("us", tz="UTC")),
            "seq": pa.array([None] * n, pa.int64()),
            "should_reject_trades": [True] * n,
        }
    )


def _history(newest: pa.Table, batch_id: int) -> pa.Table:
    n = newest.num_rows
    extra = {"batch_id": pa.array([batch_id] * n, pa.int64()), "quote_date": pa.array([date(2026, 11, 23)] * n)}
    for name, values in extra.items():
        newest = newest.append_column(name, values)
    return newest.select(lake_mod.arrow_schema("quotes").names).cast(lake_mod.arrow_schema("quotes"))


def _table(lake) -> dict:
    rows = read_rows(open_delta(lake_mod.table_path(lake, "symbol_state")))
    return {r["symbol"]: (r["bid"], r["batch_id"]) for r in rows.to_pylist()}


@pytest.fixture
def lake(tmp_path):
    for name in ("symbol_state", "quotes"):
        lake_mod.create_table(tmp_path / "lake", name)
    return tmp_path / "lake"


def test_staged_batches_are_committed_together_marked_with_the_newest(lake) -> None:
    tables = LakeTables(lake, "a-stream")
    writes = state_writes.StateWrites(tables, trail_batches=3)
    for batch in range(2):
        writes.stage(_newest(["A", f"S{batch}"], batch, bid=f"1.1{batch}"), batch)
        assert not writes.due(batch)
        assert writes.current_through(batch) is None, "nothing committed yet"
    assert _table(lake) == {}, "nothing committed before 3 batches are staged"
    mirror = StateMirror(tables, 0)  # no copy: the table is read, with what is staged laid over it
    mirror.writes = writes
    assert mirror.stored(["A", "S1"])["A"][0] == D("1.11")
    assert writes.due(2), "a third batch, even one without quotes, finds the first two due"
    writes.stage(_newest(["B"], 2), 2)
    writes.flush()
    assert _table(lake) == {"A": (D("1.11"), 1), "S0": (D("1.10"), 0), "S1": (D("1.11"), 1), "B": (D("1.10"), 2)}
    assert tables.marks(("symbol_state",)) == {"symbol_state": 2} and writes.written == 2
    assert writes.overlay() is None and not writes.due(3) and writes.current_through(3) == 3
    writes.close()


def test_the_oldest_staged_batch_waits_at_most_flush_after(lake, monkeypatch) -> None:
    writes = state_writes.StateWrites(LakeTables(lake, "a-stream"), trail_batches=10)
    writes.stage(_newest(["A"], 0), 0)
    assert not writes.due(0) and not writes.due()
    now = state_writes.time.monotonic()
    monkeypatch.setattr(state_writes.time, "monotonic", lambda: now + state_writes.FLUSH_AFTER_S)
    assert writes.due()
    assert state_writes.FLUSH_AFTER_S < state_writes.TRAIL_SECONDS == 5.0  # contract 4's bound
    writes.close()
    assert _table(lake) == {"A": (D("1.10"), 0)}, "the end of the stream commits what is staged"


def test_a_failed_commit_keeps_the_rows_staged_under_newer_ones(lake, monkeypatch) -> None:
    writes = state_writes.StateWrites(LakeTables(lake, "a-stream"), trail_batches=1)
    writes.stage(_newest(["A", "B"], 0), 0)

    def refused(*args, **kwargs):
        raise RuntimeError("store unavailable")

    real = state_writes.merge_state
    monkeypatch.setattr(state_writes, "merge_state", refused)
    with pytest.raises(RuntimeError):
        writes.flush()
    writes.stage(_newest(["A"], 5, bid="1.15"), 1)  # newer for A
    monkeypatch.setattr(state_writes, "merge_state", real)
    writes.flush()
    assert _table(lake) == {"A": (D("1.15"), 1), "B": (D("1.10"), 0)}
    assert writes.written == 1


def test_rows_staged_by_a_killed_process_come_back_from_the_quote_history(lake) -> None:
    tables = LakeTables(lake, "a-stream")
    first = state_writes.StateWrites(tables, trail_batches=10)
    for batch in range(4):
        newest = _newest(["A", f"S{batch}"], batch, bid=f"1.1{batch}")
        tables.append("quotes", _history(newest, batch), batch)
        first.stage(newest, batch)
        if batch == 1:
            first.flush()  # the table holds batches 0 and 1; 2 and 3 are staged when the process dies
    again = LakeTables(lake, "a-stream")  # a new process
    committed = again.marks(("symbol_state", "quotes"))
    assert committed == {"symbol_state": 1, "quotes": 3}
    writes = state_writes.StateWrites(again, trail_batches=10)
    writes.catch_up(committed)
    assert writes.written == 1
    staged = writes.overlay()
    assert staged is not None and sorted(staged["symbol"].to_pylist()) == ["A", "S2", "S3"]
    writes.close()
    assert _table(lake) == {
        "A": (D("1.13"), 3),
        "S0": (D("1.10"), 0),
        "S1": (D("1.11"), 1),
        "S2": (D("1.12"), 2),
        "S3": (D("1.13"), 3),
    }
    assert again.marks(("symbol_state",)) == {"symbol_state": 3}

"""Contract 5.6 on a local disk: a batch's writes are on stable storage before the batch returns to
Spark (runtime/durable.py). A power cut cannot be staged here, so the order is what is checked: the
sync runs after the batch's last commit (batch_metrics) and before Spark records the batch as done
(`commits/B`) and before the batch's on_batch."""

from __future__ import annotations

import json

from market_spread.lake import tables as lake_mod
from market_spread.lake.deltalog import latest_version
from market_spread.runtime import durable
from market_spread.stream.query import run_query
from market_spread.stream.spec import StreamSpec
from tests.helpers.landing import land
from tests.helpers.records import order, quote
from tests.helpers.symbols import SYMBOLS


def _metrics_batch(lake) -> int | None:
    """The batch whose batch_metrics row is the table's newest commit (None: no commit yet)."""
    path = lake_mod.table_path(lake, "batch_metrics")
    version = latest_version(path)
    if version is None:
        return None
    lines = (lake / "batch_metrics" / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    info = next(json.loads(line)["commitInfo"] for line in lines if '"commitInfo"' in line)
    return lake_mod.tagged_batch(info.get("userMetadata"))


def test_a_batch_is_flushed_after_its_last_commit_and_before_it_returns(spark, tmp_path, monkeypatch):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    checkpoint = lake / lake_mod.CHECKPOINT_SUBDIR
    for k in range(2):  # two batches, a file pair each
        land(landing, "quotes", [quote(SYMBOLS[0], 1 + k, "10.00", "10.01")], name=f"p{k}.jsonl")
        land(landing, "orders", [order(f"o{k}", SYMBOLS[0], 2 + k)], name=f"p{k}.jsonl")
    events: list[tuple] = []
    flush = durable.sync_file_system

    def recording(folder) -> None:
        done = sorted(int(p.name) for p in (checkpoint / "commits").glob("[0-9]*"))
        events.append(("sync", _metrics_batch(lake), done, (checkpoint / "offsets").exists()))
        flush(folder)

    fsync = durable.fsync_files

    def recording_input(paths) -> float:
        names = sorted("/".join(p.parts[-2:]) for p in paths if p.exists())
        events.append(("input", _metrics_batch(lake), names))
        return fsync(paths)

    monkeypatch.setattr(durable, "sync_file_system", recording)
    monkeypatch.setattr(durable, "fsync_files", recording_input)
    spec = StreamSpec(lake=lake, symbols=list(SYMBOLS), landing=landing, available_now=True, max_files_per_batch=1)
    assert run_query(spark, spec, on_batch=lambda result: events.append(("on_batch", result.batch_id))) == 0
    # At its start, the batch's offsets/B and source log entry fsynced, nothing of it committed
    # yet; after its batch_metrics commit one flush of the file system (the lake and its checkpoint
    # share one), before Spark wrote its commits/B, and before its on_batch.
    assert events == [
        ("input", None, ["0/0", "1/0", "offsets/0"]),
        ("sync", 0, [], True),
        ("on_batch", 0),
        ("input", 0, ["0/1", "1/1", "offsets/1"]),
        ("sync", 1, [0], True),
        ("on_batch", 1),
    ]
    assert sorted(int(p.name) for p in (checkpoint / "commits").glob("[0-9]*")) == [0, 1]


def test_the_flush_can_be_turned_off_to_measure_it(spark, tmp_path, monkeypatch):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    land(landing, "quotes", [quote(SYMBOLS[0], 1, "10.00", "10.01")])
    land(landing, "orders", [order("o1", SYMBOLS[0], 2)])
    calls: list[object] = []
    monkeypatch.setattr(durable, "sync_file_system", calls.append)
    monkeypatch.setenv("MARKET_SPREAD_SYNC", "off")
    spec = StreamSpec(lake=lake, symbols=list(SYMBOLS), landing=landing, available_now=True)
    assert run_query(spark, spec) == 0
    assert calls == [] and _metrics_batch(lake) == 0


def test_checkpoint_files_a_power_loss_left_empty_are_dropped_and_the_run_goes_on_exactly(spark, tmp_path, capsys):
    """What a power loss can leave (contract 5.6): the newest `commits/B` empty (batch B replayed, its
    commits skipped by their marks), and the next batch's `offsets/B+1` and source log entry empty
    (that batch committed nothing: its first flush never ran). The stream drops them, says so, and
    its tables equal those of an uninterrupted run."""
    from tests.helpers.lake import comparable_tables, metrics_totals, stream

    landing, lake = tmp_path / "landing", tmp_path / "lake"
    checkpoint = lake / lake_mod.CHECKPOINT_SUBDIR
    land(landing, "quotes", [quote(SYMBOLS[0], 1, "10.00", "11.00")], name="p0.jsonl")
    land(landing, "orders", [order("o0", SYMBOLS[0], 2)], name="p0.jsonl")
    spec = StreamSpec(lake=lake, symbols=list(SYMBOLS), landing=landing, available_now=True)
    assert run_query(spark, spec) == 0
    (checkpoint / "commits" / "0").write_bytes(b"")
    for torn in (checkpoint / "offsets" / "1", checkpoint / "sources" / "0" / "1"):
        torn.write_bytes(b"")
    land(landing, "orders", [order("o1", SYMBOLS[0], 3)], name="p1.jsonl")
    capsys.readouterr()
    assert run_query(spark, spec) == 0
    said = capsys.readouterr().out
    assert said.count("was left empty or cut short (a power loss?): dropped") == 3, said
    reference = tmp_path / "reference"
    assert stream(spark, landing, reference) == 0
    assert comparable_tables(spark, lake) == comparable_tables(spark, reference)
    totals = metrics_totals(spark, lake)
    assert {k: v for k, v in totals.items() if k != "batches"} == {
        "quotes": 1,
        "orders": 2,
        "alerts": 2,
        "quarantined": 0,
    }

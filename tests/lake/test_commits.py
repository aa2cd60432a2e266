"""lake.commits and lake.lake_tables: every commit of the stream is a delta-rs (or Spark) commit that
carries Delta's txn mark, honours the features users turn on mid-stream, survives a lost race and
a lost answer without doubling a row, and keeps its tables fresh and checkpointed."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal as D

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from market_spread.lake import tables as lake_mod
from market_spread.lake.commits import ConstraintViolated
from market_spread.lake.lake_tables import LakeTables
from market_spread.lake.spark_commits import append
from market_spread.lake.state import merge_state
from market_spread.runtime.storage import location

QUOTES = lake_mod.arrow_schema("quotes")
ALERTS = lake_mod.arrow_schema("alerts")
STREAM = "6f1c5e1a-stream"
# Sub-millisecond times and 18-digit decimals: statistics must bound them exactly, not round them in.
ROWS = [
    (
        "A",
        D("1234567890.12345678"),
        D("1234567890.12345679"),
        datetime(2026, 11, 26, 23, 59, 59, 999_501, UTC),
        1,
        0,
        False,
        date(2026, 11, 26),
    ),
    ("B", D("0.00000001"), D("0.00000002"), datetime(2026, 11, 27, 0, 0, 0, 1, UTC), None, 0, True, date(2026, 11, 27)),
    ("C", D("5.5"), D("6"), datetime(2026, 11, 27, 9, 30, 0, 123_456, UTC), 7, 0, False, date(2026, 11, 27)),
]


def quotes(rows: list[tuple], batch: int) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(QUOTES.names, (*r[:5], batch, *r[6:]))) for r in rows], schema=QUOTES)


def alerts(batch: int, qty: str = "100", n: int = 2) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "order_id": f"O-{batch}-{i}",
                "account": 7,
                "symbol": "A",
                "side": "BUY",
                "qty": D(qty),
                "price": D("1.5"),
                "reason": "no_market_data",
                "batch_id": batch,
            }
            for i in range(n)
        ],
        schema=ALERTS,
    )


@pytest.fixture
def lake(spark, tmp_path):
    lake_mod.ensure_tables(spark, tmp_path)
    tables = LakeTables(str(tmp_path), STREAM, spark)
    yield tables
    tables.forget()


def log_actions(path: str, version: int) -> list[dict]:
    text = DeltaTable(path).table_uri.removeprefix("file://") + f"/_delta_log/{version:020d}.json"
    with open(text, encoding="utf-8") as log:
        return [json.loads(line) for line in log if line.strip()]


def test_appends_read_back_exactly_and_their_statistics_skip_nothing_they_hold(spark, lake):
    path = lake.path("quotes")
    lake.append("quotes", quotes(ROWS, 1), 1)
    lake.append("quotes", quotes(ROWS[2:], 2), 2)
    frame = spark.read.format("delta").load(path)

    def micros(t: datetime) -> int:
        return (t - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)

    expected = sorted(
        [(*r[:3], micros(r[3]), r[4], b, *r[6:]) for b, r in [(1, r) for r in ROWS] + [(2, ROWS[2])]], key=str
    )
    columns = [f"unix_micros({c}) AS {c}" if c == "quote_time" else c for c in QUOTES.names]
    assert sorted((tuple(r) for r in frame.selectExpr(*columns).collect()), key=str) == expected
    assert sorted(DeltaTable(path).to_pyarrow_table().to_pylist(), key=str) == sorted(
        quotes(ROWS, 1).to_pylist() + quotes(ROWS[2:], 2).to_pylist(), key=str
    )
    # Each row found by an equality on its own exact values: the files' min/max hold them.
    for symbol, bid, offer, at, *_ in ROWS:
        hits = frame.where(f"quote_time = TIMESTAMP '{at.isoformat()}' AND bid = {bid} AND offer = {offer}").count()
        assert hits == (2 if symbol == "C" else 1), symbol
    assert {p.name for p in location(path).iterdir() if p.is_dir()} >= {
        "quote_date=2026-11-26",
        "quote_date=2026-11-27",
    }
    # delta-rs would write a decimal's bounds through a binary float, below the value: none are kept.
    stats = [json.loads(a["add"]["stats"]) for a in log_actions(path, DeltaTable(path).version()) if "add" in a]
    assert stats and all(set(s["maxValues"]) == {"symbol", "quote_time", "seq", "batch_id"} for s in stats), stats


def test_every_commit_carries_the_batchs_txn_mark_and_no_rows_make_no_commit(spark, lake):
    path = lake.path("alerts")
    before = DeltaTable(path).version()
    assert lake.append("alerts", alerts(3), 3) == 2
    actions = log_actions(path, before + 1)
    assert {"txn": {"appId": STREAM, "version": 3}} in [
        {k: {f: v[f] for f in ("appId", "version")}} for a in actions for k, v in a.items() if k == "txn"
    ]
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert lake_mod.tagged_batch(info["userMetadata"]) == 3
    assert lake.append("alerts", alerts(4).slice(0, 0), 4) == 0 and DeltaTable(path).version() == before + 1, (
        "no commit"
    )
    # Spark's commits carry the same mark, and Delta skips a batch the table already holds.
    rows = spark.createDataFrame(alerts(5))
    append(rows, path, lake.mark(5))
    append(rows, path, lake.mark(5))
    assert spark.read.format("delta").load(path).where("batch_id = 5").count() == 2, "the replayed write skipped"
    assert DeltaTable(path).transaction_version(STREAM) == 5
    fresh = LakeTables(lake.lake, STREAM)
    assert fresh.marks() == {"alerts": 5, "quotes": -1, "symbol_state": -1, "quarantine": -1, "batch_metrics": -1}
    assert LakeTables(lake.lake, "another-stream").marks()["alerts"] == 5, (
        "a lake written before the txn marks: by batch_id"
    )


def test_a_commit_that_lost_a_race_to_a_users_change_is_made_again_on_the_new_version(spark, lake):
    """A user turns on Change Data Feed from Spark between two batches: the stream's kept table does
    not know, its next commit loses the race (the metadata changed), and is made again on the new
    version, which records the change data of the rows it adds."""
    path = lake.path("alerts")
    lake.append("alerts", alerts(1), 1)
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')")
    enabled_at = DeltaTable(path).version()
    lake.append("alerts", alerts(2), 2)
    table = DeltaTable(path)
    assert table.version() == enabled_at + 1 and table.transaction_version(STREAM) == 2
    changes = spark.sql(
        f"SELECT order_id, _change_type FROM table_changes_by_path('{path}', {enabled_at + 1})"
    ).collect()
    assert sorted((r.order_id, r._change_type) for r in changes) == [("O-2-0", "insert"), ("O-2-1", "insert")]


@pytest.mark.parametrize("batch", [0, 2])
def test_a_commit_whose_answer_was_lost_counts_as_made_and_is_not_made_twice(lake, batch):
    """What a commit looks like to the stream when the store took it but the answer never came: the
    kept table does not know the version it made. Here a second kept table of the same stream,
    opened before the first one's commit, makes the same batch's commit: recognised by its txn
    mark as already made, not made again. Batch 0 too: its mark, 0, is a mark like any other."""
    path = lake.path("alerts")
    if batch:
        lake.append("alerts", alerts(batch - 1), batch - 1)
    unaware = LakeTables(lake.lake, STREAM)
    unaware.read("alerts")  # opened before the batch's commit
    lake.append("alerts", alerts(batch), batch)
    version = DeltaTable(path).version()
    unaware.append("alerts", alerts(batch), batch)
    assert DeltaTable(path).version() == version, "no second commit"
    assert DeltaTable(path).to_pyarrow_table()["order_id"].to_pylist().count(f"O-{batch}-0") == 1


def test_rows_that_break_a_check_constraint_fail_with_one_line_naming_it_and_commit_nothing(spark, lake):
    path = lake.path("alerts")
    spark.sql(f"ALTER TABLE delta.`{path}` ADD CONSTRAINT positive_qty CHECK (qty > 0)")
    spark.sql(f"ALTER TABLE delta.`{path}` ADD CONSTRAINT known_side CHECK (side IN ('BUY', 'SELL'))")
    lake.append("alerts", alerts(1), 1)  # rows that keep the rules pass
    version = DeltaTable(path).version()
    with pytest.raises(ConstraintViolated) as caught:
        lake.append("alerts", alerts(2, qty="-1"), 2)
    message = str(caught.value)
    assert "\n" not in message and "positive_qty (qty > 0)" in message and "known_side" not in message, message
    assert DeltaTable(path).version() == version and DeltaTable(path).transaction_version(STREAM) == 1


def test_a_feature_delta_rs_cannot_write_sends_that_tables_commits_through_spark(spark, lake, capsys):
    path = lake.path("alerts")
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    lake.append("alerts", alerts(1), 1)
    lake.append("alerts", alerts(2), 2)
    said = capsys.readouterr().err
    assert lake.route("alerts").writer == "delta-spark", said
    assert said.count("alerts: commits through delta-spark, reads through spark (its features typeWidening)") == 1, said
    assert spark.read.format("delta").load(path).count() == 4
    assert DeltaTable(path).transaction_version(STREAM) == 2, "Spark's commits carry the mark too"
    assert [h["engineInfo"] for h in DeltaTable(path).history(2)][0].startswith("Apache-Spark")


def test_the_state_merge_records_each_update_in_change_data_feed(spark, lake):
    path = lake.path("symbol_state")
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')")
    start = DeltaTable(path).version() + 1
    t0 = datetime(2026, 11, 23, 14, 30, tzinfo=UTC)
    for batch, bid in ((1, "1.10"), (2, "1.20"), (3, "1.00")):  # the third is older: no change
        newest = pa.table(
            {
                "symbol": ["A"],
                "bid": pa.array([D(bid)], pa.decimal128(18, 8)),
                "offer": pa.array([D("1.30")], pa.decimal128(18, 8)),
                "quote_time": pa.array([t0 + timedelta(seconds=batch % 3)], pa.timestamp("us", tz="UTC")),
                "seq": pa.array([None], pa.int64()),
                "should_reject_trades": [False],
            }
        )
        merge_state(lake, newest, batch)
    changes = spark.sql(
        f"SELECT bid, batch_id, _change_type FROM table_changes_by_path('{path}', {start}) "
        "ORDER BY _commit_version, _change_type"
    ).collect()
    assert [(str(r.bid), r.batch_id, r._change_type) for r in changes] == [
        ("1.10000000", 1, "insert"),
        ("1.20000000", 2, "update_postimage"),
        ("1.10000000", 1, "update_preimage"),
    ]
    assert DeltaTable(path).transaction_version(STREAM) == 2, "a MERGE that changes nothing commits nothing"


def test_checkpoints_are_written_in_the_background_and_the_kept_table_is_opened_again_from_them(tmp_path):
    """A checkpoint at each version the interval divides, written off the batch's path, with the log
    cleaned only then; the kept table is replaced by one opened from the new checkpoint."""
    import time

    from deltalake import write_deltalake

    path = str(tmp_path / "t")
    log = tmp_path / "t" / "_delta_log"
    rows = pa.table({"id": pa.array([1], pa.int64())})
    write_deltalake(
        path,
        rows,
        configuration={
            "delta.checkpointInterval": "5",
            "delta.logRetentionDuration": "interval 1 second",
            "delta.deletedFileRetentionDuration": "interval 1 second",
        },
    )
    tables = LakeTables(str(tmp_path))
    for batch in range(1, 5):
        tables.append("t", rows, batch)
    before = tables.read("t")
    tables.append("t", rows, 5)  # version 5
    tables.settle()
    assert (log / f"{5:020d}.checkpoint.parquet").exists()
    after = tables.read("t")
    assert after is not before and after.version() == 5
    time.sleep(1.5)  # versions 0-4 are now past the retention
    for batch in range(6, 10):
        tables.append("t", rows, batch)
        tables.settle()
        assert tables.read("t") is after, "no new checkpoint: the same object"
    assert (log / f"{0:020d}.json").exists(), "no cleanup between checkpoints"
    tables.append("t", rows, 10)  # version 10: checkpoint, then cleanup
    tables.settle()
    assert not (log / f"{0:020d}.json").exists() and (log / f"{10:020d}.checkpoint.parquet").exists()
    assert (
        tables.read("t").to_pyarrow_table().num_rows == 11
        and tables.read("t").transaction_version("market-spread") == 10
    )


def test_the_log_is_cleaned_at_most_once_a_sixth_of_its_retention_not_at_every_checkpoint(tmp_path):
    """Cleaning lists and stats the whole log, so a kept table cleans at its first checkpoint and then
    only once a sixth of `delta.logRetentionDuration` has passed (here 60 s: every 10 s); a
    checkpoint in between leaves expired commit files for the next clean-up."""
    import os
    import time

    from deltalake import write_deltalake

    path, log = str(tmp_path / "t"), tmp_path / "t" / "_delta_log"
    rows = pa.table({"id": pa.array([1], pa.int64())})
    settings = {"delta.checkpointInterval": "5", "delta.logRetentionDuration": "interval 60 seconds"}
    write_deltalake(path, rows, configuration=settings)

    def expire(versions: range) -> None:  # as if written an hour ago: past the retention
        past = time.time() - 3600
        for name in [f"{v:020d}.json" for v in versions] + [f"{versions.start:020d}.checkpoint.parquet"]:
            if (log / name).exists():
                os.utime(log / name, (past, past))

    tables = LakeTables(str(tmp_path))
    for batch in range(1, 5):
        tables.append("t", rows, batch)
    expire(range(0, 5))
    tables.append("t", rows, 5)  # version 5: the first checkpoint cleans
    tables.settle()
    assert not (log / f"{0:020d}.json").exists() and (log / f"{5:020d}.checkpoint.parquet").exists()
    for batch in range(6, 10):
        tables.append("t", rows, batch)
    expire(range(5, 10))
    tables.append("t", rows, 10)  # version 10, seconds later: a checkpoint, no clean-up yet
    tables.settle()
    assert (log / f"{10:020d}.checkpoint.parquet").exists()
    assert (log / f"{6:020d}.json").exists(), "cleaned again within a sixth of the retention"
    assert tables.read("t").to_pyarrow_table().num_rows == 11


def test_the_log_retention_is_read_as_delta_writes_it_and_an_unreadable_one_is_deltas_default(tmp_path):
    """It only paces the clean-up: a value this reader does not know is never a batch's error."""
    from deltalake import DeltaTable, write_deltalake

    from market_spread.lake.commits import log_retention_seconds

    rows = pa.table({"id": pa.array([1], pa.int64())})
    month = 30 * 86400
    for name, value, seconds in [
        ("a", "interval 2 hours", 7200),
        ("b", "interval 1 day 12 hours", 1.5 * 86400),
        ("c", "5 minutes", 300),
        ("d", None, month),
        ("e", "soon", month),
    ]:
        write_deltalake(
            str(tmp_path / name), rows, configuration={"delta.logRetentionDuration": value} if value else None
        )
        assert log_retention_seconds(DeltaTable(str(tmp_path / name))) == seconds, value


def test_a_driver_checkpoint_after_one_of_sparks_leaves_spark_a_readable_last_checkpoint(spark, tmp_path):
    """Spark writes `_last_checkpoint` with a Hadoop checksum beside it; delta-rs rewrites the file
    alone. A stale checksum made every fresh Spark read of such a table (a restarted stream, `sql`,
    maintenance) fail on `_last_checkpoint`, sleep and retry three times, then list the whole log."""
    path = str(tmp_path / "t")
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT) USING delta TBLPROPERTIES ('delta.checkpointInterval' = '2')")
    for n in (1, 2):  # Spark checkpoints at version 2
        spark.range(n, n + 1).write.format("delta").mode("append").save(path)
    log = tmp_path / "t" / "_delta_log"
    # Written here as Hadoop's checksummed local file system writes it (a lake written with checksums).
    jvm = spark.sparkContext._jvm
    checksummed = jvm.org.apache.hadoop.fs.LocalFileSystem()
    checksummed.initialize(jvm.java.net.URI("file:///"), spark.sparkContext._jsc.hadoopConfiguration())
    hadoop_path = jvm.org.apache.hadoop.fs.Path(str(log / "_last_checkpoint"))
    text = (log / "_last_checkpoint").read_text()
    out = checksummed.create(hadoop_path, True)
    out.write(bytearray(text.encode()))
    out.close()
    assert (log / "._last_checkpoint.crc").exists(), "Hadoop's checksum of _last_checkpoint"
    tables = LakeTables(str(tmp_path))
    for batch in (3, 4):  # version 4: the driver's checkpoint, by delta-rs
        tables.append("t", pa.table({"id": pa.array([batch], pa.int64())}), batch)
    tables.settle()
    assert json.loads((log / "_last_checkpoint").read_text())["version"] == 4
    stream = checksummed.open(hadoop_path)
    try:
        assert json.loads(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))["version"] == 4
    finally:
        stream.close()


def _state(symbol: str, bid: str) -> pa.Table:
    return pa.table(
        {
            "symbol": [symbol],
            "bid": pa.array([D(bid)], pa.decimal128(18, 8)),
            "offer": pa.array([D("9.99")], pa.decimal128(18, 8)),
            "quote_time": pa.array([datetime(2026, 11, 23, 14, 30, tzinfo=UTC)], pa.timestamp("us", tz="UTC")),
            "seq": pa.array([None], pa.int64()),
            "should_reject_trades": [False],
        }
    )


def test_the_state_written_by_the_stream_is_not_read_back_yet_another_writers_rows_are_kept(spark, lake, monkeypatch):
    """The state's overwrite starts from the rows the stream last wrote (no read of the store) only
    while the table is still at that commit: a row another writer added in between (here between
    two batches, which the stream's next commit meets and is rebased past or retried over) is in
    the state after every later batch."""
    from deltalake import write_deltalake

    path = lake.path("symbol_state")
    merge_state(lake, _state("A", "1.10"), 1)
    stored = DeltaTable(path).to_pyarrow_table()
    at = stored.schema.get_field_index("symbol")
    row = stored.set_column(at, stored.schema.field(at), pa.array(["Z"], stored.schema.field(at).type))
    write_deltalake(path, row, mode="append")  # another writer, not through the stream's kept table
    merge_state(lake, _state("B", "1.20"), 2)
    merge_state(lake, _state("C", "1.30"), 3)
    assert sorted(DeltaTable(path).to_pyarrow_table()["symbol"].to_pylist()) == ["A", "B", "C", "Z"]
    assert sorted(lake.read("symbol_state").to_pyarrow_table()["symbol"].to_pylist()) == ["A", "B", "C", "Z"]
    reads, read = [], DeltaTable.to_pyarrow_table
    monkeypatch.setattr(DeltaTable, "to_pyarrow_table", lambda self, *a, **k: reads.append(1) or read(self, *a, **k))
    merge_state(lake, _state("D", "1.40"), 4)  # nothing in between: the rows batch 3 wrote, not the store's
    assert reads == []
    assert sorted(DeltaTable(path).to_pyarrow_table()["symbol"].to_pylist()) == ["A", "B", "C", "D", "Z"]

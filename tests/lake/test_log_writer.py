"""lake.log_writer: the driver's own commits are ordinary Delta commits to Spark and delta-rs (rows,
partitions, statistics that skip correctly), never overwrite a commit someone else made, and keep
their version without reading the log."""
from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal as D

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from market_spread.lake import delta_rs, log_writer
from market_spread.lake import tables as lake_mod

QUOTES = delta_rs.arrow_schema(lake_mod.SCHEMAS["quotes"])
# Sub-millisecond times and 18-digit decimals: statistics must bound them exactly, not round them in.
ROWS = [
    ("A", D("1234567890.12345678"), D("1234567890.12345679"), datetime(2026, 11, 26, 23, 59, 59, 999_501, timezone.utc), 1, 0, False, date(2026, 11, 26)),
    ("B", D("0.00000001"), D("0.00000002"), datetime(2026, 11, 27, 0, 0, 0, 1, timezone.utc), None, 0, True, date(2026, 11, 27)),
    ("C", D("5.5"), D("6"), datetime(2026, 11, 27, 9, 30, 0, 123_456, timezone.utc), 7, 0, False, date(2026, 11, 27)),
]


def quotes(rows: list[tuple], batch: int) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(QUOTES.names, (*r[:5], batch, *r[6:]))) for r in rows], schema=QUOTES)


@pytest.fixture
def lake(spark, tmp_path):
    lake_mod.ensure_tables(spark, tmp_path)
    log_writer.forget()
    yield tmp_path
    log_writer.settle()
    delta_rs.forget_tables()


def test_appends_read_back_exactly_and_their_statistics_skip_nothing_they_hold(spark, lake):
    path = lake_mod.table_path(lake, "quotes")
    log_writer.append(path, quotes(ROWS, 1), 1)
    log_writer.append(path, quotes(ROWS[2:], 2), 2)
    frame = spark.read.format("delta").load(path)
    def micros(t: datetime) -> int:
        return (t - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1)

    expected = sorted([(*r[:3], micros(r[3]), r[4], b, *r[6:]) for b, r in [(1, r) for r in ROWS] + [(2, ROWS[2])]], key=str)
    columns = [f"unix_micros({c}) AS {c}" if c == "quote_time" else c for c in QUOTES.names]
    assert sorted((tuple(r) for r in frame.selectExpr(*columns).collect()), key=str) == expected
    assert sorted(DeltaTable(path).to_pyarrow_table().to_pylist(), key=str) == sorted(
        quotes(ROWS, 1).to_pylist() + quotes(ROWS[2:], 2).to_pylist(), key=str)
    # Each row found by an equality on its own exact values: the files' min/max hold them.
    for symbol, bid, offer, at, *_ in ROWS:
        hits = frame.where(f"quote_time = TIMESTAMP '{at.isoformat()}' AND bid = {bid} AND offer = {offer}").count()
        assert hits == (2 if symbol == "C" else 1), symbol
    assert {p.name for p in (lake / "quotes").iterdir() if p.is_dir()} >= {"quote_date=2026-11-26", "quote_date=2026-11-27"}


def test_file_statistics_bound_times_outwards_and_keep_decimals_exact():
    stats = json.loads(log_writer.file_stats(quotes(ROWS, 1).drop_columns(["quote_date"])))
    assert stats["numRecords"] == 3 and stats["nullCount"]["seq"] == 1
    assert stats["minValues"]["quote_time"] == "2026-11-26T23:59:59.999Z"
    assert stats["maxValues"]["quote_time"] == "2026-11-27T09:30:00.124Z"
    text = log_writer.file_stats(quotes(ROWS, 1).drop_columns(["quote_date"]))
    assert '"bid":1234567890.12345678' in text and '"bid":0.00000001' in text


def test_a_commit_made_by_someone_else_fails_the_append_and_is_left_as_it_was(lake):
    path = lake_mod.table_path(lake, "alerts")
    log_writer.append(path, pa.Table.from_pylist([], schema=delta_rs.arrow_schema(lake_mod.SCHEMAS["alerts"])), 1)
    version = DeltaTable(path).version()
    theirs = lake / "alerts" / "_delta_log" / f"{version + 1:020d}.json"
    theirs.write_text('{"commitInfo":{"operation":"WRITE","userMetadata":"theirs"}}\n')
    with pytest.raises(log_writer.CommitRaced):
        log_writer.append(path, pa.Table.from_pylist([], schema=delta_rs.arrow_schema(lake_mod.SCHEMAS["alerts"])), 2)
    assert "theirs" in theirs.read_text()
    assert not [p for p in theirs.parent.iterdir() if p.name.endswith(".tmp")], "no temporary file left"
    log_writer.forget(path)  # read again: on from their version
    log_writer.append(path, pa.Table.from_pylist([], schema=delta_rs.arrow_schema(lake_mod.SCHEMAS["alerts"])), 2)
    assert lake_mod.newest_tagged_batch(path) == 2 and DeltaTable(path).version() == version + 2


def test_the_state_commit_replaces_its_file_and_an_unchanged_state_commits_only_the_batch_mark(lake):
    path = lake_mod.table_path(lake, "symbol_state")
    schema = delta_rs.arrow_schema(lake_mod.SCHEMAS["symbol_state"])
    at = datetime(2026, 11, 27, 9, 30, tzinfo=timezone.utc)
    rows = pa.Table.from_pylist([{"symbol": "A", "bid": D("1"), "offer": D("2"), "quote_time": at, "seq": 1,
                                  "should_reject_trades": False, "updated_at": at, "batch_id": 1}], schema=schema)
    assert log_writer.current_rows(path, schema).num_rows == 0
    log_writer.replace(path, rows, 1, {"mergePredicate": "t.symbol = s.symbol"})
    log_writer.replace(path, None, 2, {"mergePredicate": "t.symbol = s.symbol"})
    table = DeltaTable(path)
    assert table.to_pyarrow_table().select(schema.names).cast(schema).to_pylist() == rows.to_pylist()
    assert lake_mod.newest_tagged_batch(path) == 2 and len(table.file_uris()) == 1
    assert log_writer.current_rows(path, schema).to_pylist() == rows.to_pylist(), "kept, not read again"


def test_a_null_in_a_not_null_column_is_refused_before_anything_is_written(lake):
    path = lake_mod.table_path(lake, "symbol_state")
    schema = delta_rs.arrow_schema(lake_mod.SCHEMAS["symbol_state"])
    log_writer.current_rows(path, schema)
    version = DeltaTable(path).version()
    with pytest.raises(ValueError, match="NOT NULL"):
        log_writer.replace(path, pa.Table.from_pylist([{"symbol": None, "batch_id": 1}], schema=schema), 1, {})
    assert DeltaTable(path).version() == version and not list((lake / "symbol_state").glob("*.parquet"))


def test_a_table_asking_for_newer_writer_features_is_refused_with_the_setting_that_avoids_it(spark, tmp_path):
    path = str(tmp_path / "cdf")
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT) USING delta TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')")
    log_writer.forget()
    with pytest.raises(RuntimeError, match="MARKET_SPREAD_DRIVER_COMMITS=off"):
        log_writer.append(path, pa.table({"id": pa.array([1], pa.int64())}), 1)
    assert DeltaTable(path).version() == 0


def test_statistics_leave_out_bounds_of_strings_that_are_not_utf8():
    """A quarantined raw line is kept byte for byte, UTF-8 or not (the hostile-input campaign)."""
    raw = pa.array([b"\xff\xfe", b"ok"], pa.binary()).view(pa.string())
    stats = json.loads(log_writer.file_stats(pa.table({"raw": raw, "n": pa.array([1, 2], pa.int64())})))
    assert "raw" not in stats["minValues"] and stats["maxValues"]["n"] == 2 and stats["nullCount"]["raw"] == 0

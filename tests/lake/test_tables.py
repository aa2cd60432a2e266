"""The lake's bookkeeping read from the Delta log without Spark: an older lake brought up to date at
start, and the last committed batch from file statistics (or from the rows when a file has none)."""
from __future__ import annotations

from deltalake import DeltaTable

from market_spread.lake import tables as lake_mod
from market_spread.lake.deltalog import max_from_stats, properties_and_columns


def test_an_older_lake_gets_the_properties_and_columns_of_this_release(spark, tmp_path):
    lake = tmp_path / "lake"
    metrics = lake_mod.table_path(lake, "batch_metrics")
    older_schema = lake_mod.SCHEMAS["batch_metrics"].replace(", spark_jobs BIGINT", "")
    spark.sql(f"CREATE TABLE delta.`{metrics}` ({older_schema}) USING DELTA "
              "TBLPROPERTIES ('delta.checkpointInterval' = '1')")
    props, columns = properties_and_columns(metrics)
    assert props.get("delta.checkpointInterval") == "1" and "spark_jobs" not in columns

    lake_mod.ensure_tables(spark, lake)

    props, columns = properties_and_columns(metrics)
    for key, value in lake_mod.table_properties("batch_metrics").items():
        assert props.get(key) == value, key
    # Checkpoints fall on different batches: no two tables the stream writes every batch share an interval.
    intervals = [properties_and_columns(lake_mod.table_path(lake, t))[0]["delta.checkpointInterval"]
                 for t in ("quotes", "alerts", "symbol_state", "batch_metrics")]
    assert len(set(intervals)) == 4 and all(10 <= int(i) <= 13 for i in intervals), intervals
    assert columns[-1] == "spark_jobs"
    assert sorted(lake_mod.existing_tables(lake)) == sorted(lake_mod.TABLES), "the missing tables were created"
    assert DeltaTable(lake_mod.table_path(lake, "quotes")).metadata().partition_columns == ["quote_date"]
    assert properties_and_columns(tmp_path / "not-a-table") is None


def test_last_batch_from_statistics_and_from_rows_when_a_file_has_none(spark, tmp_path):
    lake = tmp_path / "lake"
    lake_mod.ensure_tables(spark, lake)
    alerts, quotes = lake_mod.table_path(lake, "alerts"), lake_mod.table_path(lake, "quotes")
    assert max_from_stats(alerts, "batch_id") == (True, None), "an empty table: known, no batch"

    rows = lambda batches: spark.createDataFrame(  # noqa: E731
        [(b,) for b in batches], "batch_id BIGINT").selectExpr(
        *[("batch_id" if c == "batch_id" else f"CAST(NULL AS {t}) AS {c}")
          for c, t in (f.split(" ", 1) for f in lake_mod.SCHEMAS["alerts"].split(", "))])
    rows([4, 9, 2]).write.format("delta").mode("append").save(alerts)
    rows([6]).write.format("delta").mode("append").save(alerts)
    assert max_from_stats(alerts, "batch_id") == (True, 9)

    # A file written without statistics: only its rows can tell, and committed_batches reads them.
    quote_rows = spark.createDataFrame([(11,)], "batch_id BIGINT").selectExpr(
        "CAST('A' AS STRING) AS symbol", "CAST(1 AS DECIMAL(18,8)) AS bid", "CAST(2 AS DECIMAL(18,8)) AS offer",
        "TIMESTAMP'2026-11-23 14:30:00' AS quote_time", "CAST(1 AS BIGINT) AS seq", "batch_id",
        "false AS should_reject_trades", "DATE'2026-11-23' AS quote_date")
    spark.conf.set("spark.databricks.delta.stats.collect", "false")
    try:
        quote_rows.write.format("delta").mode("append").save(quotes)
    finally:
        spark.conf.unset("spark.databricks.delta.stats.collect")
    assert max_from_stats(quotes, "batch_id") == (False, None)
    assert lake_mod.committed_batches(spark, lake) == {
        "symbol_state": -1, "alerts": 9, "quotes": 11, "quarantine": -1, "batch_metrics": -1}


def test_an_open_table_follows_other_writers_and_a_table_made_again_is_opened_afresh(spark, tmp_path):
    """lake.delta_rs.open_table keeps a table open between batches: it must see Spark's commits, and
    a table removed and created again at the same path must not be served from the old state."""
    import shutil

    import pyarrow as pa

    from market_spread.lake import delta_rs

    path = str(tmp_path / "t")
    spark.range(3).write.format("delta").save(path)
    first = delta_rs.open_table(path)
    assert first.version() == 0
    spark.range(2).write.format("delta").mode("append").save(path)  # another writer: Spark
    assert delta_rs.open_table(path) is first and first.version() == 1
    delta_rs.append_table(path, pa.table({"id": pa.array([7], pa.int64())}), batch_id=5)
    assert delta_rs.open_table(path).version() == 2
    assert sorted(r["id"] for r in spark.read.format("delta").load(path).collect()) == [0, 0, 1, 1, 2, 7]

    shutil.rmtree(path)
    spark.range(1).write.format("delta").save(path)
    again = delta_rs.open_table(path)
    assert again is not first and again.version() == 0
    assert again.to_pyarrow_table().num_rows == 1
    delta_rs.forget_tables()
    assert delta_rs.open_table(path) is not again


def test_driver_commits_checkpoint_in_the_background_and_clean_the_log_only_then(tmp_path):
    """lake.log_writer: a checkpoint at each version the interval divides, written off the batch's
    path, with expired commit files going only then (cleaning lists the whole `_delta_log`); a
    kept-open table is opened again from each new checkpoint (lake.delta_rs.open_table)."""
    import time

    import pyarrow as pa
    from deltalake import write_deltalake

    from market_spread.lake import delta_rs, log_writer

    path = str(tmp_path / "t")
    log = tmp_path / "t" / "_delta_log"
    rows = pa.table({"id": pa.array([1], pa.int64())})
    write_deltalake(path, rows, configuration={"delta.checkpointInterval": "5",
                                               "delta.logRetentionDuration": "interval 1 second",
                                               "delta.deletedFileRetentionDuration": "interval 1 second"})
    for batch in range(1, 5):
        delta_rs.append_table(path, rows, batch)
    before = delta_rs.open_table(path)
    delta_rs.append_table(path, rows, 5)  # version 5
    log_writer.settle()
    assert (log / f"{5:020d}.checkpoint.parquet").exists()
    after = delta_rs.open_table(path)
    assert after is not before and after.version() == 5
    time.sleep(1.5)  # versions 0-4 are now past the retention
    for batch in range(6, 10):
        delta_rs.append_table(path, rows, batch)
        log_writer.settle()
        assert delta_rs.open_table(path) is after, "no new checkpoint: the same object"
    assert (log / f"{0:020d}.json").exists(), "no cleanup between checkpoints"
    delta_rs.append_table(path, rows, 10)  # version 10: checkpoint, then cleanup
    log_writer.settle()
    assert not (log / f"{0:020d}.json").exists() and (log / f"{10:020d}.checkpoint.parquet").exists()
    assert delta_rs.open_table(path).to_pyarrow_table().num_rows == 11
    delta_rs.forget_tables()


def test_a_driver_checkpoint_after_one_of_sparks_leaves_spark_a_readable_last_checkpoint(spark, tmp_path):
    """Spark writes `_last_checkpoint` with a Hadoop checksum beside it; delta-rs rewrites the file
    alone. A stale checksum made every fresh Spark read of such a table (a restarted stream, `sql`,
    maintenance) fail on `_last_checkpoint`, sleep and retry three times, then list the whole log
    (seen in the crash campaign's log on quotes and quarantine)."""
    import json

    import pyarrow as pa

    from market_spread.lake import delta_rs, log_writer

    path = str(tmp_path / "t")
    spark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT) USING delta TBLPROPERTIES ('delta.checkpointInterval' = '2')")
    for n in (1, 2):  # Spark checkpoints at version 2
        spark.range(n, n + 1).write.format("delta").mode("append").save(path)
    log = tmp_path / "t" / "_delta_log"
    # Sessions write no Hadoop checksums through FileContext by default (MARKET_SPREAD_LOCAL_CHECKSUMS): a lake
    # written with them (MARKET_SPREAD_LOCAL_CHECKSUMS, or before) has one: written here as Hadoop's
    # checksummed local file system writes it.
    jvm = spark.sparkContext._jvm
    checksummed = jvm.org.apache.hadoop.fs.LocalFileSystem()
    checksummed.initialize(jvm.java.net.URI("file:///"), spark.sparkContext._jsc.hadoopConfiguration())
    hadoop_path = jvm.org.apache.hadoop.fs.Path(str(log / "_last_checkpoint"))
    text = (log / "_last_checkpoint").read_text()
    out = checksummed.create(hadoop_path, True)
    out.write(bytearray(text.encode()))
    out.close()
    assert (log / "._last_checkpoint.crc").exists(), "Hadoop's checksum of _last_checkpoint"
    for batch in (3, 4):  # version 4: the driver's checkpoint, by delta-rs
        delta_rs.append_table(path, pa.table({"id": pa.array([batch], pa.int64())}), batch_id=batch)
    log_writer.settle()
    assert json.loads((log / "_last_checkpoint").read_text())["version"] == 4

    # What Spark's Delta does first when it opens the table afresh: read _last_checkpoint, here
    # through Hadoop's checksummed local file system (ChecksumException with a stale checksum).
    stream = checksummed.open(hadoop_path)
    try:
        assert json.loads(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))["version"] == 4
    finally:
        stream.close()
    delta_rs.forget_tables()

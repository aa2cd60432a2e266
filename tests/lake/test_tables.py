"""The lake's bookkeeping read from the Delta log without Spark: an older lake brought up to date at
start, and the last committed batch from file statistics (lakes written before the txn marks)."""

from __future__ import annotations

from deltalake import DeltaTable

from market_spread.lake import tables as lake_mod
from market_spread.lake.deltalog import max_from_stats, properties_and_columns


def test_an_older_lake_gets_the_properties_and_columns_of_this_release(spark, tmp_path):
    lake = tmp_path / "lake"
    metrics = lake_mod.table_path(lake, "batch_metrics")
    older_schema = lake_mod.SCHEMAS["batch_metrics"].replace(", spark_jobs BIGINT, placement STRING", "")
    spark.sql(
        f"CREATE TABLE delta.`{metrics}` ({older_schema}) USING DELTA TBLPROPERTIES ('delta.checkpointInterval' = '10', "
        "'delta.logRetentionDuration' = 'interval 30 minutes', 'delta.deletedFileRetentionDuration' = 'interval 30 minutes')"
    )
    props, columns = properties_and_columns(metrics)
    assert props.get("delta.checkpointInterval") == "10" and "spark_jobs" not in columns

    lake_mod.ensure_tables(spark, lake)

    props, columns = properties_and_columns(metrics)
    for key, value in lake_mod.table_properties("batch_metrics").items():
        assert props.get(key) == value, key
    # Checkpoints fall on different batches: no two tables the stream writes every batch share an interval.
    intervals = [
        properties_and_columns(lake_mod.table_path(lake, t))[0]["delta.checkpointInterval"]
        for t in ("quotes", "alerts", "symbol_state", "batch_metrics")
    ]
    assert len(set(intervals)) == 4 and all(10 <= int(i) <= 13 for i in intervals), intervals
    assert columns[-2:] == ["spark_jobs", "placement"]
    assert sorted(lake_mod.existing_tables(lake)) == sorted(lake_mod.TABLES), "the missing tables were created"
    assert DeltaTable(lake_mod.table_path(lake, "quotes")).metadata().partition_columns == ["quote_date"]
    assert properties_and_columns(tmp_path / "not-a-table") is None


def test_last_batch_from_statistics_and_unknown_when_a_file_has_none(spark, tmp_path):
    lake = tmp_path / "lake"
    lake_mod.ensure_tables(spark, lake)
    alerts, quotes = lake_mod.table_path(lake, "alerts"), lake_mod.table_path(lake, "quotes")
    assert max_from_stats(alerts, "batch_id") == (True, None), "an empty table: known, no batch"

    rows = lambda batches: spark.createDataFrame(  # noqa: E731
        [(b,) for b in batches], "batch_id BIGINT"
    ).selectExpr(
        *[
            ("batch_id" if c == "batch_id" else f"CAST(NULL AS {t}) AS {c}")
            for c, t in (f.split(" ", 1) for f in lake_mod.SCHEMAS["alerts"].split(", "))
        ]
    )
    rows([4, 9, 2]).write.format("delta").mode("append").save(alerts)
    rows([6]).write.format("delta").mode("append").save(alerts)
    assert max_from_stats(alerts, "batch_id") == (True, 9)

    # A file written without statistics: not known from them.
    quote_rows = spark.createDataFrame([(11,)], "batch_id BIGINT").selectExpr(
        "CAST('A' AS STRING) AS symbol",
        "CAST(1 AS DECIMAL(18,8)) AS bid",
        "CAST(2 AS DECIMAL(18,8)) AS offer",
        "TIMESTAMP'2026-11-23 14:30:00' AS quote_time",
        "CAST(1 AS BIGINT) AS seq",
        "batch_id",
        "false AS should_reject_trades",
        "DATE'2026-11-23' AS quote_date",
    )
    spark.conf.set("spark.databricks.delta.stats.collect", "false")
    try:
        quote_rows.write.format("delta").mode("append").save(quotes)
    finally:
        spark.conf.unset("spark.databricks.delta.stats.collect")
    assert max_from_stats(quotes, "batch_id") == (False, None)


def test_a_property_the_user_changed_is_kept_at_the_next_start(spark, tmp_path):
    """Contract 4: users own their tables. A longer log retention set from Spark survives the stream's
    next start; a value an earlier release wrote is brought up to date."""
    lake = tmp_path / "lake"
    lake_mod.ensure_tables(spark, lake)
    alerts, quotes = lake_mod.table_path(lake, "alerts"), lake_mod.table_path(lake, "quotes")
    for path, retention in ((alerts, "interval 2 hours"), (quotes, "interval 30 minutes")):  # Delta wants both
        spark.sql(
            f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.logRetentionDuration' = '{retention}', "
            f"'delta.deletedFileRetentionDuration' = '{retention}')"
        )

    lake_mod.ensure_tables(spark, lake)

    assert properties_and_columns(alerts)[0]["delta.logRetentionDuration"] == "interval 2 hours"
    assert properties_and_columns(quotes)[0]["delta.logRetentionDuration"] == "interval 5 minutes"

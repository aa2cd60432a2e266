"""runtime.spark_jvm, the product's only reach into Spark's JVM behind PySpark's public API, run on
the pinned Spark: a Spark upgrade that moves one of these objects fails here, by name."""

from __future__ import annotations

import os

import pyspark

from market_spread.runtime import spark_jvm


def test_the_calls_were_checked_against_the_spark_the_product_pins():
    assert pyspark.__version__ == spark_jvm.CHECKED_WITH, (
        f"Spark {pyspark.__version__}: run this file and update spark_jvm.CHECKED_WITH once every test passes"
    )


def test_driver_pid_is_the_jvm_this_process_started(spark):
    pid = spark_jvm.driver_pid(spark)
    assert pid > 0 and pid != os.getpid()
    assert os.path.exists(f"/proc/{pid}")


def test_job_ids_count_the_jobs_run(spark):
    before = spark_jvm.next_job_id(spark)
    spark.range(10).count()
    assert spark_jvm.next_job_id(spark) > before


def test_a_local_checkpoint_is_released(spark):
    kept = spark.range(100).localCheckpoint(eager=True)
    spark_jvm.release_checkpoint(spark, kept)  # raises if the plan no longer has that RDD


def test_plans_and_the_parser(spark, tmp_path):
    (tmp_path / "a.txt").write_text("x\ny\n")
    df = spark.read.text(str(tmp_path))
    assert spark_jvm.estimated_bytes(df) == 4
    assert spark_jvm.logical_plan(df).getClass().getSimpleName() == "UnresolvedDataSource"  # as read, unresolved
    assert "Project" in spark_jvm.analyzed_plan(df.select("value")).getClass().getName()
    plan = spark_jvm.sql_parser(spark).parsePlan("SELECT 1")
    assert plan.getClass().getSimpleName() in ("Project", "UnresolvedRelation", "Project$")


def test_batch_leaves_name_a_foreach_batch_batchs_sources(spark, tmp_path):
    """The file source's batch: one FileScanRDD leaf with the file it reads whole (the Kafka
    source's DataSourceRDD and its offset ranges: tests/stream/test_kafka.py); a DataFrame that is
    not a batch's: None."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("x\n")
    assert spark_jvm.batch_leaves(spark.range(3)) is None
    seen = []
    query = (
        spark.readStream.format("text")
        .load(str(tmp_path / "in"))
        .writeStream.foreachBatch(lambda df, _: seen.append(spark_jvm.batch_leaves(df)))
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert [[leaf.kind for leaf in leaves] for leaves in seen] == [["FileScanRDD"]]
    ((path, read, size),) = seen[0][0].files
    assert path.endswith("/in/a.txt") and read == size == 2


def test_the_floor_under_s3as_time_outs_is_lowered(spark):
    before = spark_jvm.s3a_request_floor(spark)
    assert before == 15.0  # hadoop-aws 3.4.2's: any lower time-out is raised to it
    try:
        spark_jvm.bound_s3a_requests(spark, 1.167)
        assert spark_jvm.s3a_request_floor(spark) == 1.167
    finally:
        spark_jvm.bound_s3a_requests(spark, before)

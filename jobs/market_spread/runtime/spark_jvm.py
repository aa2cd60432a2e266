"""Every reach into Spark's internals behind PySpark's public API, in one module: the JVM's objects
(`_jsc`, `_jvm`, `_jdf`, `_jsparkSession`), the walk of a batch's plan, and the printed form of its
Kafka partitions. A Spark upgrade is checked here, against `tests/spark/test_spark_jvm.py`, which
runs each function on the pinned Spark and names the version it was checked with (CHECKED_WITH).
Each reach says, on its `Lets go when` line, what would let it go. (Spark's checkpoint files, read
and rewritten, are runtime.checkpoint_files'.)"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported by modules the command line loads before any Spark: pyspark only when called
    from pyspark.sql import DataFrame, SparkSession

# The Spark release these calls were last checked against (tests/spark/test_spark_jvm.py).
CHECKED_WITH = "4.1.3"

# The one line Java prints itself at start because Spark's launcher adds the incubator module
# jdk.incubator.vector: no Java or Spark setting silences it, so its reader drops it.
JVM_NOTICE = b"WARNING: Using incubator modules"


def launch_gateway(builder: SparkSession.Builder) -> None:
    """Start the driver's JVM as PySpark's getOrCreate would, with the builder's options, but
    its stderr passed on line by line without JVM_NOTICE; the session built next uses that JVM.
    Does nothing when a JVM is already up or PySpark was handed one (PYSPARK_GATEWAY_PORT).
    Lets go when: Spark's launcher stops adding jdk.incubator.vector, or the JVM stops printing it."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway as pyspark_launch

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    conf = SparkConf()
    for key, setting in builder._options.items():
        conf.set(key, setting)
    # Read from before the JVM starts: a JVM that fails to start says why on this pipe.
    read_end, write_end = os.pipe()
    threading.Thread(target=_pass_on, args=(read_end,), name="jvm-stderr", daemon=True).start()
    try:
        gateway = pyspark_launch(conf, popen_kwargs={"stderr": write_end})
    finally:
        os.close(write_end)  # the JVM holds its own copy: the reader ends when the JVM does
    SparkContext._gateway = gateway
    SparkContext._jvm = gateway.jvm


def _pass_on(fd: int) -> None:
    """Copy the JVM's stderr to ours, line by line, but for JVM_NOTICE."""
    with os.fdopen(fd, "rb", buffering=0) as source:
        for line in iter(source.readline, b""):
            if not line.startswith(JVM_NOTICE):
                os.write(2, line)


def driver_pid(spark: SparkSession) -> int:
    """The process id of the driver's JVM (the lock file names it: a lake is busy while it lives).
    Lets go when: PySpark exposes the driver's process id."""
    return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]


def bound_s3a_requests(spark: SparkSession, seconds: float) -> None:
    """Let S3A's time-outs go down to `seconds` in this driver's JVM (runtime.s3_config.s3a_bounds):
    hadoop-aws 3.4.2 raises any below its floor, 15 s, to 15 s, and only this static lowers it. For
    the S3A clients made after it (one per bucket, at a bucket's first use); executors of a cluster
    keep the floor (they write data files, never a commit).
    Lets go when: hadoop-aws honours time-outs below 15 s from its configuration."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None  # a started session has its JVM
    floor = jvm.java.time.Duration.ofMillis(max(1, int(seconds * 1000)))
    jvm.org.apache.hadoop.fs.s3a.impl.AWSClientConfig.setMinimumOperationDuration(floor)


def s3a_request_floor(spark: SparkSession) -> float:
    """hadoop-aws's floor under S3A's time-outs in this JVM, in seconds (bound_s3a_requests)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return int(jvm.org.apache.hadoop.fs.s3a.impl.AWSClientConfig.getMinimumOperationDuration().toMillis()) / 1000


def release_checkpoint(spark: SparkSession, kept: DataFrame) -> None:
    """Drop the blocks of a `localCheckpoint` now, through the context: `RDD.unpersist` warns about
    the truncated lineage every time. Lets go when: DataFrame.unpersist frees a local checkpoint."""
    spark.sparkContext._jsc.sc().unpersistRDD(kept._jdf.logicalPlan().rdd().id(), False)


def next_job_id(spark: SparkSession) -> int:
    """The id the driver's next Spark job gets (ids are handed out in sequence).
    Lets go when: PySpark's status tracker counts jobs without job groups."""
    return int(spark.sparkContext._jsc.sc().dagScheduler().nextJobId())


def sql_parser(spark: SparkSession) -> Any:
    """The session's SQL parser, with the Delta extension's statements: parses without running.
    Lets go when: PySpark can parse a statement without running it."""
    return spark._jsparkSession.sessionState().sqlParser()


def analyzed_plan(df: DataFrame) -> Any:
    """The analysed logical plan of `df` (a Catalyst tree; nothing runs).
    Lets go when: PySpark exposes a plan's tree (not only its printed form)."""
    return df._jdf.queryExecution().analyzed()


def logical_plan(df: DataFrame) -> Any:
    """The logical plan of `df` as given (foreachBatch's: the file scans with their partitions).
    Lets go when: foreachBatch hands over the batch's files and offsets (Spark knows them)."""
    return df._jdf.queryExecution().logical()


def estimated_bytes(df: DataFrame) -> int:
    """The bytes the optimiser estimates `df` reads (Long.MaxValue-like when it does not know).
    Lets go when: foreachBatch hands over the batch's files (their sizes with them)."""
    return int(str(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))


@dataclass(frozen=True)
class Leaf:
    """One source RDD of a batch's plan: its class's simple name, and what it reads."""

    kind: str
    # A data source V2 RDD (DataSourceRDD): its input partitions as Scala prints them, one per line.
    partitions: str = ""
    # A file scan (FileScanRDD): (path, bytes read, file size) of each split it reads.
    files: tuple[tuple[str, int, int], ...] = ()


def batch_leaves(df: DataFrame) -> list[Leaf] | None:
    """The leaf RDDs (a batch's sources) of the plan foreachBatch hands over, walked once; None
    when `df`'s plan has no RDD of its own (not a foreachBatch batch) or cannot be walked.
    Lets go when: foreachBatch hands over the batch's files and offsets (Spark knows them)."""
    try:
        return _walk(logical_plan(df))
    except Exception:  # noqa: BLE001 - a plan of another shape: the caller lets Spark read the batch
        return None


def _walk(plan: Any) -> list[Leaf] | None:
    if plan.getClass().getSimpleName() != "LogicalRDD":
        return None
    leaves, rdds = [], [plan.rdd()]
    while rdds:
        rdd = rdds.pop()
        deps = rdd.dependencies()
        if deps.isEmpty():
            leaves.append(_leaf(rdd))
            continue
        rdds.extend(dep.rdd() for dep in _scala_list(deps))
    return leaves


def _leaf(rdd: Any) -> Leaf:
    kind = rdd.getClass().getSimpleName()
    if kind == "FileScanRDD":
        splits = [f for part in _scala_list(rdd.filePartitions()) for f in part.files()]
        return Leaf(kind, files=tuple((f.filePath().toPath().toString(), f.length(), f.fileSize()) for f in splits))
    if kind == "DataSourceRDD":  # a V2 partition prints as an object; what it reads is in its input partitions
        return Leaf(kind, partitions="\n".join(str(p.inputPartitions().toString()) for p in rdd.partitions()))
    return Leaf(kind)


def _scala_list(seq: Any) -> list[Any]:
    it, out = seq.iterator(), []
    while it.hasNext():
        out.append(it.next())
    return out


# KafkaBatchInputPartition's offset range as Scala prints it: KafkaOffsetRange(<topic>-<partition>,
# <from>,<until>,<preferred location>); a topic name has no comma (kafka_source.check_topic_name).
_RANGE = re.compile(r"KafkaOffsetRange\(([A-Za-z0-9._-]+)-(\d+),(\d+),(\d+),")
_PARTITION = "KafkaBatchInputPartition("


def kafka_offset_ranges(leaves: list[Leaf] | None) -> list[tuple[str, int, int, int]] | None:
    """(topic, partition, from, until) of each Kafka partition a batch's `leaves` read, from their
    printed form; None for any other source, or a partition printed otherwise than expected.
    Lets go when: foreachBatch hands over the batch's offsets (the checkpoint's `offsets/B` holds
    only their ends)."""
    if not leaves or any(leaf.kind != "DataSourceRDD" for leaf in leaves):
        return None
    ranges = []
    for text in (leaf.partitions for leaf in leaves):
        found = _RANGE.findall(text)
        if len(found) != text.count(_PARTITION):
            return None
        ranges += [(t, int(p), int(a), int(b)) for t, p, a, b in found]
    return ranges

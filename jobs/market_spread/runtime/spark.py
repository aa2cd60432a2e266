"""SparkSession construction with Delta (and S3A, when fetched) from JARs fetched once into local folders."""

from __future__ import annotations

import glob
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import cast

from pyspark import StorageLevel
from pyspark.errors import PySparkRuntimeError
from pyspark.sql import DataFrame, SparkSession

from market_spread.errors import UsageError
from market_spread.runtime import spark_jvm
from market_spread.runtime.cluster_conf import session_conf
from market_spread.runtime.jvm_archive import java_options, restore_archive, retire_archive
from market_spread.runtime.network import driver_conf, refused_by_cluster
from market_spread.runtime.paths import project_home
from market_spread.runtime.settings import value
from market_spread.runtime.storage import S3Config


class MissingJars(UsageError):
    """A JAR folder `make setup` fills is missing or incomplete; the message says what to do."""


def cached_jars(variable: str, subdir: str, marker: str, what: str) -> list[str]:
    """The JARs `make setup` fetched with Maven (or built) into `.cache/SUBDIR` (or the folder `variable` names).

    Raises MissingJars unless one of them starts with `marker`."""
    folder = Path(value(variable) or project_home() / ".cache" / subdir)
    jars = sorted(glob.glob(str(folder / "*.jar")))
    if not any(Path(j).name.startswith(marker) for j in jars):
        raise MissingJars(
            f"no {what} JARs in {folder}: run `make setup` (fetches or builds them once), "
            f"or point {variable} at a folder holding them"
        )
    return jars


def delta_jars() -> list[str]:
    """The Delta JARs `make setup` fetched; MissingJars (a UsageError) says what to do if they are missing."""
    return cached_jars("MARKET_SPREAD_JARS", "jars", "delta-spark_", "Delta")


def s3_jars() -> list[str]:
    """Spark's S3A connector JARs `make setup` fetched (hadoop-aws and the AWS SDK modules it loads);
    MissingJars says what to do if they are missing. A caller given an s3:// path asks for them."""
    return cached_jars("MARKET_SPREAD_S3_JARS", "s3-jars", "hadoop-aws-", "S3A connector (hadoop-aws)")


def log_store_jars() -> list[str]:
    """The log store's JAR `make setup` compiles (LOG_STORE); MissingJars says what to do if it is missing."""
    return cached_jars("MARKET_SPREAD_LOGSTORE_JARS", "logstore", "market-spread-logstore", "log store")


# Delta's log store for the lake's schemes, from runtime/java/PutIfAbsentLogStore.java: a commit
# N.json is published only if absent (If-None-Match on S3, a hard link on disk), as delta-rs does.
# Delta's default stores check, then write over it, so a Spark commit could erase a delta-rs one.
LOG_STORE = "market_spread.runtime.PutIfAbsentLogStore"
LOG_STORE_CONF = {f"spark.delta.logStore.{scheme}.impl": LOG_STORE for scheme in ("s3a", "s3", "file")}


def session_jars() -> list[str]:
    """Every session's JARs: Delta's, the log store's, and the S3A connector's when they are there (a
    lake on local disk never needs them, so their absence is no error here). The driver's class
    archive is keyed by this list: whatever builds a session or the archive takes it from here."""
    try:
        extra = s3_jars()
    except MissingJars:
        extra = []
    return delta_jars() + log_store_jars() + extra


# C1 only, with room for its larger code: a cold JVM spends much of its first minute compiling with
# C2 on 2 cores (measured: docs/performance.md, row 'the quick JIT (C1 only'). Once warm, C2's code
# is cheaper per batch, so a continuous stream keeps it.
QUICK_JIT = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=512m"


# An --available-now run over a backlog this big (bytes of landing files) lasts long enough for the
# optimising compiler's code to pay back its compile time; the two are even at about 1.5M events
# (measured: docs/performance.md, row 'the optimising JIT (C2) for `--available-now`').
FULL_JIT_BACKLOG_BYTES = 192 * 1024 * 1024


def jit_options(long_running: bool) -> str:
    """The driver JVM's JIT flags: MARKET_SPREAD_JIT=quick|full, or auto (quick unless long-running);
    SettingError for any other value."""
    choice = value("MARKET_SPREAD_JIT")
    quick = choice == "quick" or (choice == "auto" and not long_running)
    return QUICK_JIT if quick else ""


def _switch(name: str) -> str:
    """A boolean setting as Spark's configuration spells it."""
    return "true" if value(name) else "false"


def core_conf(shuffle_partitions: int) -> dict[str, str]:
    """Spark SQL settings fit for small micro-batches, in UTC."""
    return {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        # A micro-batch generates ~160 classes (our stages plus Delta's log replay, stats and
        # commit plans); Spark's default cache of 100 evicted them all before the next batch, so
        # every batch compiled them again with Janino and the JIT compiled the new classes again
        # (measured: docs/performance.md, row 'Spark's codegen cache 4,000 entries').
        "spark.sql.codegen.cache.maxEntries": str(value("MARKET_SPREAD_CODEGEN_CACHE")),
        # Off by default: adaptive execution submits every shuffle stage as a job of its own, which
        # on small micro-batches is overhead, not help (measured: docs/performance.md, row 'adaptive
        # execution off'). Partitions stay
        # `shuffle_partitions`; explicit broadcast hints keep the small joins broadcast.
        "spark.sql.adaptive.enabled": _switch("MARKET_SPREAD_ADAPTIVE"),
        # The quote history is partitioned by day: without concurrent writers, Delta's writer sorts
        # every row of a large append by quote_date first (DeltaFileFormatWriter.executeWrite in delta
        # 4.4.0), though a batch spans one day or two. With them a task keeps a file open per day,
        # and sorts only if it meets more days than this.
        "spark.sql.maxConcurrentOutputFileWriters": str(value("MARKET_SPREAD_CONCURRENT_WRITERS")),
        # The parsed batch is cached for one batch only: compressing its columns costs more CPU than
        # the memory it saves (measured: docs/performance.md, row 'the parsed batch's cache
        # uncompressed'). MEMORY_AND_DISK still spills a batch that does not fit.
        "spark.sql.inMemoryColumnarStorage.compressed": _switch("MARKET_SPREAD_CACHE_COMPRESSED"),
        "spark.ui.showConsoleProgress": "false",
        # PySpark's call-site capture for error messages, on by default, wraps every DataFrame and
        # Column call with four more round trips to the JVM and a failed `import IPython`: a small
        # micro-batch made about twice the round trips with it (measured: docs/performance.md, row
        # 'PySpark's DataFrame call-site capture off').
        # Errors still name the failing expression, not the Python line that built it.
        "spark.python.sql.dataFrameDebugging.enabled": _switch("MARKET_SPREAD_DATAFRAME_DEBUGGING"),
        "spark.sql.streaming.stopTimeout": "120s",
        # File listing (VACUUM, discovery) defaults to 10,000 parallel tasks: minutes on 2 cores.
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": "8",
        "spark.ui.enabled": _switch("MARKET_SPREAD_SPARK_UI"),
        "spark.sql.streaming.fileSource.cleaner.numThreads": "1",
        **({} if value("MARKET_SPREAD_LOCAL_CHECKSUMS") else RAW_LOCAL_FILES),
    }


# Spark's local files through Hadoop's raw local file system. The checksummed one writes a `.crc`
# beside every file and, without Hadoop's native library, starts a `chmod` process for each of the
# two: the checkpoint's four log files a batch cost 8 processes, about 55 ms of a 350 ms trigger at
# 10,000 events/s (measured: docs/performance.md, row 'Spark's local files through Hadoop's raw').
# S3A's default upload buffer (`disk`) needs the checksummed class (it casts to it), so uploads are
# buffered on the heap, at most two blocks ahead per file.
RAW_LOCAL_FILES = {
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.RawLocalFs",
    "spark.hadoop.fs.s3a.fast.upload.buffer": "array",
    "spark.hadoop.fs.s3a.fast.upload.active.blocks": "2",
}


def delta_conf(jars: list[str], shuffle_partitions: int) -> dict[str, str]:
    """Delta Lake from `jars`, its tables kept readable by delta-rs, its small-table settings."""
    return {
        "spark.jars": ",".join(jars),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        **LOG_STORE_CONF,
        # Delta rebuilds table snapshots with 50 tasks by default: far too many for small logs.
        "spark.databricks.delta.snapshotPartitions": str(max(2, shuffle_partitions)),
        # Tables must stay readable by delta-rs: no deletion vectors, no v2 checkpoints.
        "spark.databricks.delta.properties.defaults.enableDeletionVectors": "false",
        "spark.databricks.delta.schema.autoMerge.enabled": "false",
        # The state MERGE's source is a deterministic aggregate of the cached batch: materialising
        # it again (Delta's default for any source that is not a plain Delta scan) is a wasted job.
        # Delta also refuses a cached source, because a cached *Delta table* is not pinned to a
        # version; the cache here holds parsed landing text, never a Delta table.
        "spark.databricks.delta.merge.materializeSource": "none",
        "spark.databricks.delta.merge.materializeCachedSource": "false",
        "spark.databricks.delta.merge.failSourceCachedAfterMaterialization": "false",
        # Delta 4.4's default, stated: a table of few files keeps its file list in each version's .crc,
        # from which the next .crc is computed without a job. Scans do not read it: a MERGE still
        # reconstructs the table's state as Spark jobs (filesForScan asks the snapshot's size, a
        # computedState aggregate; read in delta 4.4.0 and seen in a JFR profile). Off or on made
        # no difference (measured: docs/performance.md, row '`allFilesInCrc` on').
        "spark.databricks.delta.allFilesInCrc.enabled": _switch("MARKET_SPREAD_ALL_FILES_IN_CRC"),
    }


def jvm_conf(jars: list[str], driver_options: str) -> dict[str, str]:
    """The driver's memory and both JVMs' options (UTC; the driver's JIT and class archive)."""
    return {
        "spark.driver.memory": value("MARKET_SPREAD_DRIVER_MEMORY"),
        "spark.driver.extraJavaOptions": f"{driver_options} {java_options(jars)}".strip(),
        "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
    }


def _start(builder: SparkSession.Builder, jars: list[str], driver_options: str) -> SparkSession:
    """The session; should the JVM not start with the class archive, once more without it."""
    try:
        spark_jvm.launch_gateway(builder)
        return builder.getOrCreate()
    except PySparkRuntimeError as exc:
        # A damaged class archive stops the JVM before it starts: set it aside, start without it.
        # Only that failure: any other one leaves the archive alone.
        if exc.getErrorClass() != "JAVA_GATEWAY_EXITED" or not retire_archive(jars):
            raise
    try:
        builder.config("spark.driver.extraJavaOptions", driver_options)
        spark_jvm.launch_gateway(builder)
        return builder.getOrCreate()
    except PySparkRuntimeError:
        restore_archive(jars)  # not the archive's fault: it failed without the archive too
        raise


# The driver JVM's log4j2 configuration (runtime/log4j2.properties): no start-up notices on stderr.
LOG_CONF = f"-Dlog4j2.configurationFile=file:{Path(__file__).with_name('log4j2.properties')}"


def build_session(
    app_name: str = "market-spread",
    master: str | None = None,
    shuffle_partitions: int | None = None,
    extra_conf: dict[str, str] | None = None,
    long_running: bool = False,
) -> SparkSession:
    """A SparkSession with Delta, UTC time and settings fit for small micro-batches.

    `long_running`: a process that lives for hours (a continuous stream) and gains from the JIT's
    optimising compiler once warm; other processes (a command, `--available-now`) get the quick one."""
    master = master or value("MARKET_SPREAD_MASTER") or "local[*]"
    if shuffle_partitions is None:
        # Micro-batches are small: a few partitions per core beats the default 200 by far.
        shuffle_partitions = value("MARKET_SPREAD_SHUFFLE_PARTITIONS")
    jars = session_jars()
    driver_options = f"-Duser.timezone=UTC {LOG_CONF} {jit_options(long_running)}".strip()
    conf = {
        **delta_conf(jars, shuffle_partitions),
        **core_conf(shuffle_partitions),
        **jvm_conf(jars, driver_options),
        # S3A's endpoint and keys from the AWS variables: inert until a path is s3a:// (or s3://).
        **S3Config.from_env().hadoop_conf(),
        # A local driver on loopback only; a cluster's driver with Spark's RPC authentication.
        **driver_conf(master),
        # Cluster-only settings from the environment (driver address, executor sizes, event log):
        # an empty dict for local masters, so local behaviour is unchanged.
        **session_conf(master),
        # S3A from the AWS variables (runtime.storage): only settings, used once a path is s3a://.
        **S3Config.from_env().hadoop_conf(),
        **(extra_conf or {}),
    }
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, setting in conf.items():
        builder = builder.config(key, setting)
    with refused_by_cluster(master):
        spark = _start(builder, jars, driver_options)
    spark.sparkContext.setLogLevel(value("MARKET_SPREAD_SPARK_LOG_LEVEL"))
    # PySpark logs a failed query's Java stack as a JSON record on stderr; the commands report the
    # error themselves, in one line.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    return spark


@contextmanager
def session_settings(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Inside, the session has these settings; after, even when the body raises, each has its
    earlier value again (or none). The stream's batches share one session, one batch at a time."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, setting in settings.items():
        spark.conf.set(key, setting)
    try:
        yield
    finally:
        for key, earlier in before.items():
            if earlier is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, earlier)


@contextmanager
def kept_for_batch(df: DataFrame) -> Iterator[DataFrame]:
    """`df`, computed by the first query that reads it and kept until the block ends.

    In a local session (the driver is the only executor): a local checkpoint, whose plan is a leaf
    over the kept rows, so that every query of the batch built on it is analysed and optimised
    without the parse's plan under it (measured: docs/performance.md, row 'the parsed batch kept as
    a local checkpoint'). On a cluster, Spark's cache: its partitions can be computed again if an
    executor is lost; a local checkpoint's cannot."""
    spark = df.sparkSession
    if not cast(str, spark.sparkContext.master).startswith("local"):  # set in a running context
        cached = df.persist(StorageLevel.MEMORY_AND_DISK_DESER)
        try:
            yield cached
        finally:
            cached.unpersist()
        return
    kept = df.localCheckpoint(eager=False)
    try:
        yield kept
    finally:
        # Released now, not when the JVM's garbage collector finds the RDD unreachable. Through the
        # context: RDD.unpersist warns about the truncated lineage on every batch.
        spark_jvm.release_checkpoint(spark, kept)


# The job group of the Spark jobs the stream runs beside its batches (driver_spark's warm-up): a
# batch's job count leaves them out (batch_jobs).
BACKGROUND_JOBS = "market-spread-background"


def spark_jobs_so_far(spark: SparkSession) -> int | None:
    """Jobs submitted so far in this driver (job ids are allocated in sequence), if reachable."""
    try:
        return spark_jvm.next_job_id(spark)
    except Exception:  # noqa: BLE001 - a diagnostic only: never fail a batch over it
        return None


def in_background(spark: SparkSession) -> None:
    """Put this thread's Spark jobs in the background group (PySpark pins a thread's properties)."""
    spark.sparkContext.setJobGroup(BACKGROUND_JOBS, "market-spread: work beside the batches", False)


def batch_jobs(spark: SparkSession, first: int | None, last: int | None) -> int | None:
    """The jobs with ids in [first, last) that are not background ones; None where not known."""
    if first is None or last is None:
        return None
    if last == first:  # no job at all (a driver batch): nothing to ask the status tracker
        return 0
    try:
        beside = spark.sparkContext.statusTracker().getJobIdsForGroup(BACKGROUND_JOBS)
    except Exception:  # noqa: BLE001 - a diagnostic only: never fail a batch over it
        return None
    return last - first - sum(1 for job in beside if first <= job < last)

"""The settings registry: every environment variable the product reads, declared once.

Each `Setting` names the variable, how its text is parsed and checked, its default, what it means
and which commands read it. Code reads a variable only through `value(name)`, so every source is
checked the same way; docs/configuration.md is generated from this registry (and from the CLI's
options, whose variables click reads: see cli/params.py). The machinery (`declare`, `value`, the
parsers) is in runtime/registry.py; importing this module loads every declaration. Standard library
only: the DAG files import it, and parsing a DAG must not load Spark.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from market_spread.runtime.registry import (
    AIRFLOW,
    AIRFLOW_PREFIX,
    CLUSTER,
    ENV_PREFIX,
    FALSE_WORDS,
    SETTINGS,
    SPARK,
    TRUE_WORDS,
    Setting,
    archive_or_off,
    boolean,
    check_for,
    declare,
    kind,
    log_level,
    non_negative_number,
    one_of,
    parse_text,
    path,
    place,
    port,
    port_or_off,
    positive_number,
    setting,
    size,
    text,
    value,
    whole,
)

__all__ = [
    "AIRFLOW",
    "AIRFLOW_PREFIX",
    "CLUSTER",
    "ENV_PREFIX",
    "FALSE_WORDS",
    "SETTINGS",
    "SPARK",
    "TRUE_WORDS",
    "Setting",
    "archive_or_off",
    "boolean",
    "check_for",
    "declare",
    "kind",
    "log_level",
    "non_negative_number",
    "one_of",
    "parse_text",
    "path",
    "place",
    "port",
    "port_or_off",
    "positive_number",
    "setting",
    "size",
    "text",
    "value",
    "whole",
]

# --------------------------------------------------------------------------------------------
# The product's settings. A variable also named by a CLI flag (MARKET_SPREAD_LAKE is `--lake`'s
# shared variable) is read by click for that flag, with the flag's own type; docs/configuration.md
# shows both.

P = ENV_PREFIX

# Where things are
declare(
    P + "HOME",
    path,
    None,
    "The project home: `data/` (the default landing, lake and reports) and `.cache/` "
    "(the JARs `make setup` fetched) are under it.",
    ("every command",),
    shown_default="the project whose `.venv` runs Python, else the working directory",
    to_jobs=True,
)
declare(
    P + "DATADOCS_ASSETS",
    path,
    None,
    "Folder of the Data Docs' styles and scripts that `make setup` fetches; "
    "the Airflow plugin serves reports with them instead of public CDNs.",
    ("airflow api-server (Data quality view)", "make setup"),
    shown_default=".cache/datadocs-assets",
)
declare(
    P + "JARS",
    path,
    None,
    "Folder of the Delta JARs.",
    (SPARK,),
    shown_default="`.cache/jars` in the project home",
    to_jobs=True,
)
declare(
    P + "KAFKA_JARS",
    path,
    None,
    "Folder of Spark's Kafka connector JARs.",
    ("stream --source kafka",),
    shown_default="`.cache/kafka-jars` in the project home",
    to_jobs=True,
)
declare(
    P + "BROKER_JARS",
    path,
    None,
    "Folder of the Kafka broker's JARs.",
    ("broker",),
    shown_default="`.cache/broker-jars` in the project home",
    to_jobs=True,
)
declare(
    P + "S3_JARS",
    path,
    None,
    "Folder of Spark's S3A connector JARs (hadoop-aws and the AWS SDK modules it "
    "needs); every Spark session loads them when they are there.",
    (SPARK,),
    shown_default="`.cache/s3-jars` in the project home",
    to_jobs=True,
)
declare(
    P + "LOGSTORE_JARS",
    path,
    None,
    "Folder of the JAR `make setup` compiles from runtime/java/PutIfAbsentLogStore.java: "
    "the Delta log store every Spark session registers, which publishes a commit only if its "
    "version is absent.",
    (SPARK,),
    shown_default="`.cache/logstore` in the project home",
    to_jobs=True,
)
declare(
    P + "S3PROXY_JARS",
    path,
    None,
    "Folder of the S3-compatible server's JAR (s3proxy).",
    ("object-store",),
    shown_default="`.cache/s3proxy` in the project home",
)
declare(
    P + "RUN_ID",
    text,
    None,
    "Set by `make run` in every process it starts, so that its final sweep finds them all; passed on to the jobs.",
    ("make run", AIRFLOW),
    to_jobs=True,
)

# Object storage (runtime/storage.py): the standard AWS variables, for every component alike
STORAGE_USERS = ("every command given an s3:// path", AIRFLOW)
declare(
    "AWS_ENDPOINT_URL",
    text,
    None,
    "The S3 endpoint of an S3-compatible store (`http://127.0.0.1:9000`); "
    "unset: AWS S3 itself. With it, requests are path-style.",
    STORAGE_USERS,
    shown_default="AWS S3",
    to_jobs=True,
)
declare(
    "AWS_ACCESS_KEY_ID",
    text,
    None,
    "The S3 access key; unset: the AWS SDKs' own chain (profile, instance role).",
    STORAGE_USERS,
    to_jobs=True,
)
declare("AWS_SECRET_ACCESS_KEY", text, None, "The S3 secret key.", STORAGE_USERS, to_jobs=True)
declare("AWS_REGION", text, "us-east-1", "The S3 region.", STORAGE_USERS, to_jobs=True)

# The Spark session (runtime/spark.py: build_session)
declare(
    P + "MASTER",
    text,
    None,
    "The Spark master URL of every Spark command (`spark://host:7077` for a standalone cluster).",
    (SPARK, AIRFLOW),
    shown_default="local[*]",
    airflow_variable=AIRFLOW_PREFIX + "master",
    to_jobs=True,
)
declare(
    P + "SHUFFLE_PARTITIONS",
    whole(1),
    4,
    "spark.sql.shuffle.partitions: a few partitions per core suit small micro-batches far better than Spark's 200.",
    (SPARK,),
    to_jobs=True,
)
declare(
    P + "CODEGEN_CACHE",
    whole(0),
    4000,
    "spark.sql.codegen.cache.maxEntries: generated classes kept between batches.",
    (SPARK,),
    to_jobs=True,
)
declare(
    P + "ADAPTIVE",
    boolean,
    False,
    "spark.sql.adaptive.enabled: adaptive execution (overhead on small batches).",
    (SPARK,),
    to_jobs=True,
)
declare(
    P + "CONCURRENT_WRITERS",
    whole(0),
    4,
    "spark.sql.maxConcurrentOutputFileWriters: files a write task keeps open before it sorts by partition.",
    (SPARK,),
)
declare(
    P + "CACHE_COMPRESSED",
    boolean,
    False,
    "spark.sql.inMemoryColumnarStorage.compressed: compress the cached batch.",
    (SPARK,),
)
declare(
    P + "DATAFRAME_DEBUGGING",
    boolean,
    False,
    "spark.python.sql.dataFrameDebugging.enabled: PySpark's call-site capture for error messages.",
    (SPARK,),
)
declare(P + "SPARK_UI", boolean, False, "spark.ui.enabled: the Spark web UI.", (SPARK,), to_jobs=True)
declare(
    P + "LOCAL_CHECKSUMS",
    boolean,
    False,
    "Hadoop's checksum files (`.NAME.crc`) beside the files Spark writes on a local disk (the "
    "streaming checkpoint's, Spark's Delta writes): Hadoop's checksummed local file system when on; its raw "
    "one when off, with S3A's uploads buffered on the heap (its disk buffer needs the checksummed one).",
    (SPARK,),
    to_jobs=True,
    shown_default="off",
)
declare(P + "DRIVER_MEMORY", size, "2g", "spark.driver.memory.", (SPARK,), to_jobs=True)
declare(
    P + "ALL_FILES_IN_CRC",
    boolean,
    True,
    "spark.databricks.delta.allFilesInCrc.enabled: keep a small table's file list in each version's .crc.",
    (SPARK,),
)
declare(P + "SPARK_LOG_LEVEL", log_level, "WARN", "The Spark driver's log level.", (SPARK,), to_jobs=True)
declare(
    P + "JIT",
    one_of("auto", "quick", "full"),
    "auto",
    "The driver JVM's JIT: quick (C1 only, for short "
    "runs), full, or auto (quick unless a continuous stream or a large backlog).",
    (SPARK,),
)
declare(
    P + "CDS_ARCHIVE",
    archive_or_off,
    "",
    "The driver JVM's class-data-sharing archive (`make setup` writes it); off disables it.",
    (SPARK,),
    shown_default="`.cache/jvm/driver-<Spark version>-<digest>.jsa` in the project home",
)
declare(
    P + "CDS_DUMP",
    text,
    None,
    "Set by the tool that writes the class archive: the file this JVM dumps its classes to at exit.",
    ("make setup",),
)

# On a Spark cluster (runtime/cluster_conf.py): applied only for a non-local master
declare(
    P + "DRIVER_HOST",
    text,
    None,
    "spark.driver.host: the address executors reach the driver at.",
    (CLUSTER,),
    to_jobs=True,
)
declare(P + "DRIVER_BIND_ADDRESS", text, None, "spark.driver.bindAddress.", (CLUSTER,), to_jobs=True)
declare(P + "DRIVER_PORT", port, None, "spark.driver.port (a fixed port, for firewalls).", (CLUSTER,), to_jobs=True)
declare(
    P + "BLOCK_MANAGER_PORT",
    port,
    None,
    "spark.blockManager.port (a fixed port, for firewalls).",
    (CLUSTER,),
    to_jobs=True,
)
declare(P + "EXECUTOR_MEMORY", size, None, "spark.executor.memory.", (CLUSTER,), to_jobs=True)
declare(P + "EXECUTOR_CORES", whole(1), None, "spark.executor.cores.", (CLUSTER,), to_jobs=True)
declare(
    P + "CORES_MAX",
    whole(1),
    None,
    "spark.cores.max: without it a standalone app takes every free core.",
    (CLUSTER,),
    to_jobs=True,
)
declare(
    P + "EVENT_LOG_DIR",
    text,
    None,
    "Folder or Hadoop URI for Spark's event log (read by the history server); turns the event log on.",
    (CLUSTER,),
    to_jobs=True,
)
declare(
    P + "SPARK_AUTH",
    boolean,
    True,
    "With a non-local Spark master, refuse to start unless Spark's RPC "
    "authentication is configured (spark.authenticate and spark.authenticate.secret in "
    "$SPARK_CONF_DIR/spark-defaults.conf, mode 0600); off runs unauthenticated, only where nobody "
    "else can reach the driver and the cluster (docs/operations.md, Network).",
    (CLUSTER,),
    shown_default="on",
    to_jobs=True,
)

# The stream's micro-batches and the lake's writes
declare(
    P + "DRIVER_BATCH_LINES",
    whole(0),
    None,
    "With `stream --placement auto` (the default), on a cluster whose executors have more cores than the "
    "driver's machine (Spark's default parallelism): batches of fewer input lines run the kernel in the driver "
    "process, larger ones in Spark's tasks (0: every batch). Elsewhere (a local master, or executors sharing the "
    "driver's cores) every batch runs in the driver process. Unset: 200,000.",
    ("stream",),
    shown_default="200,000 where the executors have more cores than the driver's machine, else any size",
)
declare(
    P + "SYNC",
    boolean,
    True,
    "On a local disk, flush each batch's writes to stable storage (syncfs of the lake's and the "
    "checkpoint's file systems) after its last commit, before Spark records the batch as done, so that a "
    "power loss loses or doubles nothing (contract 5.6). Off only to measure what it costs: a power loss "
    "could then leave an empty commit file or a batch recorded as done that the lake lacks.",
    ("stream",),
    shown_default="on",
)
declare(
    P + "KAFKA_ON_DRIVER",
    boolean,
    True,
    "Read a small Kafka batch's records on the driver with one kept consumer, from the offset ranges "
    "Spark's plan names (off: a Spark job reads them).",
    ("stream",),
    shown_default="on",
)
declare(
    P + "ALERTS_DRAIN_SECONDS",
    non_negative_number,
    10.0,
    "With `--alerts-topic`: how long a stopping stream keeps publishing the alerts that wait (the next "
    "start publishes what is left).",
    ("stream",),
)
declare(P + "WRITE_THREADS", whole(1), 4, "Table writes of one batch run at once.", ("stream",), to_jobs=True)
declare(
    P + "STATE_TRAIL_BATCHES",
    whole(1, maximum=10),
    10,
    "symbol_state is committed once this many batches have staged their quotes (or the oldest has waited 4 s), "
    "so it trails the checks' state by at most 10 batches or 5 s (1: every batch).",
    ("stream",),
)
declare(
    P + "STATE_MIRROR_ROWS",
    whole(0),
    200_000,
    "Above this many symbols the driver keeps no copy of symbol_state: each batch reads its orders' symbols "
    "from the table.",
    ("stream",),
)
declare(
    P + "COMPACT_EVERY",
    whole(0),
    100,
    "Commits to a table between two compactions by the stream; 0 turns them off.",
    ("stream",),
)
declare(
    P + "POLL_SECONDS",
    positive_number,
    0.25,
    "How often a continuous stream with `--interval 0` (the "
    "default) looks for new input while it has none: the longest a landed file or a record waits to be seen "
    "by an idle stream. Each look lists the landing folders (S3: two LIST requests) or asks the broker for "
    "its end offsets.",
    ("stream",),
    to_jobs=True,
)
declare(
    P + "LEASE_SECONDS",
    positive_number,
    30.0,
    "On object storage, how long the lake's writer lease "
    "lasts without renewal: a stream on another host takes a dead writer's lake over after at most this "
    "long (on the same host, at once). The holder renews every sixth of it and commits nothing once its "
    "last renewal is older than two thirds of it.",
    ("stream", "maintain"),
    to_jobs=True,
)
declare(
    P + "METRICS_PORT",
    port_or_off,
    9407,
    "The port of the stream's Prometheus metrics endpoint "
    "(`/metrics`); 0 turns the endpoint off. A port already taken is reported in one line and the stream runs "
    "on without it.",
    ("stream",),
    to_jobs=True,
)
declare(
    P + "METRICS_HOST",
    text,
    "127.0.0.1",
    "The address the stream's metrics endpoint listens on: the "
    "loopback unless a scraper on another host must reach it (docker compose: 0.0.0.0, inside its network).",
    ("stream",),
    to_jobs=True,
)
declare(
    P + "SOURCE_LOG_TRIM_EVERY",
    whole(1, "batches"),
    1000,
    "Batches between two trims of the file source's log in a long run.",
    ("stream --archive",),
)


def _orchestration(
    name: str, parse: Callable[[str], Any], default: Any, meaning: str, shown_default: str | None = None
) -> None:
    """An orchestration setting: Airflow Variable market_spread_<name>, else MARKET_SPREAD_<NAME>."""
    declare(
        P + name.upper(),
        parse,
        default,
        meaning,
        (AIRFLOW,),
        shown_default=shown_default,
        airflow_variable=AIRFLOW_PREFIX + name,
    )


# The Airflow DAGs (orchestration/settings.py: Settings); relative paths are in the project home
_orchestration("lake", place, Path("data/lake"), "The lake the DAGs' jobs write and read.")
_orchestration("landing", place, Path("data/landing"), "The landing folder the stream reads and the feed writes.")
_orchestration("docs", place, Path("data/quality"), "Where validate writes its data docs.")
_orchestration("symbols", text, None, "The symbol universe file.", shown_default="the packaged symbols.txt")
_orchestration("max_spread", text, None, "The stream's and validate's absolute spread threshold.")
_orchestration("max_spread_ratio", text, None, "The stream's and validate's relative spread threshold.")
_orchestration("stream_enabled", boolean, True, "Run the stream (checked again while it runs: false stops it).")
_orchestration(
    "interval",
    non_negative_number,
    0.0,
    "Seconds between the starts of the stream's micro-batches; 0: "
    "a batch starts as soon as input waits (see MARKET_SPREAD_POLL_SECONDS).",
)
_orchestration(
    "stall_seconds", positive_number, 300.0, "A stream without a batch for this long is stopped and restarted."
)
_orchestration("startup_seconds", positive_number, 900.0, "Seconds a new stream job has for its first batch.")
_orchestration("stop_timeout", positive_number, 180.0, "Seconds a stopping stream has before it is killed.")
_orchestration("progress_every", whole(1), 20, "One summary line per this many batches in the task log.")
_orchestration("feed_enabled", boolean, True, "Run the demo feed.")
_orchestration("feed_rate", positive_number, 20.0, "The demo feed's events per second.")
_orchestration("feed_seconds", positive_number, 50.0, "How long each demo feed run lasts.")
_orchestration("feed_tick", positive_number, 5.0, "Seconds between two files of the demo feed.")
_orchestration("source", one_of("files", "kafka"), "files", "Where the stream reads: the landing folder or Kafka.")
_orchestration("bootstrap_servers", text, None, "The Kafka brokers (with source kafka).")
_orchestration("quotes_topic", text, None, "The Kafka topic of quotes.", shown_default="quotes")
_orchestration("orders_topic", text, None, "The Kafka topic of orders.", shown_default="orders")
_orchestration(
    "alerts_topic", text, None, "Also publish the stream's alerts to this Kafka topic (at the bootstrap servers)."
)
_orchestration("retain_hours", whole(1), 168, "Hours of old files maintain's VACUUM keeps.")
_orchestration(
    "maintenance_window",
    boolean,
    True,
    "Stop the stream while maintain runs (false: maintain runs beside it and skips compaction).",
)
_orchestration(
    "maintenance_min_files", whole(0), 32, "The maintenance DAG runs only when a table has this many data files."
)
_orchestration("quote_retention_days", whole(0), 0, "Days of quote history maintain keeps; 0 keeps everything.")

# The DAG files' schedules, read when Airflow parses them (from the environment only)
declare(
    P + "QUALITY_SCHEDULE",
    text,
    "0 * * * *",
    "The safety net of market_spread_quality (a cron or "
    "@hourly-style preset): it runs when new alerts are committed (the alerts asset), and on this cron too.",
    (AIRFLOW,),
)
# The watcher of the alerts table (orchestration/alerts_trigger.py), built when the DAG files are parsed
declare(
    P + "ALERTS_POLL_SECONDS",
    positive_number,
    10.0,
    "Seconds between two looks of the triggerer at the alerts table's commit log.",
    (AIRFLOW,),
)
declare(
    P + "ALERTS_THROTTLE_SECONDS",
    positive_number,
    120.0,
    "At most one alerts event (one quality run) per this many seconds, however often the stream commits alerts.",
    (AIRFLOW,),
)
declare(
    P + "MAINTENANCE_SCHEDULE",
    text,
    "@daily",
    "The schedule (cron or preset) of market_spread_maintenance.",
    (AIRFLOW,),
)

"""`stream --source kafka`: both feeds from Kafka topics (contract section 3b).

One Spark Kafka source subscribes to both topics, so each micro-batch's end offsets of quotes and
orders are read in one request: a quote acknowledged by the broker before an order was produced is
in the order's micro-batch or an earlier one ("landed no later than the order's file").

Each record becomes a row of the shape the batch function expects from the file source:
`stream` ('quotes'/'orders', from the topic), `value` (the record's value as UTF-8 text: one
landing line) and `source_file` = `topic/partition/offset`, so quarantine rows name the record.
The key, when set, is the symbol; it is used by producers for partitioning only. The value's symbol
is authoritative: a record whose key disagrees with its value's symbol is judged by its value (a
valid record is processed under the value's symbol, an unknown value symbol is quarantined), exactly
as the same line would be in a landing file. A record with a null value (a tombstone) counts as a
blank line: ignored.

Offsets live in the stream's checkpoint (Spark's Kafka source commits nothing to Kafka), so the
exactly-once argument of the file source holds unchanged: a replayed batch re-reads the same offset
range. `failOnDataLoss` stays true: if records the checkpoint has not yet read are gone (retention,
a deleted and re-created topic), the stream stops with an error rather than silently skipping
them; docs/operations.md (Kafka) says how to restart deliberately past the gap.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from market_spread.errors import UsageError
from market_spread.runtime.checkpoint_files import offset_files
from market_spread.runtime.storage import Location

SOURCES = ("files", "kafka")
DEFAULT_QUOTES_TOPIC = "quotes"
DEFAULT_ORDERS_TOPIC = "orders"
# A broker outage is waited out, not fatal: the driver retries listing offsets every second for up
# to this many times (about a day), and an executor's fetch waits this long for the broker.
OFFSET_RETRIES = 86_400
POLL_TIMEOUT_MS = 30 * 60 * 1000
FETCH_MAX_WAIT_MS = 20


@dataclass(frozen=True)
class KafkaSettings:
    bootstrap_servers: str
    quotes_topic: str = DEFAULT_QUOTES_TOPIC
    orders_topic: str = DEFAULT_ORDERS_TOPIC
    starting_offsets: str = "earliest"
    max_records_per_batch: int | None = None

    @property
    def label(self) -> str:
        return f"kafka {self.bootstrap_servers} topics {self.quotes_topic},{self.orders_topic}"

    def topics(self) -> dict[str, str]:
        """topic -> feed name."""
        return {self.quotes_topic: "quotes", self.orders_topic: "orders"}


def kafka_settings(
    source: str,
    bootstrap_servers: str | None,
    quotes_topic: str,
    orders_topic: str,
    starting_offsets: str = "earliest",
    max_records_per_batch: int | None = None,
) -> KafkaSettings | None:
    """The Kafka settings of `stream`, None for the file source; UsageError for bad combinations."""
    if source != "kafka":
        return None  # Kafka flags (perhaps set for every command in the environment) do not apply
    servers = (bootstrap_servers or "").strip()
    if not servers:
        raise UsageError("--source kafka needs --bootstrap-servers HOST:PORT")
    check_bootstrap(servers, "--bootstrap-servers")
    for flag, topic in (("--quotes-topic", quotes_topic), ("--orders-topic", orders_topic)):
        check_topic_name(topic, flag)
    if quotes_topic == orders_topic:
        raise UsageError("--quotes-topic and --orders-topic must differ")
    if max_records_per_batch is not None and max_records_per_batch < 1:
        raise UsageError("--max-records-per-batch must be at least 1")
    return KafkaSettings(servers, quotes_topic, orders_topic, starting_offsets, max_records_per_batch)


def check_bootstrap(servers: str, flag: str) -> None:
    for part in servers.split(","):
        host, _, port = part.strip().rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(f"{flag} must be HOST:PORT[,HOST:PORT...], got {servers!r}")


def check_topic_name(topic: str, flag: str) -> None:
    """Kafka's own rule: 1-249 characters of [a-zA-Z0-9._-], not '.' or '..'."""
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", topic or "") or topic in (".", ".."):
        raise UsageError(f"{flag} is not a valid Kafka topic name: {topic!r}")


def kafka_jars() -> list[str]:
    """Spark's Kafka connector JARs (`make setup` fetched them); UsageError saying what to do if they are missing."""
    # Imported here: runtime.spark loads pyspark, and `market-spread --help` imports this module.
    from market_spread.runtime.spark import MissingJars, cached_jars

    try:
        return cached_jars("MARKET_SPREAD_KAFKA_JARS", "kafka-jars", "spark-sql-kafka-", "Spark Kafka connector")
    except MissingJars as exc:
        raise UsageError(str(exc)) from None


def session_conf() -> dict[str, str]:
    """Extra SparkSession settings for a Kafka stream: the session's JARs plus the connector's.

    Only a Kafka stream pays for the connector's JARs; file streams start exactly as before.
    """
    from market_spread.runtime.spark import session_jars  # here: it loads pyspark

    return {"spark.jars": ",".join(session_jars() + kafka_jars())}


def missing_topics(settings: KafkaSettings, timeout: float = 30.0) -> list[str]:
    """Topics of `settings` the brokers do not have; ConnectionError when no broker answers."""
    return absent_topics(settings.bootstrap_servers, list(settings.topics()), timeout)


def absent_topics(bootstrap: str, topics: list[str], timeout: float) -> list[str]:
    """Those of `topics` the brokers at `bootstrap` do not have; ConnectionError when no broker
    answers within `timeout`."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    try:
        metadata = AdminClient(client_conf(bootstrap)).list_topics(timeout=timeout)
    except KafkaException as exc:
        raise ConnectionError(
            f"no Kafka broker answered at {bootstrap} within {timeout:.0f}s ({exc.args[0].str()})"
        ) from None
    return [t for t in topics if t not in metadata.topics]


def client_conf(bootstrap: str) -> dict:
    """confluent-kafka settings shared by our admin clients and producers; librdkafka's own log lines
    (connection refused while a broker restarts...) go to a silent logger, our messages say enough."""
    logger = logging.getLogger("market_spread.kafka_client")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
        logger.propagate = False
    return {"bootstrap.servers": bootstrap, "logger": logger}


def checkpoint_source_error(checkpoint: Location, source: str) -> str | None:
    """A message when the checkpoint's last offsets were written by the other source.

    Spark would fail deep inside the query with an assertion; say it plainly instead.
    """
    batches = offset_files(checkpoint)
    if not batches:
        return None
    lines = batches[-1].read_text(encoding="utf-8", errors="replace").splitlines()[2:]
    file_offsets = any('"logOffset"' in line for line in lines)
    if source == "kafka" and file_offsets:
        written_by = "the file source (--source files)"
    elif source == "files" and lines and not file_offsets:
        written_by = "the Kafka source (--source kafka)"
    else:
        return None
    return (
        f"the checkpoint {checkpoint} was written by {written_by}; one checkpoint serves one source. "
        "Give this source its own --checkpoint and lake, or go back to the other source"
    )


def read_feeds(spark, settings: KafkaSettings):
    """The streaming DataFrame of both topics as (stream, value, source_file)."""
    from pyspark.sql import functions as F

    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", settings.bootstrap_servers)
        .option("subscribe", f"{settings.quotes_topic},{settings.orders_topic}")
        .option("startingOffsets", settings.starting_offsets)
        # Records the checkpoint has not read must never vanish silently (retention, re-created topic).
        .option("failOnDataLoss", "true")
        .option("fetchOffset.numRetries", str(OFFSET_RETRIES))
        .option("fetchOffset.retryIntervalMs", "1000")
        .option("kafkaConsumer.pollTimeoutMs", str(POLL_TIMEOUT_MS))
        # A 2 MB record (or larger) is still one record: let the consumer fetch it whole.
        .option("kafka.max.partition.fetch.bytes", str(16 * 1024 * 1024))
        .option("kafka.fetch.max.bytes", str(64 * 1024 * 1024))
        .option("includeHeaders", "false")
        # Each task's consumer ends on a fetch past its range, which the broker holds until new
        # records or fetch.max.wait.ms (Kafka's default 500 ms): with 8 partitions on 2 cores that
        # wait was most of a micro-batch at 1,000 events/s (measured: docs/performance.md, row
        # 'Kafka source: `fetch.max.wait.ms`').
        .option("kafka.fetch.max.wait.ms", str(FETCH_MAX_WAIT_MS))
    )
    if settings.max_records_per_batch:
        reader = reader.option("maxOffsetsPerTrigger", str(settings.max_records_per_batch))
    stream = F.when(F.col("topic") == settings.quotes_topic, F.lit("quotes")).otherwise(F.lit("orders"))
    return reader.load().select(
        stream.alias("stream"),
        F.col("value").cast("string").alias("value"),
        F.concat_ws("/", F.col("topic"), F.col("partition").cast("string"), F.col("offset").cast("string")).alias(
            "source_file"
        ),
    )


def check_kafka(settings: KafkaSettings, timeout: float = 30.0) -> str | None:
    """Before Spark starts: one line saying why the topics cannot be read, or None when they can."""
    try:
        missing = missing_topics(settings, timeout)
    except ConnectionError as exc:
        return str(exc)
    if missing:
        return (
            f"Kafka topic(s) {', '.join(missing)} do not exist on {settings.bootstrap_servers}; create them "
            "(`market-spread generate --kafka` does) or name the right ones with --quotes-topic/--orders-topic"
        )
    return None

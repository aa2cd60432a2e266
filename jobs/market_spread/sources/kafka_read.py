"""A Kafka batch's records read on the driver, from the offset ranges its Spark plan names.

Why: a Kafka batch's records came to the driver through a Spark job (its tasks each opening a
consumer of one partition), the largest phase of a small Kafka batch (measured: docs/performance.md,
row 'a Kafka batch's records read on the driver'). Spark's plan for the batch, which foreachBatch
hands over without running, names each partition's range [from, until) of offsets; the same
records are read here by one consumer the stream keeps, and become the same rows (stream, value,
source_file `topic/partition/offset`) as sources.kafka_source's projection gives.

Certain-or-nothing, like the landing files read on the driver: anything this reader cannot take
exactly as Spark would (a gap in a range's offsets, a record not UTF-8, a broker error, a range not
complete within READ_SECONDS, a plan of another shape) gives None, and Spark's job reads the batch,
with its own rules (failOnDataLoss among them).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame

from market_spread.runtime import spark_jvm
from market_spread.sources.kafka_source import FETCH_MAX_WAIT_MS, KafkaSettings, client_conf

READ_SECONDS = 10.0  # a batch whose records take longer than this to read is read by Spark instead


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int  # the first offset of the batch
    end: int  # past its last

    @property
    def records(self) -> int:
        return self.end - self.start


def offset_ranges(batch_df: DataFrame, leaves: list[spark_jvm.Leaf] | None = None) -> list[OffsetRange] | None:
    """The Kafka offset ranges a foreachBatch batch reads (from its `leaves`, when the caller has
    them); None for any other source or shape."""
    found = spark_jvm.kafka_offset_ranges(spark_jvm.batch_leaves(batch_df) if leaves is None else leaves)
    return None if found is None else [OffsetRange(*r) for r in found]


class KafkaReader:
    """Reads batches' offset ranges with one consumer, kept for the stream's life (`close`),
    assigned the batch's partitions for its read only: kept assigned, it fetched every
    fetch.max.wait.ms between batches, and the broker answered, on the stream's cores."""

    def __init__(self, settings: KafkaSettings) -> None:
        self.settings = settings
        self.feeds = settings.topics()
        self._consumer: Any = None

    def _open(self) -> Any:
        from confluent_kafka import Consumer

        if self._consumer is None:
            self._consumer = Consumer(
                {
                    **client_conf(self.settings.bootstrap_servers),
                    "group.id": f"market-spread-driver-{uuid.uuid4().hex}",  # assigned, never committed
                    "enable.auto.commit": False,
                    "isolation.level": "read_uncommitted",  # as Spark's Kafka source reads
                    "fetch.wait.max.ms": FETCH_MAX_WAIT_MS,
                    "max.partition.fetch.bytes": 16 * 1024 * 1024,
                    "fetch.max.bytes": 64 * 1024 * 1024,
                }
            )
        return self._consumer

    def read(self, batch_df: DataFrame, limit: int, leaves: list[spark_jvm.Leaf] | None = None) -> pa.Table | None:
        """The batch's records as rows (stream, value, source_file); None: Spark reads it (another
        source, more than `limit` records, or anything read_ranges cannot take). `leaves`: the
        batch's spark_jvm.batch_leaves, when the caller has them."""
        ranges = offset_ranges(batch_df, leaves)
        if ranges is None or sum(r.records for r in ranges) > limit:
            return None
        return self.read_ranges([r for r in ranges if r.records > 0])

    def read_ranges(self, ranges: list[OffsetRange]) -> pa.Table | None:
        from confluent_kafka import TopicPartition

        rows: dict[str, list] = {"stream": [], "value": [], "source_file": []}
        if ranges:
            consumer = self._open()
            consumer.assign([TopicPartition(r.topic, r.partition, r.start) for r in ranges])
            try:
                if not self._consume(consumer, {(r.topic, r.partition): r for r in ranges}, rows):
                    return None
            finally:
                consumer.unassign()
        return pa.table(
            {
                "stream": pa.array(rows["stream"], pa.string()),
                "value": pa.array(rows["value"], pa.string()),
                "source_file": pa.array(rows["source_file"], pa.string()),
            }
        )

    def _consume(self, consumer: Any, left: dict[tuple[str, int], OffsetRange], rows: dict[str, list]) -> bool:
        """Each range's records in offset order into `rows`; False when one cannot be taken exactly."""
        expected = {key: r.start for key, r in left.items()}
        deadline = time.monotonic() + READ_SECONDS
        while left and time.monotonic() < deadline:
            # consume() returns once it has this many records, or at its timeout: ask for exactly
            # what the ranges still lack, so that it does not wait out the timeout for more.
            missing = sum(left[k].end - expected[k] for k in left)
            for msg in consumer.consume(num_messages=min(missing, 10_000), timeout=0.1):
                if msg.error() is not None:
                    return False
                key = (msg.topic(), msg.partition())
                if key not in left or msg.offset() < expected[key]:
                    continue  # a range already complete, or a record fetched twice
                if msg.offset() != expected[key]:
                    return False  # a gap (records gone, a transaction's marker): Spark's rules decide
                value = msg.value()
                try:
                    text = None if value is None else value.decode("utf-8")
                except UnicodeDecodeError:
                    return False
                rows["stream"].append(self.feeds[key[0]])
                rows["value"].append(text)
                rows["source_file"].append(f"{key[0]}/{key[1]}/{msg.offset()}")
                expected[key] = msg.offset() + 1
                if expected[key] >= left[key].end:
                    del left[key]
        return not left

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

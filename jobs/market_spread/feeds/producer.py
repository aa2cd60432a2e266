"""Writing the feeds to Kafka instead of landing files (`generate --kafka`, `replay --kafka`).

Each landing line becomes one record of the feed's topic, keyed by its symbol (so a symbol's
records stay in order within one partition). The producer is idempotent with acks=all, and every
"file" (a chunk of lines) is flushed before the next one is sent: quotes written before orders are
acknowledged before those orders exist, which is what "a quote lands no later than the orders it
affects" means on Kafka (contract 3b, 5.2).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from market_spread.errors import UsageError
from market_spread.sources.kafka_source import (
    DEFAULT_ORDERS_TOPIC,
    DEFAULT_QUOTES_TOPIC,
    check_bootstrap,
    check_topic_name,
    client_conf,
)

DEFAULT_PARTITIONS = 4
MAX_MESSAGE_BYTES = 8 * 1024 * 1024  # the broker's message.max.bytes (broker.py)
_SYMBOL = re.compile(r'"symbol"\s*:\s*"((?:[^"\\]|\\.)*)"')


def key_of(line: str) -> bytes | None:
    """The record key: the line's symbol, or None when the line has none (it is still sent, and
    the stream quarantines it). A regex, not a JSON parse: this runs for every record."""
    match = _SYMBOL.search(line)
    if not match:
        return None
    try:
        return json.loads(f'"{match.group(1)}"').encode("utf-8")
    except ValueError:
        return None


class KafkaSink:
    """`sink(feed, name, lines)`: sends one chunk of landing lines to the feed's topic and waits
    until the broker has acknowledged all of them (the Kafka counterpart of an atomic file rename)."""

    def __init__(
        self,
        bootstrap: str,
        quotes_topic: str = DEFAULT_QUOTES_TOPIC,
        orders_topic: str = DEFAULT_ORDERS_TOPIC,
        partitions: int = DEFAULT_PARTITIONS,
        create_topics: bool = True,
    ) -> None:
        from confluent_kafka import Producer

        self.bootstrap = bootstrap
        self.topics = {"quotes": quotes_topic, "orders": orders_topic}
        if create_topics:
            ensure_topics(bootstrap, list(self.topics.values()), partitions)
        self.producer = Producer(
            {
                **client_conf(bootstrap),
                "acks": "all",
                "enable.idempotence": True,  # a retried send never doubles a record
                "linger.ms": 5,
                "message.max.bytes": MAX_MESSAGE_BYTES,
                "queue.buffering.max.kbytes": 256 * 1024,
            }
        )
        self.sent = 0
        self.errors: list[str] = []

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self.errors.append(f"{msg.topic()}: {err.str()}")

    def __call__(self, feed: str, name: str, lines: list[str]) -> None:
        topic = self.topics[feed]
        for line in lines:
            while True:
                try:
                    self.producer.produce(
                        topic, value=line.encode("utf-8"), key=key_of(line), on_delivery=self._delivered
                    )
                    break
                except BufferError:  # the local queue is full: let it drain
                    self.producer.poll(0.1)
            self.producer.poll(0)
        self.flush()
        self.sent += len(lines)

    def send_tracked(self, feed: str, lines: list[str]) -> list[str]:
        """Like a call, but returns where each record went, as `topic/partition/offset` (the stream's
        source_file): for the benchmark, which follows records to their batch."""
        where: list[str] = []

        def report(err, msg) -> None:
            if err is None:
                where.append(f"{msg.topic()}/{msg.partition()}/{msg.offset()}")
            else:
                self.errors.append(f"{msg.topic()}: {err.str()}")

        topic = self.topics[feed]
        for line in lines:
            while True:
                try:
                    self.producer.produce(topic, value=line.encode("utf-8"), key=key_of(line), on_delivery=report)
                    break
                except BufferError:
                    self.producer.poll(0.1)
            self.producer.poll(0)
        self.flush()
        self.sent += len(lines)
        return where

    def flush(self, timeout: float = 300.0) -> None:
        left = self.producer.flush(timeout)
        if left or self.errors:
            detail = self.errors[0] if self.errors else f"{left} record(s) not acknowledged after {timeout:.0f}s"
            raise ConnectionError(f"Kafka at {self.bootstrap} did not take the records: {detail}")


def ensure_topics(
    bootstrap: str, topics: list[str], partitions: int = DEFAULT_PARTITIONS, timeout: float = 30.0
) -> list[str]:
    """Create the topics that do not exist yet; returns those it created."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(client_conf(bootstrap))
    try:
        existing = admin.list_topics(timeout=timeout).topics
    except KafkaException as exc:
        raise ConnectionError(
            f"no Kafka broker answered at {bootstrap} within {timeout:.0f}s ({exc.args[0].str()})"
        ) from None
    wanted = [t for t in topics if t not in existing]
    if not wanted:
        return []
    futures = admin.create_topics(
        [
            NewTopic(
                t, num_partitions=partitions, replication_factor=1, config={"max.message.bytes": str(MAX_MESSAGE_BYTES)}
            )
            for t in wanted
        ],
        operation_timeout=timeout,
    )
    for topic, future in futures.items():
        try:
            future.result()
        except KafkaException as exc:
            if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":  # a concurrent producer made it first
                raise ConnectionError(f"could not create Kafka topic {topic}: {exc.args[0].str()}") from None
    return wanted


@dataclass(frozen=True)
class KafkaTarget:
    """Where `generate --kafka` and `replay --kafka` write: the brokers and the feeds' topics."""

    bootstrap: str  # HOST:PORT[,HOST:PORT...]
    quotes_topic: str = DEFAULT_QUOTES_TOPIC
    orders_topic: str = DEFAULT_ORDERS_TOPIC
    partitions: int = DEFAULT_PARTITIONS  # of the topics it creates

    @property
    def label(self) -> str:
        return f"Kafka {self.bootstrap} (topics {self.quotes_topic}, {self.orders_topic})"


def open_sink(target: KafkaTarget | None) -> KafkaSink | None:
    """The Kafka sink of `generate`/`replay`, None when writing landing files; UsageError for bad
    settings, ConnectionError when no broker answers."""
    if target is None:
        return None
    check_bootstrap(target.bootstrap, "--kafka")
    for flag, topic in (("--quotes-topic", target.quotes_topic), ("--orders-topic", target.orders_topic)):
        check_topic_name(topic, flag)
    if target.quotes_topic == target.orders_topic:
        raise UsageError("--quotes-topic and --orders-topic must differ")
    if target.partitions < 1:
        raise UsageError("--partitions must be at least 1")
    return KafkaSink(target.bootstrap, target.quotes_topic, target.orders_topic, target.partitions)

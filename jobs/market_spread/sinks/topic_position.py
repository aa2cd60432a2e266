"""The alerts topic's Kafka transactions: records and the published position, committed together.

The position (the last batch whose alerts are in the topic) is the consumer-group offset of the
topic's partition 0 for a group named after the transactional id, committed with
`send_offsets_to_transaction` inside the same transaction as the batch's records: both land, or
neither. A position kept anywhere else (the lake) would repeat or skip a batch after a crash
between the two writes. Opening the producer (`init_transactions`) aborts whatever transaction a
killed stream left open and fences it, so the position read after it is the committed one.
The group never consumes; it only holds the offset (Kafka keeps an idle group's offsets for
`offsets.retention.minutes`, 7 days by default: `REFRESH_SECONDS` re-commits it well within that)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from market_spread.sinks.alert_records import Record
from market_spread.sources.kafka_source import absent_topics, client_conf

POSITION_PARTITION = 0
NONE_PUBLISHED = -1
TRANSACTION_SECONDS = 15.0  # a transaction not committed by then is aborted (by the broker, or here)
REFRESH_SECONDS = 24 * 3600.0  # an idle stream re-commits its position this often (see above)
T = TypeVar("T")


def bounded(call: Callable[[], T], seconds: float) -> T:
    """`call()` on a thread of its own, given up after `seconds` (TimeoutError). librdkafka's
    transactional calls can block past their own timeouts when the group coordinator went away and
    came back (confluentinc/librdkafka#5456, #5511: `send_offsets_to_transaction` hung for minutes
    after the broker restarted). A call given up is left to its thread: its producer is dropped,
    and the next one's `init_transactions` fences it, so it can commit nothing any more."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append((True, call()))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            box.append((False, exc))

    worker = threading.Thread(target=run, name="market-spread-alerts-kafka", daemon=True)
    worker.start()
    worker.join(seconds)
    if not box:
        raise TimeoutError(f"the Kafka call did not return within {seconds:.0f}s")
    ok, value = box[0]
    if not ok:
        raise value
    return value


class TopicTransactions:
    """The transactional producer of one alerts topic, and the position it has published through."""

    def __init__(self, bootstrap: str, topic: str, transactional_id: str, timeout: float = 10.0) -> None:
        self.bootstrap, self.topic, self.id, self.timeout = bootstrap, topic, transactional_id, timeout
        self._producer: Any = None
        self._group: Any = None
        self.committed_at = 0.0  # monotonic time of the last transaction committed

    @property
    def open(self) -> bool:
        return self._producer is not None

    def due_refresh(self) -> bool:
        """Whether the position has gone REFRESH_SECONDS without a commit (see the module docstring)."""
        return time.monotonic() - self.committed_at > REFRESH_SECONDS

    def start(self) -> int:
        """Open the producer (fencing and aborting a predecessor's transaction) and return the last
        batch published (NONE_PUBLISHED: none). Raises KafkaException or TimeoutError while no
        broker answers."""
        self.reset()
        # Taken on only once the call has returned: a start given up must leave nothing behind.
        self._producer, self._group, position = bounded(self._open, 3 * self.timeout)
        self.committed_at = time.monotonic()
        return position

    def _open(self) -> tuple[Any, Any, int]:
        from confluent_kafka import Consumer, Producer

        producer = Producer(
            {
                **client_conf(self.bootstrap),
                "transactional.id": self.id,
                "partitioner": "murmur2_random",  # where Java clients place a key
                "linger.ms": 1,
                # A call into a transaction retries until the transaction's own timeout, whatever
                # the call's: bounded here, so that a broker outage is said, and counted, in seconds.
                "transaction.timeout.ms": int(TRANSACTION_SECONDS * 1000),
                "message.timeout.ms": int(TRANSACTION_SECONDS * 1000),
            }
        )
        producer.init_transactions(self.timeout)
        group = Consumer(
            {
                **client_conf(self.bootstrap),
                "group.id": self.id,
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        return producer, group, self._position(group)

    def _position(self, group: Any) -> int:
        from confluent_kafka import KafkaException, TopicPartition

        deadline = time.monotonic() + self.timeout
        while True:  # a broker just started answers "coordinator loading" for a moment
            try:
                (found,) = group.committed([TopicPartition(self.topic, POSITION_PARTITION)], self.timeout)
                return found.offset - 1 if found.offset >= 0 else NONE_PUBLISHED
            except KafkaException as exc:
                if not exc.args[0].retriable() and exc.args[0].name() != "NOT_COORDINATOR":
                    raise
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def publish(self, records: list[Record], through: int) -> None:
        """`records` and the position `through` (a batch id) in one transaction. Any failure leaves
        the producer closed: `start` again, and read the position, before the next try (a commit
        whose answer was lost may have landed)."""
        producer, group = self._producer, self._group
        try:
            bounded(lambda: self._transaction(producer, group, records, through), TRANSACTION_SECONDS + self.timeout)
        except BaseException:
            self.reset()
            raise
        self.committed_at = time.monotonic()

    def _transaction(self, producer: Any, group: Any, records: list[Record], through: int) -> None:
        from confluent_kafka import TopicPartition

        producer.begin_transaction()
        for record in records:
            self._produce(producer, record)
        offsets = [TopicPartition(self.topic, POSITION_PARTITION, through + 1)]
        producer.send_offsets_to_transaction(offsets, group.consumer_group_metadata(), self.timeout)
        producer.commit_transaction(self.timeout)

    def _produce(self, producer: Any, record: Record) -> None:
        while True:
            try:
                producer.produce(self.topic, key=record.key, value=record.value, headers=record.headers)
                return
            except BufferError:  # the local queue is full: let it drain
                producer.poll(0.1)

    def reset(self) -> None:
        """Drop the producer (a successor's `init_transactions` aborts what it left open). Let go of
        on a thread of its own: librdkafka's clean-up may wait for a broker that is away."""
        held = [self._producer, self._group]
        self._producer = self._group = None
        threading.Thread(target=_let_go, args=(held,), name="market-spread-alerts-close", daemon=True).start()


def _let_go(held: list[Any]) -> None:
    group = held[1]
    held.clear()
    if group is not None:
        try:
            group.close()
        except Exception:  # noqa: BLE001,S110 - closing a consumer that never joined: nothing to lose
            pass


def topic_exists(bootstrap: str, topic: str, timeout: float) -> bool | None:
    """Whether the cluster has `topic`; None when no broker answered within `timeout`."""
    try:
        return not absent_topics(bootstrap, [topic], timeout)
    except ConnectionError:
        return None

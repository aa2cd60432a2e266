"""The alerts topic as a user's `read_committed` consumer sees it, and the alerts table it must
equal (contract 4b), each alert formatted here on its own terms: the test's oracle, not the
product's formatter."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from deltalake import DeltaTable


@dataclass(frozen=True)
class Seen:
    key: bytes
    value: dict[str, Any]
    headers: dict[str, bytes]
    partition: int


def murmur2(data: bytes) -> int:
    """Kafka's Java `Utils.murmur2` (unsigned 32 bits), which places a keyed record."""
    m, h = 0x5BD1E995, (0x9747B28C ^ len(data)) & 0xFFFFFFFF
    whole = len(data) // 4 * 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        h = ((h * m) & 0xFFFFFFFF) ^ ((k * m) & 0xFFFFFFFF)
    tail = data[whole:]
    if len(tail) == 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h = ((h ^ tail[0]) * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    return h ^ (h >> 15)


def java_partition(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def read_topic(bootstrap: str, topic: str, at_least: int, timeout: float = 120.0, quiet: float = 2.0) -> list[Seen]:
    """Every record a read_committed consumer finds, once `at_least` arrived and `quiet` seconds
    passed without another (a doubled record would arrive in them)."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-reader-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([topic])
    seen: list[Seen] = []
    deadline, last = time.monotonic() + timeout, time.monotonic()
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                seen.append(Seen(msg.key(), json.loads(msg.value()), dict(msg.headers() or []), msg.partition()))
                last = time.monotonic()
            elif len(seen) >= at_least and time.monotonic() - last >= quiet:
                break
    finally:
        consumer.close()
    return seen


def as_record(row: dict[str, Any]) -> str:
    """A table row as the contract says its record's value reads, canonical JSON for counting."""

    def text(value: Any) -> Any:
        if isinstance(value, Decimal):
            return str(value)  # every digit of the column's scale, as stored
        if isinstance(value, datetime):
            return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return value

    return json.dumps({k: text(v) for k, v in row.items()}, sort_keys=True)


def table_records(lake: Path) -> Counter[str]:
    return Counter(as_record(r) for r in DeltaTable(str(lake / "alerts")).to_pyarrow_table().to_pylist())


def assert_topic_is_the_table(bootstrap: str, topic: str, lake: Path, partitions: int, timeout: float = 120.0) -> int:
    """Each alert row of the table exactly once in the topic, under its symbol's key, its batch in
    the header, in the partition a Java client picks; returns how many."""
    want = table_records(lake)
    seen = read_topic(bootstrap, topic, sum(want.values()), timeout)
    got = Counter(json.dumps(s.value, sort_keys=True) for s in seen)
    assert got == want, f"topic vs table: {sum((got - want).values())} extra, {sum((want - got).values())} missing"
    for s in seen:
        assert s.key == s.value["symbol"].encode("utf-8")
        assert s.headers["batch_id"] == str(s.value["batch_id"]).encode("ascii")
        assert s.partition == java_partition(s.key, partitions)
    assert list(seen[0].value) == list(DeltaTable(str(lake / "alerts")).schema().to_arrow().names)
    return len(seen)

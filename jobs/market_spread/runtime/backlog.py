"""The input waiting for the stream, read from outside it: landing files no committed batch has
taken, or Kafka records past the offsets of the checkpoint's last committed batch.

Shared by the stream's own metrics (observation.metrics), the supervisor's stall check and the Airflow
UI's Stream page, so that all three count the same thing. Input of the batch in flight counts as
waiting until that batch commits: a batch that hangs leaves its input waiting. Standard library
only at import (confluent_kafka is imported when a Kafka probe is made).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

from market_spread.errors import MarketSpreadError
from market_spread.runtime.storage import Location, S3Path, list_names

FEEDS = ("quotes", "orders")


class BacklogUnknown(MarketSpreadError):
    """The waiting input could not be read (a broker out of reach, an unreadable checkpoint)."""


@dataclass(frozen=True)
class Waiting:
    """Input not yet committed by a batch: how much (files or records), since when, and per feed
    folder or topic."""

    count: int
    unit: str  # "files" or "records"
    oldest: float | None = None  # unix time the oldest of it landed or was produced (None: none, or not asked)
    parts: dict[str, int] = field(default_factory=dict)

    def age(self, now: float | None = None) -> float:
        """Seconds the oldest waiting input has waited (0 when none)."""
        if not self.count or self.oldest is None:
            return 0.0
        return max(0.0, (time.time() if now is None else now) - self.oldest)


def _landed(name: str) -> bool:
    """A name the stream's file source reads (`*.jsonl`; Spark skips names starting with . or _)."""
    return name.endswith(".jsonl") and not name.startswith((".", "_"))


def _stamps(folder: Location) -> list[float]:
    """Modification times of the landing files directly in `folder` (none when it is missing)."""
    if isinstance(folder, S3Path):
        return [
            info.modified.timestamp() for obj, info in folder.listing() if obj.parent == folder and _landed(obj.name)
        ]
    stamps = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if _landed(entry.name):
                    with contextlib.suppress(OSError):  # a file archived or renamed meanwhile
                        stamps.append(entry.stat().st_mtime)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return stamps


def landing_waiting(landing: Location, since: float) -> Waiting:
    """The landing files modified after `since` (the start of the last committed batch: every file
    older than that was listed by it or an earlier one)."""
    parts, oldest = {}, None
    for feed in FEEDS:
        newer = [t for t in _stamps(landing / feed) if t > since]
        parts[feed] = len(newer)
        if newer:
            oldest = min(newer) if oldest is None else min(oldest, *newer)
    return Waiting(sum(parts.values()), "files", oldest, parts)


def numbered(folder: Location) -> list[int]:
    """The batch numbers a checkpoint folder (`offsets`, `commits`) holds, in order (none when missing)."""
    try:
        names = list_names(folder) or []
    except OSError:
        return []
    return sorted(int(n) for n in names if n.isdigit())


def committed_kafka_offsets(checkpoint: Location) -> dict[str, int]:
    """`topic/partition` -> the next offset a batch takes, from the offsets file of the checkpoint's
    newest batch with a commit mark ({} before the first). Spark writes `offsets/N` (a version line,
    the batch's metadata, then one line per source: {"topic": {"partition": end offset}}) before
    batch N runs, and `commits/N` once it is done."""
    commits = numbered(checkpoint / "commits")
    if not commits:
        return {}
    try:
        lines = (checkpoint / "offsets" / str(commits[-1])).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise BacklogUnknown(f"cannot read the checkpoint's offsets: {exc}") from None
    found: dict[str, int] = {}
    for line in lines[2:]:
        with contextlib.suppress(ValueError):
            source = json.loads(line)
            for topic, partitions in source.items() if isinstance(source, dict) else ():
                for partition, offset in partitions.items() if isinstance(partitions, dict) else ():
                    found[f"{topic}/{partition}"] = int(offset)
    return found


class KafkaProbe:
    """A Kafka client that asks for end offsets and the timestamps of given records; it joins no
    consumer group and commits nothing."""

    def __init__(self, bootstrap_servers: str, timeout: float = 5.0) -> None:
        self.servers, self.timeout = bootstrap_servers, timeout
        self._consumer: Any = None

    def _client(self) -> Any:
        if self._consumer is None:
            from confluent_kafka import Consumer

            self._consumer = Consumer(
                {
                    "bootstrap.servers": self.servers,
                    "group.id": "market-spread-probe",
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    "fetch.wait.max.ms": 50,
                    "queued.max.messages.kbytes": 1024,
                    # Its own connection errors are not logged: callers say them once (BacklogUnknown).
                    "log_level": 2,
                    "log.connection.close": False,
                }
            )
        return self._consumer

    def end_offsets(self, topics: tuple[str, ...]) -> dict[str, tuple[int, int]]:
        """`topic/partition` -> (low, high) watermarks of every partition of `topics`."""
        from confluent_kafka import KafkaException, TopicPartition

        consumer = self._client()
        found: dict[str, tuple[int, int]] = {}
        try:
            for topic in topics:
                meta = consumer.list_topics(topic, timeout=self.timeout).topics.get(topic)
                if meta is None or meta.error is not None:
                    raise BacklogUnknown(f"Kafka topic {topic} is not readable on {self.servers}")
                for partition in sorted(meta.partitions):
                    found[f"{topic}/{partition}"] = consumer.get_watermark_offsets(
                        TopicPartition(topic, partition), timeout=self.timeout, cached=False
                    )
        except KafkaException as exc:
            raise BacklogUnknown(f"Kafka at {self.servers}: {exc.args[0] if exc.args else exc}") from None
        return found

    def timestamps(self, offsets: dict[str, int]) -> dict[str, float]:
        """`topic/partition` -> unix time of the record at that offset (or the next one there),
        for the records that arrive within the timeout; records without a timestamp are left out."""
        from confluent_kafka import KafkaException, TopicPartition

        if not offsets:
            return {}
        consumer = self._client()
        found: dict[str, float] = {}
        wanted = {key: (key.rsplit("/", 1)[0], int(key.rsplit("/", 1)[1])) for key in offsets}
        deadline = time.monotonic() + self.timeout
        try:
            consumer.assign([TopicPartition(t, p, offsets[key]) for key, (t, p) in wanted.items()])
            while len(found) < len(wanted) and time.monotonic() < deadline:
                message = consumer.poll(0.2)
                if message is None or message.error() is not None:
                    continue
                key = f"{message.topic()}/{message.partition()}"
                kind, stamp = message.timestamp()
                if key in wanted and key not in found and kind != 0 and stamp > 0:
                    found[key] = stamp / 1000.0
            consumer.unassign()
        except KafkaException as exc:
            raise BacklogUnknown(f"Kafka at {self.servers}: {exc.args[0] if exc.args else exc}") from None
        return found

    def close(self) -> None:
        if self._consumer is not None:
            with contextlib.suppress(Exception):
                self._consumer.close()
            self._consumer = None


def kafka_waiting(probe: KafkaProbe, checkpoint: Location, topics: tuple[str, ...], oldest: bool = True) -> Waiting:
    """The records of `topics` past the checkpoint's committed offsets (a partition no batch has
    read yet counts from its first record); with `oldest`, the timestamp of the oldest of them.
    BacklogUnknown when the broker or the checkpoint cannot be read."""
    committed = committed_kafka_offsets(checkpoint)
    parts: dict[str, int] = {topic: 0 for topic in topics}
    first_waiting: dict[str, int] = {}
    for key, (low, high) in probe.end_offsets(topics).items():
        start = max(committed.get(key, low), low)
        if high > start:
            parts[key.rsplit("/", 1)[0]] += high - start
            first_waiting[key] = start
    stamps = probe.timestamps(first_waiting) if oldest and first_waiting else {}
    return Waiting(sum(parts.values()), "records", min(stamps.values(), default=None), parts)

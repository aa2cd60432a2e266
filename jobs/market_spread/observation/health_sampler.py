"""The stream's sampler thread: off the batches' path, it measures each committed batch's end-to-end
latency (landing files' modification times, or its oldest Kafka record per partition, to the
commit), samples the input waiting every few seconds, sets the metrics' gauges and rewrites the
health record (runtime.stream_health) that the Airflow UI's Stream page reads.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from market_spread.observation.metrics import StreamMetrics, serve
from market_spread.runtime.backlog import KafkaProbe, Waiting, committed_kafka_offsets, kafka_waiting, landing_waiting
from market_spread.runtime.processes import this_host
from market_spread.runtime.storage import Location, S3Path, location
from market_spread.runtime.stream_health import MinuteSeries, read_health, write_health

MAX_FILES_MEASURED = 100  # per batch: a catch-up batch of thousands of files is sampled, not stat'ed whole
MAX_KAFKA_PENDING = 10  # batches whose Kafka timestamps are still asked for when the probe falls behind


@dataclass(frozen=True)
class StreamPlace:
    """What the sampler watches: the lake (where the record goes), the checkpoint and the input."""

    lake: Location
    checkpoint: Location
    source: str  # "files" or "kafka"
    input_label: str  # the landing folder, or the Kafka servers and topics
    landing: Location | None = None
    archive: Location | None = None
    bootstrap_servers: str | None = None
    topics: tuple[str, ...] = ()


@dataclass(frozen=True)
class Committed:
    """What the sampler needs of one committed batch."""

    batch_id: int
    started_at: float  # unix time
    committed_at: float
    files: tuple[str, ...] = ()
    last_offsets: dict[str, int] = field(default_factory=dict)
    writers: dict[str, tuple[str, str]] = field(default_factory=dict)  # table -> (library, why)


class HealthSampler(threading.Thread):
    """See the module docstring. `submit` never blocks a batch; `close` writes the record once more."""

    def __init__(
        self,
        metrics: StreamMetrics,
        place: StreamPlace,
        endpoint: str | None = None,
        endpoint_note: str | None = None,
        every: float = 5.0,
        topic_status: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(name="market-spread-health", daemon=True)
        self.metrics, self.place, self.endpoint, self.every = metrics, place, endpoint, every
        self.endpoint_note = endpoint_note or endpoint  # the URL, or why there is none
        self.topic_status = topic_status  # the alerts topic's publisher, when the stream has one
        self.pending: queue.Queue[Committed] = queue.Queue(maxsize=1000)
        self.closing = threading.Event()
        self.probe = (
            KafkaProbe(place.bootstrap_servers) if place.source == "kafka" and place.bootstrap_servers else None
        )
        self.started = time.time()
        previous = read_health(place.lake)
        self.series = MinuteSeries.from_rows(previous.get("minutes"))
        self.last_batch: dict[str, Any] | None = previous.get("last_batch")
        self.writers: dict[str, Any] = previous.get("writers") or {}
        self.backlog: dict[str, Any] = {}
        self.next_offsets: dict[str, int] | None = None  # Kafka: where each partition's next batch begins
        self.warned: set[str] = set()

    def submit(self, item: Committed) -> None:
        try:
            self.pending.put_nowait(item)
        except queue.Full:  # the sampler is far behind: this batch's latency goes unmeasured
            pass

    def close(self, timeout: float = 10.0) -> None:
        self.closing.set()
        if self.is_alive():
            self.join(timeout)
        if not self.is_alive():  # the last batches measured; the record says how the stream left its input
            self._guarded("latency", lambda: self._measure(self._take(0.0)))
            self._guarded("backlog", self._sample)
        self._guarded("health record", self._write)
        if self.probe is not None:
            self.probe.close()

    def run(self) -> None:
        next_sample = time.monotonic()
        while not self.closing.is_set():
            items = self._take(max(0.0, next_sample - time.monotonic()))
            if items:
                self._guarded("latency", lambda items=items: self._measure(items))
            if time.monotonic() >= next_sample:
                self._guarded("backlog", self._sample)
                self._guarded("health record", self._write)
                next_sample = time.monotonic() + self.every

    def _take(self, wait: float) -> list[Committed]:
        try:
            items = [self.pending.get(timeout=min(wait, 1.0))]
        except queue.Empty:
            return []
        while True:
            try:
                items.append(self.pending.get_nowait())
            except queue.Empty:
                return items

    def _guarded(self, what: str, step) -> None:
        """Run a step; its failure is said once (per message) and never stops the sampler or the stream."""
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - see the docstring
            text = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            if what == "backlog":
                self.backlog = {"error": text, "at": time.time()}
            if text not in self.warned:
                self.warned.add(text)
                print(f"market-spread stream: warning: metrics ({what}): {text}", file=sys.stderr, flush=True)

    def _measure(self, items: list[Committed]) -> None:
        if not items:
            return
        last = items[-1]
        self.last_batch = {"batch_id": last.batch_id, "started_at": last.started_at, "committed_at": last.committed_at}
        if last.writers:
            self.writers = {table: {"writer": w, "why": why} for table, (w, why) in last.writers.items()}
        if self.probe is not None:
            self._measure_kafka(items)
            return
        for item in items:
            for name in item.files[:MAX_FILES_MEASURED]:
                landed = self._landed_at(name)
                if landed is not None:
                    self._observe(item.committed_at, item.committed_at - landed)

    def _observe(self, committed_at: float, seconds: float) -> None:
        self.metrics.latency.observe(max(0.0, seconds))
        self.series.add_latency(committed_at, seconds)

    def _landed_at(self, name: str) -> float | None:
        """A landing file's modification time; where --archive moved it already, the archived copy's."""
        place = location(name) if name.startswith(("s3://", "s3a://")) else Path(unquote(name.removeprefix("file:")))
        candidates = [place]
        if isinstance(self.place.archive, Path) and not isinstance(place, S3Path):  # both local (check_spec)
            # Spark's file source archives a file at <sourceArchiveDir = ARCHIVE/feed> + its own path.
            candidates.append(Path(f"{Path(self.place.archive).absolute() / place.parent.name}{place}"))
        for candidate in candidates:
            try:
                if isinstance(candidate, S3Path):
                    return candidate.stat().modified.timestamp()
                return os.stat(candidate).st_mtime
            except (OSError, ValueError):
                continue
        return None

    def _measure_kafka(self, items: list[Committed]) -> None:
        assert self.probe is not None  # called only with a probe (_measure)
        if self.next_offsets is None:
            # Where this process's first batch began: the checkpoint's last committed offsets.
            self.next_offsets = committed_kafka_offsets(self.place.checkpoint)
        for index, item in enumerate(items):
            first = {key: self.next_offsets.get(key, last) for key, last in item.last_offsets.items()}
            self.next_offsets.update({key: last + 1 for key, last in item.last_offsets.items()})
            if index >= len(items) - MAX_KAFKA_PENDING:
                for stamp in self.probe.timestamps(first).values():
                    self._observe(item.committed_at, item.committed_at - stamp)

    def _since(self) -> float:
        """The start of the last committed batch: input older than that was taken by it or before."""
        return float((self.last_batch or {}).get("started_at") or 0.0)

    def _sample(self) -> None:
        place, metrics = self.place, self.metrics
        if self.probe is not None:
            waiting = kafka_waiting(self.probe, place.checkpoint, place.topics)
            for topic, count in waiting.parts.items():
                metrics.kafka_lag.labels(topic).set(count)
        elif place.landing is not None:
            waiting = landing_waiting(place.landing, self._since())
            for feed, count in waiting.parts.items():
                metrics.backlog_files.labels(feed).set(count)
        else:
            return
        now = time.time()
        metrics.waiting.set(waiting.age(now))
        self.series.add_backlog(now, waiting.count)
        self.backlog = _backlog_entry(waiting, now)

    def _topic(self) -> dict[str, Any] | None:
        """The alerts topic's status for the record, its lag set on the gauge (None: no topic)."""
        if self.topic_status is None:
            return None
        status = self.topic_status()
        if self.metrics.unpublished is not None and status.get("unpublished") is not None:
            self.metrics.unpublished.set(status["unpublished"])
        return status

    def _write(self) -> None:
        p = self.place
        write_health(
            p.lake,
            {
                "written_at": time.time(),
                "host": this_host(),
                "pid": os.getpid(),
                "started_at": self.started,
                "source": p.source,
                "input": p.input_label,
                "checkpoint": str(p.checkpoint),
                "metrics_endpoint": self.endpoint,
                "metrics_note": self.endpoint_note,
                "last_batch": self.last_batch,
                "writers": self.writers,
                "backlog": self.backlog,
                "alerts_topic": self._topic(),
                "minutes": self.series.rows(),
            },
        )


def _backlog_entry(waiting: Waiting, now: float) -> dict[str, Any]:
    return {"count": waiting.count, "unit": waiting.unit, "oldest": waiting.oldest, "parts": waiting.parts, "at": now}


class Observer:
    """The stream's `on_batch` callback: the batch counted (a few increments), handed to the sampler,
    then passed on to the progress output (`inner`; default: the batch's progress line). Nothing
    here can fail a batch: a fault in the metrics is said once and the batch carries on."""

    def __init__(
        self,
        place: StreamPlace,
        inner: Callable[[Any], None] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        topic_status: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self.inner = inner or (lambda result: print(result.progress_line(), flush=True))
        self.metrics = StreamMetrics(place.source, alerts_topic=topic_status is not None)
        self.server, said = serve(self.metrics, host, port)
        endpoint = said if self.server is not None else None
        self.sampler = HealthSampler(self.metrics, place, endpoint, said, topic_status=topic_status)
        self.sampler.start()

    def __call__(self, result: Any) -> None:
        try:
            now = time.time()
            if self.metrics.record(result, now):
                self.sampler.submit(
                    Committed(
                        result.batch_id,
                        now - float(result.seconds),
                        now,
                        tuple(result.files),
                        dict(result.last_offsets),
                        dict(getattr(result, "writers", {})),
                    )
                )
        except Exception as exc:  # noqa: BLE001 - see the class docstring
            print(f"market-spread stream: warning: metrics: {exc}", file=sys.stderr, flush=True)
        self.inner(result)

    def close(self) -> None:
        """The last health record written, the endpoint closed."""
        self.sampler.close()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

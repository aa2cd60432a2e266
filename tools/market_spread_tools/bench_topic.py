"""The benchmark's alerts topic part (`--only topic`): landing files at 1,000 events/s into a stream
with `--alerts-topic` on a real broker (`market-spread broker`, free ports), with the CLI's defaults.
In the same run: each file pair's latency from its landing to its batch's last commit (the latency
part's figure) and to the moment a `read_committed` consumer first sees its batch's alerts (issue
67's target: p99 <= 1.0 s). The consumer fetches as a consumer that wants its records at once does
(`fetch.wait.max.ms` 10 ms: librdkafka's default, 500 ms, would be most of the figure)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from market_spread.feeds.producer import ensure_topics
from market_spread.sinks.topic_settings import AlertsTopic
from market_spread_tools.bench_kafka import running_broker
from market_spread_tools.bench_latency import file_latency
from market_spread_tools.bench_measure import bench_symbols, say

RATE = 1_000
TOPIC = "alerts"
PARTITIONS = 4


class TopicWatcher(threading.Thread):
    """A read_committed consumer noting when each batch's records (their `batch_id` header) are first seen."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(name="bench-topic-watcher", daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.visible: dict[int, float] = {}
        self.records = 0
        self.stop = threading.Event()
        self.ready = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "bench-topic-watcher",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 10,
            }
        )
        consumer.subscribe([self.topic], on_assign=lambda *_: self.ready.set())
        try:
            while not self.stop.is_set():
                msg = consumer.poll(0.05)
                if msg is None or msg.error():
                    continue
                now = time.time()
                self.records += 1
                batch = int(dict(msg.headers() or [])["batch_id"] or b"-1")
                self.visible.setdefault(batch, now)
        finally:
            consumer.close()


def topic_latency(spark, work: Path, rate_seconds: float) -> dict:
    """The part's figures: Delta and topic latency at RATE events/s, and the records seen."""
    with running_broker(work / "topic") as broker:
        ensure_topics(broker.bootstrap, [TOPIC], PARTITIONS)
        watcher = TopicWatcher(broker.bootstrap, TOPIC)
        watcher.start()
        watcher.ready.wait(30)
        target = AlertsTopic(broker.bootstrap, TOPIC)
        say(f"alerts topic: {RATE:,} events/s from landing files, alerts published to {TOPIC}")
        figures, latencies, behind = file_latency(
            spark,
            work,
            RATE,
            rate_seconds,
            bench_symbols(3_000),
            name="-topic",
            alerts_topic=target,
            visible=watcher.visible,
        )
        time.sleep(1.0)  # the last batch's records: published before the stream's end, seen just after
        watcher.stop.set()
        watcher.join(10)
    topic = figures.pop("topic")
    delta = {k: figures[k] for k in ("p50", "p95", "p99")}
    say(
        f"alerts topic at {RATE:,}/s: committed p50 {delta['p50']} / p99 {delta['p99']} ms, "
        f"visible in the topic p50 {topic['p50']} / p99 {topic['p99']} ms over {topic['file_pairs']} file pairs "
        f"({watcher.records:,} records)"
        + (f"; {topic['files_behind']} pairs never seen" if topic["files_behind"] else "")
    )
    return {
        "rate": RATE,
        "committed_ms": delta,
        "topic_ms": topic,
        "records": watcher.records,
        "file_pairs": len(latencies),
        "files_behind": behind,
    }

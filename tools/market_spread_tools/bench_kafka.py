"""The benchmark's Kafka row: latency at fixed input rates from a record produced to its alerts
committed, through a real broker (`market-spread broker`, started here on free ports).

Same method as the file source's latency run (bench_latency): a warm-up, then every 0.25 s a tick
of `rate / 4` events (quotes then orders, each chunk acknowledged before the next), for
`rate_seconds`. A tick's latency runs from the moment it is handed to the producer to the end of
the micro-batch that holds its last record (the batch's last commit). Ticks not yet processed when
the run ends count as "behind".
"""
from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from market_spread.errors import UsageError
from market_spread.feeds.broker import BrokerProcess, broker_jars
from market_spread.feeds.generate import Generator
from market_spread.feeds.producer import KafkaSink
from market_spread.stream.kafka_source import KafkaSettings, feed_source, kafka_jars
from market_spread_tools.bench_latency import feed_ticks, latency_figures, warmup_seconds


def broker_available() -> str | None:
    """None when the broker and connector JARs are there, else why the Kafka row is skipped (the
    product's own look-ups, so the bench skips exactly when `broker` or `stream --source kafka` would fail)."""
    try:
        broker_jars()
        kafka_jars()
    except (UsageError, SystemExit) as exc:
        return str(exc)
    return None


class Ticks:
    """Which ticks are through. A partition is read in offset order, so a tick is through once a
    committed batch has taken, in every partition the tick wrote to, an offset at or past the
    tick's last one (a batch may cut a tick in two: its end offsets are read at one instant)."""

    def __init__(self) -> None:
        self.needs: dict[str, dict[str, int]] = {}  # tick -> topic/partition -> its last offset there
        self.taken: dict[str, int] = {}  # topic/partition -> highest offset of a committed batch
        self.produced: dict[str, float] = {}  # tick after the warm-up -> when it was handed over
        self.done: dict[str, float] = {}
        self.warmed = threading.Event()
        self.lock = threading.Lock()

    def _through(self, last_of: dict[str, int]) -> bool:
        """Every partition the tick wrote to has been taken up to its last offset (call under `lock`)."""
        return all(self.taken.get(where, -1) >= offset for where, offset in last_of.items())

    def on_batch(self, result) -> None:
        now = time.time()
        with self.lock:
            for where, last in result.last_offsets.items():
                self.taken[where] = max(last, self.taken.get(where, -1))
            for tick, last_of in self.needs.items():
                if tick not in self.done and self._through(last_of):
                    self.done[tick] = now
        self.warmed.set()

    def sent(self, tick: str, last_of: dict[str, int]) -> None:
        with self.lock:
            self.needs[tick] = last_of
            # A batch may have taken the records before their acknowledgements came back.
            if self._through(last_of):
                self.done[tick] = time.time()

    def all_through(self) -> bool:
        return all(name in self.done for name in self.produced)


def _send(sink, gen, ticks: Ticks, tick: str, count: int) -> float:
    """One tick to the broker, quotes then orders; returns when it was handed over."""
    at = time.time()
    events = gen.events(count // 2, count - count // 2)
    last_of: dict[str, int] = {}
    for feed in ("quotes", "orders"):
        for where in sink.send_tracked(feed, [l for f, _, l in events if f == feed]):
            part, _, offset = where.rpartition("/")
            last_of[part] = max(int(offset), last_of.get(part, -1))
    ticks.sent(tick, last_of)
    return at


def _feed(sink, ticks: Ticks, stop: threading.Event, rate: int, rate_seconds: float, symbols: list[str],
          drain_seconds: float) -> None:
    gen = Generator(symbols, seed=rate, profile="wallaroo", wide_share=0.05, start=datetime.now(timezone.utc))
    _send(sink, gen, ticks, "warm", 100)
    if not ticks.warmed.wait(timeout=300):
        stop.set()
        return
    feed_ticks(lambda name, count: _send(sink, gen, ticks, name, count), lambda n: f"t{n:06d}", rate,
               warmup_seconds(rate_seconds), rate_seconds, ticks.produced)
    ends = time.monotonic() + drain_seconds
    while time.monotonic() < ends and not ticks.all_through():
        time.sleep(0.2)
    stop.set()


def _one_rate(spark, work: Path, bootstrap: str, rate: int, rate_seconds: float, symbols: list[str],
              drain_seconds: float) -> dict:
    from market_spread.stream.query import StreamSpec, start_query, supervise

    settings = KafkaSettings(bootstrap, f"quotes-{rate}", f"orders-{rate}")
    sink = KafkaSink(bootstrap, settings.quotes_topic, settings.orders_topic)
    ticks, stop = Ticks(), threading.Event()
    print(f"bench: kafka latency: {rate:,} events/s for {rate_seconds:.0f}s after a "
          f"{warmup_seconds(rate_seconds):.0f}s warm-up", flush=True)
    feeder = threading.Thread(target=_feed, args=(sink, ticks, stop, rate, rate_seconds, symbols, drain_seconds),
                              daemon=True)
    feeder.start()
    spec = StreamSpec(lake=work / f"kafka-lat{rate}" / "lake", symbols=symbols, available_now=False, interval=0.5,
                      source=feed_source(settings))
    query, busy = start_query(spark, spec, ticks.on_batch)
    supervise(query, busy, stop)
    feeder.join()
    figures, latencies, behind = latency_figures(ticks.produced, ticks.done)
    row = {**figures, "ticks": len(latencies), "ticks_behind": behind}
    print(f"bench: kafka latency at {rate:,}/s: p50 {row['p50']} ms, p95 {row['p95']} ms, "
          f"p99 {row['p99']} ms over {len(latencies)} ticks"
          + (f"; {behind} ticks not yet processed when the run ended" if behind else ""), flush=True)
    return row


def kafka_latency(spark, work: Path, rates: tuple[int, ...], rate_seconds: float, symbols: list[str],
                  drain_seconds: float = 8.0) -> dict:
    """`drain_seconds`: how long the stream may go on after the last tick (as the file source's run:
    8 s); it stops earlier once every tick is through."""
    broker = BrokerProcess(work / "kafka" / "data")
    broker.start()
    try:
        return {str(rate): _one_rate(spark, work, broker.bootstrap, rate, rate_seconds, symbols, drain_seconds)
                for rate in rates}
    finally:
        broker.stop()

"""The benchmark's Kafka row: latency at fixed input rates from a record produced to its alerts
committed, through a real broker (`market-spread broker`, started here on free ports).

Same method as the file source's latency run (bench_latency), the producer in a process of its own
(bench_feeder): a warm-up, then every 0.25 s a tick of `rate / 4` events (quotes then orders, each
chunk acknowledged before the next), for `rate_seconds`. A tick's latency runs from the moment it is handed to the producer to the end of
the micro-batch that holds its last record (the batch's last commit). Ticks not yet processed when
the run ends count as "behind".

Measured with the product's defaults: the stream is started as the product starts it, with
StreamSpec's default trigger (no interval set here). Each tick's latency is also split into where
it went (bench_phases). The broker's start-up (`running_broker`) is shared with bench_idle.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from market_spread.errors import UsageError
from market_spread.feeds.broker import BrokerProcess, broker_jars
from market_spread.feeds.producer import DEFAULT_PARTITIONS, ensure_topics
from market_spread.sources.kafka_source import KafkaSettings, kafka_jars
from market_spread_tools.bench_feeder import Feed, Producer
from market_spread_tools.bench_latency import latency_figures, warmup_seconds
from market_spread_tools.bench_phases import (
    Batches,
    batch_cost,
    batch_times,
    run_batch_times,
    split_figures,
    split_line,
)


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
        self.batch_of: dict[str, int] = {}  # tick -> the batch that took its last record
        self.batches = Batches()
        self.warmed = threading.Event()
        self.lock = threading.Lock()

    def _through(self, last_of: dict[str, int]) -> bool:
        """Every partition the tick wrote to has been taken up to its last offset (call under `lock`)."""
        return all(self.taken.get(where, -1) >= offset for where, offset in last_of.items())

    def on_batch(self, result) -> None:
        now = self.batches.record(result)
        with self.lock:
            for where, last in result.last_offsets.items():
                self.taken[where] = max(last, self.taken.get(where, -1))
            for tick, last_of in self.needs.items():
                if tick not in self.done and self._through(last_of):
                    self.done[tick] = now
                    self.batch_of[tick] = result.batch_id
        self.warmed.set()

    def sent(self, tick: str, last_of: dict[str, int]) -> None:
        with self.lock:
            self.needs[tick] = last_of
            # A batch may have taken the records before their acknowledgements came back.
            if self._through(last_of):
                self.done[tick] = time.time()

    def all_through(self) -> bool:
        return all(name in self.done for name in self.produced)


def _feed(producer: Producer, ticks: Ticks, stop: threading.Event, drain_seconds: float) -> None:
    if not ticks.warmed.wait(timeout=300):
        producer.stop()
        stop.set()
        return
    producer.measure()
    try:
        producer.join()
    finally:
        ends = time.monotonic() + drain_seconds
        while time.monotonic() < ends and not ticks.all_through():
            time.sleep(0.2)
        stop.set()


def _one_rate(
    spark,
    work: Path,
    bootstrap: str,
    rate: int,
    rate_seconds: float,
    symbols: list[str],
    drain_seconds: float,
    bad_every: int | None = None,
    name: str = "",
) -> dict:
    from market_spread.stream.query import started, supervise
    from market_spread.stream.spec import StreamSpec

    settings = KafkaSettings(bootstrap, f"quotes-{rate}{name}", f"orders-{rate}{name}")
    ensure_topics(bootstrap, [settings.quotes_topic, settings.orders_topic], DEFAULT_PARTITIONS)
    ticks, stop = Ticks(), threading.Event()
    feed = Feed(
        tuple(symbols),
        rate,
        warmup_seconds(rate_seconds),
        rate_seconds,
        bootstrap=bootstrap,
        topics=(settings.quotes_topic, settings.orders_topic),
        bad_every=bad_every,
    )
    producer = Producer(feed, ticks.produced, on_sent=lambda tick, at, last_of: ticks.sent(tick, last_of)).start()
    print(
        f"bench: kafka latency: {rate:,} events/s for {rate_seconds:.0f}s after a "
        f"{warmup_seconds(rate_seconds):.0f}s warm-up",
        flush=True,
    )
    feeder = threading.Thread(target=_feed, args=(producer, ticks, stop, drain_seconds), daemon=True)
    feeder.start()
    # No interval: the product's default trigger is what is measured.
    spec = StreamSpec(
        lake=work / f"kafka-lat{rate}{name}" / "lake",
        symbols=symbols,
        available_now=False,
        kafka=settings,
    )
    with batch_times(spark) as listener:
        with started(spark, spec, ticks.on_batch) as run:
            supervise(run.query, run.busy, stop)
        listener.take(run.query)
        feeder.join()
        producer.check()
        figures, latencies, behind = latency_figures(ticks.produced, ticks.done)
        figures["split_ms"] = split_figures(ticks.produced, ticks.done, ticks.batch_of, listener, ticks.batches)
    figures["batch_seconds"] = run_batch_times(ticks.batch_of, ticks.produced, ticks.batches)
    figures["batch_cost"] = batch_cost(ticks.batch_of, ticks.produced, ticks.batches)
    row = {**figures, "ticks": len(latencies), "ticks_behind": behind}
    print(
        f"bench: kafka latency at {rate:,}/s: p50 {row['p50']} ms, p95 {row['p95']} ms, "
        f"p99 {row['p99']} ms over {len(latencies)} ticks"
        + (f"; {behind} ticks not yet processed when the run ended" if behind else ""),
        flush=True,
    )
    print(
        f"bench: kafka latency at {rate:,}/s: {split_line(row['split_ms'])}; batch time {row['batch_seconds']}",
        flush=True,
    )
    return row


def kafka_latency(
    spark,
    work: Path,
    rates: tuple[int, ...],
    rate_seconds: float,
    symbols: list[str],
    drain_seconds: float = 8.0,
    bad_every: int | None = None,
    name: str = "",
) -> dict:
    """`drain_seconds`: how long the stream may go on after the last tick (as the file source's run:
    8 s); it stops earlier once every tick is through. `bad_every`: one bad line after every this many
    among the ticks' (bench_feeder.dirtier)."""
    with running_broker(work / f"kafka{name}") as broker:
        return {
            str(rate): _one_rate(
                spark, work, broker.bootstrap, rate, rate_seconds, symbols, drain_seconds, bad_every, name
            )
            for rate in rates
        }


@contextmanager
def running_broker(work: Path) -> Iterator[BrokerProcess]:
    """`market-spread broker` on free ports, its data under WORK/kafka, for the block; stopped after."""
    broker = BrokerProcess(work / "kafka" / "data")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()

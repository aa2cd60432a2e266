"""The benchmark's Kafka row: latency at fixed input rates from a record produced to its alerts
committed, through a real broker (`market-spread broker`, started here on free ports).

Same method as the file source's latency run (bench.latency): a warm-up, then every 0.25 s a tick
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


def broker_available() -> str | None:
    """None when the broker and connector JARs are there, else why the Kafka row is skipped (the
    product's own look-ups, so the bench skips exactly when `broker` or `stream --source kafka` would fail)."""
    from market_spread.cli.main import UsageError
    from market_spread.feeds.broker import broker_jars
    from market_spread.stream.kafka_source import kafka_jars

    try:
        broker_jars()
        kafka_jars()
    except (UsageError, SystemExit) as exc:
        return str(exc)
    return None


def kafka_latency(spark, work: Path, rates: tuple[int, ...], rate_seconds: float, symbols: list[str],
                  drain_seconds: float = 8.0) -> dict:
    """`drain_seconds`: how long the stream may go on after the last tick (as the file source's run:
    8 s); it stops earlier once every tick is through."""
    from market_spread.feeds.broker import BrokerProcess
    from market_spread.feeds.generate import Generator
    from market_spread.stream.kafka_source import KafkaSettings, feed_source
    from market_spread.feeds.producer import KafkaSink
    from market_spread.stream.query import StreamSpec, start_query, supervise

    broker = BrokerProcess(work / "kafka" / "data")
    broker.start()
    out: dict = {}
    try:
        for rate in rates:
            settings = KafkaSettings(broker.bootstrap, f"quotes-{rate}", f"orders-{rate}")
            sink = KafkaSink(broker.bootstrap, settings.quotes_topic, settings.orders_topic)
            # A partition is read in offset order, so a tick is through once a committed batch has
            # taken, in every partition the tick wrote to, an offset at or past the tick's last one.
            needs: dict[str, dict[str, int]] = {}  # tick -> topic/partition -> its last offset there
            taken: dict[str, int] = {}  # topic/partition -> highest offset of a committed batch
            produced: dict[str, float] = {}
            done: dict[str, float] = {}
            warmed, stop = threading.Event(), threading.Event()
            lock = threading.Lock()

            def through(last_of: dict[str, int]) -> bool:
                """Every partition the tick wrote to has been taken up to its last offset (call under `lock`)."""
                return all(taken.get(where, -1) >= offset for where, offset in last_of.items())

            def on_batch(result) -> None:
                now = time.time()
                with lock:
                    for where, last in result.last_offsets.items():
                        taken[where] = max(last, taken.get(where, -1))
                    for tick, last_of in needs.items():
                        if tick not in done and through(last_of):
                            done[tick] = now
                warmed.set()

            def send(gen, tick: str, count: int) -> None:
                events = gen.events(count // 2, count - count // 2)
                last_of: dict[str, int] = {}
                for feed in ("quotes", "orders"):
                    for where in sink.send_tracked(feed, [l for f, _, l in events if f == feed]):
                        part, _, offset = where.rpartition("/")
                        last_of[part] = max(int(offset), last_of.get(part, -1))
                with lock:
                    needs[tick] = last_of
                    # A batch may have taken the records before their acknowledgements came back.
                    if through(last_of):
                        done[tick] = time.time()

            def feed() -> None:
                gen = Generator(symbols, seed=rate, profile="wallaroo", wide_share=0.05, start=datetime.now(timezone.utc))
                send(gen, "warm", 100)
                if not warmed.wait(timeout=300):
                    stop.set()
                    return
                tick, n, began = 0.25, 0, time.monotonic()
                while time.monotonic() - began < warmup + rate_seconds:
                    name = f"t{n:06d}"
                    at = time.time()
                    send(gen, name, int(rate * tick))
                    if time.monotonic() - began >= warmup:
                        produced[name] = at
                    n += 1
                    time.sleep(max(0.0, began + n * tick - time.monotonic()))
                ends = time.monotonic() + drain_seconds
                while time.monotonic() < ends and not all(name in done for name in produced):
                    time.sleep(0.2)
                stop.set()

            warmup = max(5.0, rate_seconds / 3)
            print(f"bench: kafka latency: {rate:,} events/s for {rate_seconds:.0f}s after a {warmup:.0f}s warm-up",
                  flush=True)
            lake = work / f"kafka-lat{rate}" / "lake"
            feeder = threading.Thread(target=feed, daemon=True)
            feeder.start()
            spec = StreamSpec(lake=lake, symbols=symbols, available_now=False, interval=0.5,
                              source=feed_source(settings))
            query, busy = start_query(spark, spec, on_batch)
            supervise(query, busy, stop)
            feeder.join()
            # A tick is through when every one of its records has been through a committed batch
            # (a batch may cut a tick in two: its end offsets are read at one instant).
            from market_spread_tools.bench import latency_figures

            figures, latencies, behind = latency_figures(produced, done)
            out[str(rate)] = {**figures, "ticks": len(latencies), "ticks_behind": behind}
            print(f"bench: kafka latency at {rate:,}/s: p50 {out[str(rate)]['p50']} ms, p95 {out[str(rate)]['p95']} ms, "
                  f"p99 {out[str(rate)]['p99']} ms over {len(latencies)} ticks"
                  + (f"; {behind} ticks not yet processed when the run ended" if behind else ""), flush=True)
    finally:
        broker.stop()
    return out

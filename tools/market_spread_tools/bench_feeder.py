"""The latency runs' producer, in a process of its own as a feed's producer is.

Generating a tick's events in Python and handing them over (files written, or records produced to
Kafka) takes the interpreter for a while at each tick (docs/performance.md, row 'the latency runs'
producer in a process of its own'). In the stream's own process that time was taken from the batches it
measures, which a producer elsewhere does not do. So the ticks are made and sent by a spawned
process; the stream's process learns of each through a queue: its name, when it was handed over and,
for Kafka, the offsets it ended at.

Both latency runs (bench_latency, bench_kafka) feed the same way: a warm-up tick, then, once the
stream has taken it, every TICK seconds a tick of `rate * TICK` events for warmup + seconds (a feed
may set its own tick, e.g. the universe part's 5,000-line file pairs).
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from market_spread.feeds.generate import Generator

TICK = 0.25  # seconds between two ticks of input
WARM_TICK = 100  # events of the tick that warms the stream up (its first batch), not measured


def _with(line: str, **changes: object) -> str:
    record = json.loads(line)
    record.update(changes)
    return json.dumps(record)


# Each kind of bad line the contract names (5.5), made from one of the feed's own lines.
BAD_KINDS: dict[str, Callable[[str, str], str]] = {
    "not a JSON object": lambda feed, line: line[: len(line) // 2],  # cut short, as a torn write
    "missing field": lambda feed, line: json.dumps({k: v for k, v in json.loads(line).items() if k != "symbol"}),
    "wrong type": lambda feed, line: _with(line, **({"bid": True} if feed == "quotes" else {"account": "seven"})),
    "non-positive": lambda feed, line: _with(line, **({"offer": 0} if feed == "quotes" else {"qty": -5})),
    "non-finite": lambda feed, line: line.replace('"price": ', '"price": NaN, "was": ').replace(
        '"bid": ', '"bid": Infinity, "was": '
    ),
    "unknown side": lambda feed, line: _with(line, side="HOLD") if feed == "orders" else _with(line, symbol="NOPE"),
    "bad time": lambda feed, line: _with(line, transact_time="yesterday"),
    "unknown symbol": lambda feed, line: _with(line, symbol="NOPE"),
}


def dirtier(every: int) -> Callable[[str, list[str]], list[str]]:
    """(feed, lines) -> the lines with one bad line after every `every` lines across the feeds,
    made from its neighbour, the kinds in turn."""
    count, kinds = itertools.count(1), itertools.cycle(BAD_KINDS.values())

    def dirty(feed: str, lines: list[str]) -> list[str]:
        out = []
        for line in lines:
            out.append(line)
            if next(count) % every == 0:
                out.append(next(kinds)(feed, line))
        return out

    return dirty


@dataclass(frozen=True)
class Feed:
    """What the producer sends: to a landing folder (`landing`: a path or s3a:// URI, file pairs)
    or to Kafka (`bootstrap` and its quotes and orders topics, records)."""

    symbols: tuple[str, ...]
    rate: int
    warmup: float
    seconds: float
    landing: str | None = None
    bootstrap: str | None = None
    topics: tuple[str, str] = ("", "")
    bad_every: int | None = None  # one bad line after every this many (bench_dirty), or none
    tick: float = TICK  # seconds between two ticks: a tick is `rate * tick` events (one file pair)
    even: bool = False  # quotes go round the universe (EvenGenerator), not to symbols drawn at random


class EvenGenerator(Generator):
    """Wallaroo's profile, its quotes spread evenly over the universe: they go round it in one
    shuffled order, each symbol once a round (the universe part, bench_universe). Drawn at random, a
    small universe's batches would repeat symbols and a large one's would not, whatever its size;
    round the universe, every batch quotes as many different symbols as it can. Shuffled: a real
    feed's quotes do not come in the symbols' sorted order."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.round = list(self.symbols)
        random.Random(self.seed + 1).shuffle(self.round)
        self.cursor = 0

    def quote(self) -> str:
        symbol = self.round[self.cursor % len(self.round)]
        self.cursor += 1
        self.quote_seq += 1
        bid, offer = ("1000.00", "1001.00") if symbol in self.wide else ("100.00", "100.01")
        return (
            f'{{"symbol": "{symbol}", "transact_time": "{self._time()}", "bid": {bid}, '
            f'"offer": {offer}, "seq": {self.quote_seq}}}'
        )


def feed_ticks(
    send: Callable[[str, int], float],
    name: Callable[[int], str],
    rate: int,
    warmup: float,
    seconds: float,
    started: Callable[[str, float], None],
    every: float = TICK,
) -> None:
    """A tick of `rate * every` events every `every` seconds for warmup + seconds. `send(name, count)`
    hands one tick over and returns the moment its latency counts from; ticks after the warm-up
    are reported to `started` (name, that moment)."""
    n, began = 0, time.monotonic()
    while time.monotonic() - began < warmup + seconds:
        tick = name(n)
        at = send(tick, int(rate * every))
        if time.monotonic() - began >= warmup:
            started(tick, at)
        n += 1
        time.sleep(max(0.0, began + n * every - time.monotonic()))


def _file_sender(feed: Feed, gen, dirty) -> tuple[Callable[[str, int], float], Callable[[int], str]]:
    from market_spread.feeds.generate import write_atomically
    from market_spread.runtime.storage import location

    landing = location(feed.landing or "")

    def land(name: str, count: int) -> float:
        events = gen.events(count // 2, count - count // 2)
        for kind in ("quotes", "orders"):
            lines = [line for f, _, line in events if f == kind]
            write_atomically(landing / kind, name, dirty(kind, lines) if dirty else lines)
        return time.time()  # a file pair counts from its landing

    return land, lambda n: f"lat-{n:06d}.jsonl"


def _kafka_sender(feed: Feed, gen, dirty, queue) -> tuple[Callable[[str, int], float], Callable[[int], str]]:
    from market_spread.feeds.producer import KafkaSink

    sink = KafkaSink(feed.bootstrap or "", *feed.topics, create_topics=False)

    def send(tick: str, count: int) -> float:
        at = time.time()  # a tick counts from its hand-over to the producer
        events = gen.events(count // 2, count - count // 2)
        last_of: dict[str, int] = {}
        for kind in ("quotes", "orders"):
            lines = [line for f, _, line in events if f == kind]
            for where in sink.send_tracked(kind, dirty(kind, lines) if dirty else lines):
                part, _, offset = where.rpartition("/")
                last_of[part] = max(int(offset), last_of.get(part, -1))
        queue.put(("sent", tick, at, last_of))
        return at

    return send, lambda n: "warm" if n < 0 else f"t{n:06d}"


def _produce(feed: Feed, queue, go) -> None:
    """The spawned process: the warm-up tick, then (once `go` is set) the measured ticks."""
    try:
        kind = EvenGenerator if feed.even else Generator
        gen = kind(list(feed.symbols), seed=feed.rate, profile="wallaroo", wide_share=0.05, start=datetime.now(UTC))
        dirty = dirtier(feed.bad_every) if feed.bad_every else None
        if feed.bootstrap:
            send, name = _kafka_sender(feed, gen, dirty, queue)
            send("warm", WARM_TICK)
        else:
            send, name = _file_sender(feed, gen, dirty)
            send("warm-start.jsonl", WARM_TICK)
        if go.wait(timeout=300):
            report = lambda t, at: queue.put(("started", t, at))  # noqa: E731
            feed_ticks(send, name, feed.rate, feed.warmup, feed.seconds, report, feed.tick)
        queue.put(("end", None))
    except BaseException as exc:  # noqa: BLE001 - reported to the bench, which says it
        queue.put(("end", f"{type(exc).__name__}: {exc}"))


class Producer:
    """`Feed` sent by a spawned process. `on_sent(tick, at, last_of)` hears of each Kafka tick once
    it is acknowledged; `started` gets each measured tick's name -> moment."""

    def __init__(self, feed: Feed, started: dict[str, float], on_sent: Callable | None = None) -> None:
        context = multiprocessing.get_context("spawn")  # not a fork of a process with a JVM gateway
        self.queue, self.go = context.Queue(), context.Event()
        self.process = context.Process(target=_produce, args=(feed, self.queue, self.go), daemon=True)
        self.started, self.on_sent = started, on_sent
        self.error: str | None = None
        self.ended = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)

    def start(self) -> "Producer":
        self.process.start()
        self._reader.start()
        return self

    def measure(self) -> None:
        """The stream has taken the warm-up tick: send the measured ticks."""
        self.go.set()

    def _read(self) -> None:
        while True:
            message = self.queue.get()
            if message[0] == "sent" and self.on_sent is not None:
                self.on_sent(*message[1:])
            elif message[0] == "started":
                self.started[message[1]] = message[2]
            elif message[0] == "end":
                self.error = message[1]
                self.ended.set()
                return

    def stop(self) -> None:
        """The run ends without its ticks (the stream never took the warm-up)."""
        if self.process.is_alive():
            self.process.kill()
        self.ended.set()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the last tick (`timeout` None: as long as it takes)."""
        self.ended.wait(timeout)
        self.process.join(5)
        if self.process.is_alive():
            self.process.kill()

    def check(self) -> None:
        """Raise what the producer met, after the run."""
        if self.error:
            raise RuntimeError(f"the bench's producer failed: {self.error}")

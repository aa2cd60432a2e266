"""`market-spread generate`: synthetic quote and order feeds, written atomically.

Profiles:
- `default`: every symbol quotes around its own price with a tight spread, a share of symbols
  (`--wide-share`) quotes wide; orders pick symbols uniformly, so some meet no market data.
- `wallaroo`: Wallaroo's own test recipe: a fixed share of symbols always reject (bid 1000 /
  offer 1001), the rest never; orders skewed 80/20 onto hot symbols; order ids repeat.

Within each file pair, quotes are written before orders, so every quote lands no later than the
orders it should affect (contract 5.8).
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import cast

from market_spread.domain.symbols import load_symbols
from market_spread.errors import UsageError
from market_spread.feeds.producer import KafkaTarget, open_sink
from market_spread.runtime.storage import Location, S3Path

BASE_TIME = datetime(2026, 11, 23, 14, 30, tzinfo=UTC)


@dataclass
class Generator:
    """Deterministic for a seed: the same arguments give byte-identical feeds."""

    symbols: list[str]
    seed: int = 1
    wide_share: float = 0.1
    profile: str = "default"
    start: datetime = BASE_TIME

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        rng = random.Random(self.seed + 7919)
        count_wide = round(len(self.symbols) * self.wide_share)
        self.wide = set(rng.sample(self.symbols, count_wide))
        self.base_price = {s: rng.randint(500, 50000) / 100 for s in self.symbols}
        # Wallaroo's recipe: 20% of symbols take 80% of the orders.
        hot_count = max(1, len(self.symbols) // 5)
        self.hot = self.symbols[:hot_count]
        self.quoted: list[str] = []  # orders mostly go to symbols with a market, as in real feeds
        self._quoted_set: set[str] = set()
        self.now_us = 0
        self.order_no = 0
        self.quote_seq = 0

    def _time(self) -> str:
        self.now_us += self.rng.randint(0, 2000)  # equal times happen: ties are the rule in feeds
        t = self.start + timedelta(microseconds=self.now_us)
        return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"

    def quote(self) -> str:
        symbol = self.rng.choice(self.symbols)
        if symbol not in self._quoted_set:
            self._quoted_set.add(symbol)
            self.quoted.append(symbol)
        self.quote_seq += 1
        if self.profile == "wallaroo":
            bid, offer = ("1000.00", "1001.00") if symbol in self.wide else ("100.00", "100.01")
        else:
            mid = self.base_price[symbol] * (1 + self.rng.uniform(-0.01, 0.01))
            if symbol in self.wide:
                spread = self.rng.choice((0.05, 0.10, 0.25, mid * 0.06))
            else:
                spread = self.rng.choice((0.0, 0.01, 0.01, 0.02, 0.03, 0.04))
            bid = f"{mid - spread / 2:.2f}"
            offer = f"{float(bid) + spread:.2f}"
        return (
            f'{{"symbol": "{symbol}", "transact_time": "{self._time()}", "bid": {bid}, '
            f'"offer": {offer}, "seq": {self.quote_seq}}}'
        )

    def order(self) -> str:
        if self.profile == "wallaroo":
            symbol = self.rng.choice(self.hot) if self.rng.random() < 0.8 else self.rng.choice(self.symbols)
            self.order_no = (self.order_no + 1) % 5000  # Wallaroo's order ids repeat
            price = "100.00" if symbol not in self.wide else "1000.50"
        else:
            known = self.quoted and self.rng.random() < 0.97
            symbol = self.rng.choice(self.quoted) if known else self.rng.choice(self.symbols)
            self.order_no += 1
            price = f"{self.base_price[symbol] * (1 + self.rng.uniform(-0.02, 0.02)):.2f}"
        side = "BUY" if self.rng.random() < 0.5 else "SELL"
        qty = self.rng.randint(1, 100) * 100
        return (
            f'{{"order_id": "O-{self.seed}-{self.order_no}", "account": {self.rng.randint(1, 1000)}, '
            f'"symbol": "{symbol}", "side": "{side}", "qty": {qty}, "price": {price}, '
            f'"transact_time": "{self._time()}"}}'
        )

    def events(self, quotes: int, orders: int) -> list[tuple[str, int, str]]:
        """(feed, time in µs from start, line), quotes and orders drawn on one clock in time order."""
        out: list[tuple[str, int, str]] = []
        left_q, left_o = quotes, orders
        while left_q or left_o:
            if left_o == 0 or (left_q and self.rng.random() < left_q / (left_q + left_o)):
                line, feed, left_q = self.quote(), "quotes", left_q - 1
            else:
                line, feed, left_o = self.order(), "orders", left_o - 1
            out.append((feed, self.now_us, line))
        return out


def split_in_time(events: list[tuple[str, int, str]], parts: int) -> list[list[tuple[str, int, str]]]:
    """Cut a time-ordered event list into `parts` runs of about equal size, cutting only where the
    time moves on, so no quote of a later file shares its time with an order of an earlier one. The
    time as written: lines carry milliseconds, the clock microseconds."""
    cuts, at = [0], 0
    for i in range(1, parts):
        at = max(at, round(len(events) * i / parts))
        while 0 < at < len(events) and events[at][1] // 1000 == events[at - 1][1] // 1000:
            at += 1
        cuts.append(min(at, len(events)))
    cuts.append(len(events))
    return [events[a:b] for a, b in zip(cuts, cuts[1:])]


def write_atomically(folder: Location, name: str, lines: list[str]) -> Location:
    """Write aside under a dot name (ignored by readers), fsync, then rename into place (on object
    storage one PUT: an object is whole once it is listed)."""
    if isinstance(folder, S3Path):
        obj = folder / name
        obj.write_text("\n".join(lines) + ("\n" if lines else ""))
        return obj
    final = folder / name
    folder.mkdir(parents=True, exist_ok=True)
    temp = folder / f".{name}.tmp"
    with open(temp, "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines))
        if lines:
            handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, final)
    return final


Sink = Callable[[str, str, list[str]], None]  # (feed, chunk name, lines): e.g. producer.KafkaSink


def write_backlog(
    landing: Location, gen: Generator, quotes: int, orders: int, files: int, tag: str, sink: Sink | None = None
) -> tuple[int, int]:
    """Write `files` pairs of files; pair k holds the events of the k-th stretch of time, so that
    landing the pairs in order lands every quote no later than the orders it affects. Files of pair
    k+1 are modified later, in milliseconds, than those of pair k (`land_after`).
    With a `sink`, each "file" goes to it instead (quotes first, each chunk acknowledged)."""
    events = gen.events(quotes, orders)
    write = sink or (lambda feed, name, lines: write_atomically(landing / feed, name, lines))
    latest = -1  # modification time (ms) of the pair before
    for i, part in enumerate(split_in_time(events, files)):
        written = [
            write("quotes", f"{tag}-{i:05d}.jsonl", [l for f, _, l in part if f == "quotes"]),
            write("orders", f"{tag}-{i:05d}.jsonl", [l for f, _, l in part if f == "orders"]),
        ]
        if sink is None and not isinstance(landing, S3Path):  # S3 sets its own times: names break ties in order
            latest = land_after(latest, cast("list[Path]", written))  # local files, written here
    return quotes, orders


def land_after(latest_ms: int, paths: list[Path]) -> int:
    """Give each of `paths` a modification time (ms) after `latest_ms` if the clock has not moved on
    since (by at most a millisecond or so); returns the latest time among them.

    Why: a stream that takes a few files per batch (`--max-files-per-batch`) takes them oldest first by
    modification time in milliseconds, ties in directory order. Pairs written within one millisecond
    could put the orders of pair k into a batch with the quotes of pair k-1, and check them against
    the quote of one batch earlier. Pairs in strictly increasing times go in order."""
    floor = latest_ms + 1
    for path in paths:
        ms = os.stat(path).st_mtime_ns // 1_000_000
        if ms < floor:
            os.utime(path, ns=(floor * 1_000_000, floor * 1_000_000))
            ms = floor
        latest_ms = max(latest_ms, ms)
    return latest_ms


@dataclass(frozen=True)
class GenerateSpec:
    """One `generate` run: the command's options, typed. Exactly one of `landing` and `kafka`."""

    symbols: Path  # the symbol universe's file
    landing: Location | None = None
    kafka: KafkaTarget | None = None
    quotes: int = 1000
    orders: int = 1000
    files: int = 1  # per feed
    seed: int = 1
    wide_share: float = 0.1
    profile: str = "default"
    rate: float | None = None  # events per second, landed continuously; None: one backlog
    duration: float | None = None  # with `rate`: seconds (0 or None: until stopped)
    tick: float = 1.0  # with `rate`: seconds between files
    start: str | None = None  # ISO-8601 event time of the first record


def generate(spec: GenerateSpec) -> int:
    """Write the feeds (a backlog, or a live feed at `rate`); the exit code (1 when Kafka fails).
    UsageError for options that cannot run."""
    if spec.landing is None and spec.kafka is None:
        raise UsageError("give --landing DIR (files) or --kafka HOST:PORT (topics)")
    if spec.landing is not None and spec.kafka is not None:
        raise UsageError("--landing and --kafka exclude each other: files or topics")
    symbols = load_symbols(spec.symbols)
    landing = spec.landing or Path(".")
    gen = Generator(symbols, spec.seed, spec.wide_share, spec.profile, _start(spec))
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    if spec.rate is None and spec.duration is not None:
        raise UsageError("--duration goes with --rate")
    if spec.rate is not None and spec.rate <= 0:
        raise UsageError("--rate must be > 0 events per second")
    if spec.tick <= 0:
        raise UsageError("--tick must be > 0 seconds")
    try:
        sink = open_sink(spec.kafka)
        target = spec.kafka.label if spec.kafka is not None else str(landing)  # a sink exactly when kafka is set
        if spec.rate is None:
            q, o = write_backlog(landing, gen, spec.quotes, spec.orders, spec.files, f"gen-{stamp}-s{spec.seed}", sink)
            where = f"to {target}" if sink else f"in {spec.files} file(s) per feed to {target}"
            print(f"generate: wrote {q} quotes and {o} orders {where}")
            return 0
        written, ticks = _run_rate(landing, gen, Pace(spec.rate, spec.duration or 0.0, spec.tick), stamp, sink)
        print(f"generate: wrote {written} events in {ticks} ticks to {target}", flush=True)
        return 0
    except ConnectionError as exc:
        print(f"generate: error: {exc}", file=sys.stderr)
        return 1


def _start(spec: GenerateSpec) -> datetime:
    """The first record's event time: a live feed carries live times; a backlog is reproducible
    from a fixed start."""
    if not spec.start:
        return BASE_TIME if spec.rate is None else datetime.now(UTC)
    try:
        return datetime.fromisoformat(spec.start.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        raise UsageError(f"--start is not an ISO-8601 time: {spec.start}") from None


@dataclass(frozen=True)
class Pace:
    """A live feed's pace (generate --rate)."""

    rate: float  # events per second, on average
    duration: float  # seconds; 0: until interrupted
    tick: float  # seconds between two pairs of files


def _run_rate(landing: Location, gen: Generator, pace: Pace, stamp: str, sink: Sink | None = None) -> tuple[int, int]:
    """Land a pair of files every tick, holding the pace; returns (events written, ticks)."""
    rate, duration, tick = pace.rate, pace.duration, pace.tick
    began = time.monotonic()
    written = ticks = 0
    share_quotes = 0.5
    try:
        while duration <= 0 or time.monotonic() - began < duration:
            due = int(rate * (time.monotonic() - began + tick)) - written
            quotes = int(due * share_quotes)
            q, o = write_backlog(landing, gen, quotes, due - quotes, 1, f"gen-{stamp}-t{ticks:07d}", sink)
            written += q + o
            ticks += 1
            if ticks % 10 == 0:
                print(
                    f"generate: {written} events in {ticks} ticks ({written / (time.monotonic() - began):.0f}/s)",
                    flush=True,
                )
            time.sleep(max(0.0, began + ticks * tick - time.monotonic()))
    except KeyboardInterrupt:
        pass
    return written, ticks

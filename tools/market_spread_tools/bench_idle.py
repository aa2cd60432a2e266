"""The benchmark's idle cost (part `idle`; issue 43's target: an idle stream, no input for a minute,
uses at most 5 % of one core).

A stream is started with the product's defaults (StreamSpec's default trigger, no interval set
here) on a landing folder, and from Kafka when a broker is available (bench_kafka.running_broker);
one small warm-up tick goes through, then nothing is landed for the measured period. The CPU time
(user + system) of the Spark JVM (/proc/PID/stat) and of this Python process (os.times, every
thread: the driver's supervision, Py4J) is read at the start and the end of the period: their
sum over the wall time is the share of one core the idle stream takes. The bench's session is in
this process: nothing else runs in it meanwhile (the parts run one after the other; the count of
other active queries is reported), and before the stream starts the JVM is let settle (its CPU
below 5 % over a second, 30 s at most), so that what the earlier parts left (their garbage, a
stopped query's clean-up: up to 40 % of a core for seconds) is not counted as the idle stream's.
The broker's own CPU is reported beside, not counted: users
run their Kafka elsewhere.
"""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from market_spread.feeds.generate import Generator, write_atomically
from market_spread_tools.bench_measure import bench_symbols, say

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int | str) -> list[str]:
    """/proc/PID/stat's fields after the command name (which may hold spaces): state is [0]."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of a process, all its threads, in seconds."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def session_cpu_seconds(session: int) -> float:
    """utime + stime of every live process of a session (the broker's wrapper and its JVM)."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = _stat_fields(entry.name)
                if int(fields[3]) == session:
                    total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
            except (OSError, ValueError, IndexError):
                continue  # gone meanwhile
    return total


def own_cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def cpu_over(seconds: float, jvm_pid: int, broker_session: int | None) -> dict:
    """CPU seconds of the JVM, this process (and the broker's session) over `seconds` of wall time."""

    def sample() -> tuple[float, float, float, float]:
        return (
            time.monotonic(),
            process_cpu_seconds(jvm_pid),
            own_cpu_seconds(),
            session_cpu_seconds(broker_session) if broker_session else 0.0,
        )

    w0, j0, p0, b0 = sample()
    time.sleep(seconds)
    w1, j1, p1, b1 = sample()
    wall = w1 - w0
    out = {
        "wall_seconds": round(wall, 2),
        "jvm_cpu_seconds": round(j1 - j0, 2),
        "python_cpu_seconds": round(p1 - p0, 2),
        "cpu_percent_of_one_core": round(100 * ((j1 - j0) + (p1 - p0)) / wall, 2),
    }
    if broker_session:
        out["broker_cpu_percent_of_one_core"] = round(100 * (b1 - b0) / wall, 2)
    return out


def settle(jvm_pid: int, below: float = 0.05, at_most: float = 30.0) -> float:
    """Wait until the JVM uses less than `below` of a core over a second; returns the seconds waited."""
    began = time.monotonic()
    while time.monotonic() - began < at_most:
        before = process_cpu_seconds(jvm_pid)
        time.sleep(1.0)
        if process_cpu_seconds(jvm_pid) - before < below:
            break
    return round(time.monotonic() - began, 1)


def idle_run(spark, spec, warm, seconds: float, broker_session: int | None = None) -> dict:
    """Run the stream of `spec`; `warm()` hands over the warm-up tick; once its batch is through,
    `seconds` of no input are measured (cpu_over); then the stream is stopped."""
    from market_spread.stream.query import started, supervise

    stop, warmed, figures = threading.Event(), threading.Event(), dict[str, float]()
    jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())

    def measure() -> None:
        try:
            warm()
            if not warmed.wait(timeout=300):
                return
            time.sleep(1.0)  # the warm-up's trigger ends (offsets committed) before the period starts
            figures["other_active_queries"] = len(spark.streams.active) - 1
            figures.update(cpu_over(seconds, jvm_pid, broker_session))
        finally:
            stop.set()

    figures["settled_seconds"] = settle(jvm_pid)
    watcher = threading.Thread(target=measure, daemon=True)
    watcher.start()
    with started(spark, spec, lambda result: warmed.set()) as run:
        supervise(run.query, run.busy, stop)
    watcher.join()
    return figures


def _warm_lines(symbols: list[str]) -> dict[str, list[str]]:
    gen = Generator(symbols, seed=43, profile="wallaroo", wide_share=0.05, start=datetime.now(UTC))
    events = gen.events(50, 50)
    return {feed: [l for f, _, l in events if f == feed] for feed in ("quotes", "orders")}


def files_idle(spark, work: Path, seconds: float, symbols: list[str]) -> dict:
    from market_spread.stream.spec import StreamSpec

    landing = work / "idle" / "landing"
    # No interval: the product's default trigger is what is measured.
    spec = StreamSpec(lake=work / "idle" / "lake", symbols=symbols, landing=landing, available_now=False)

    def warm() -> None:
        for feed, lines in _warm_lines(symbols).items():
            write_atomically(landing / feed, "warm.jsonl", lines)

    return idle_run(spark, spec, warm, seconds)


def kafka_idle(spark, work: Path, seconds: float, symbols: list[str]) -> dict:
    from market_spread.feeds.producer import KafkaSink
    from market_spread.sources.kafka_source import KafkaSettings
    from market_spread.stream.spec import StreamSpec
    from market_spread_tools.bench_kafka import running_broker

    with running_broker(work / "idle-kafka") as broker:
        settings = KafkaSettings(broker.bootstrap, "quotes-idle", "orders-idle")
        sink = KafkaSink(broker.bootstrap, settings.quotes_topic, settings.orders_topic)
        spec = StreamSpec(lake=work / "idle-kafka" / "lake", symbols=symbols, available_now=False, kafka=settings)

        def warm() -> None:
            for feed, lines in _warm_lines(symbols).items():
                sink(feed, "warm", lines)

        return idle_run(spark, spec, warm, seconds, broker.process.pid if broker.process else None)


def idle_cost(spark, work: Path, seconds: float, kafka_skipped: str | None) -> dict:
    """The `idle` section of latest.json: files, and kafka (or why it was skipped)."""
    symbols = bench_symbols(3_000)
    out: dict = {"seconds": seconds}
    say(f"idle: the stream on a landing folder, {seconds:.0f}s without input")
    out["files"] = files_idle(spark, work, seconds, symbols)
    say(f"idle: files: {out['files']}")
    if kafka_skipped:
        out["kafka_skipped"] = kafka_skipped
        say(f"idle: kafka: skipped: {kafka_skipped}")
    else:
        say(f"idle: the stream from Kafka, {seconds:.0f}s without input")
        out["kafka"] = kafka_idle(spark, work, seconds, symbols)
        say(f"idle: kafka: {out['kafka']}")
    return out

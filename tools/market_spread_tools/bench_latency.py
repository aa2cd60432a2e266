"""The benchmark's latency in continuous mode at fixed input rates, from the file source: each file
pair's latency runs from its landing to the end of the micro-batch that took it (its last commit).

Measured with the product's defaults: the stream is started as the product starts it, with
StreamSpec's default trigger (no interval set here). Each file pair's latency is also split into
where it went (bench_phases): waiting for the batch in progress, to be seen, Spark's steps and the
batch's own phases.

Both latency runs (this one and bench_kafka's) feed the same way, from a producer in a process of
its own (bench_feeder): a warm-up, then every TICK seconds a tick of `rate * TICK` events for
`rate_seconds`; ticks not through when the run ends count as "behind".
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from market_spread.runtime.storage import Location
from market_spread_tools.bench_feeder import Feed, Producer
from market_spread_tools.bench_measure import bench_symbols, run_stream, say
from market_spread_tools.bench_phases import (
    Batches,
    batch_cost,
    batch_times,
    run_batch_times,
    split_figures,
    split_line,
)
from market_spread_tools.bench_plans import Plan


def latency_figures(started: dict[str, float], done: dict[str, float]) -> tuple[dict, list[float], int]:
    """p50/p95/p99 (ms) and the CDF of done - started over the names that are done; the sorted
    latencies (s); how many started names are not done (behind)."""
    latencies = sorted(done[name] - at for name, at in started.items() if name in done)
    q = lambda p: round(1000 * latencies[min(len(latencies) - 1, int(p * len(latencies)))], 1) if latencies else None  # noqa: E731
    figures = {"p50": q(0.50), "p95": q(0.95), "p99": q(0.99), "cdf_ms": [round(1000 * x, 1) for x in latencies]}
    return figures, latencies, len(started) - len(latencies)


def warmup_seconds(rate_seconds: float) -> float:
    """Not measured: the first seconds at the rate, so the figures are those of a stream in its steady state."""
    return max(5.0, rate_seconds / 3)


def file_latency(
    spark,
    work: Location,
    rate: int,
    rate_seconds: float,
    symbols: list[str],
    bad_every: int | None = None,
    name: str = "",
    alerts_topic=None,
    visible: dict[int, float] | None = None,
    feed_fields: dict[str, Any] | None = None,
    batches: Batches | None = None,
) -> tuple[dict, list[float], int]:
    """One rate from the file source: latency_figures over the file pairs landed after the warm-up,
    with `split_ms` (bench_phases.split_figures), `batch_seconds` (p50/p99/max of the batches
    after the warm-up) and `batch_cost` (batches with quarantined lines beside clean ones). `bad_every`:
    one bad line after every this many among the files' (bench_feeder.dirtier). `work` may be an S3 prefix: a file is then one PUT, landed
    when the PUT has completed. With `alerts_topic` (sinks.topic_settings.AlertsTopic) the stream
    publishes its alerts there, and `visible` (batch -> when a read_committed consumer first saw its
    records, filled by the caller's consumer) gives `topic`: the same figures to that moment, over
    the file pairs whose batch had alerts. `feed_fields`: further Feed fields (its tick, even quotes);
    `batches`: kept by the caller, who reads every batch's figures from it after the run, from
    `first_batch` on (the first that took a measured file pair; the universe part)."""
    landing, lake = work / f"lat{rate}{name}" / "landing", work / f"lat{rate}{name}" / "lake"
    landed: dict[str, float] = {}
    done: dict[str, float] = {}
    batch_of: dict[str, int] = {}  # name -> the batch that took the later of its two files
    alerts_of: dict[int, int] = {}  # batch -> its alerts
    batches = batches if batches is not None else Batches()
    feeds_through: dict[str, set[str]] = {}  # name -> the feeds (quotes, orders) whose file of it is through
    stop, warmed = threading.Event(), threading.Event()
    warmup = warmup_seconds(rate_seconds)

    def on_batch(result) -> None:
        # A landing is a quotes file and an orders file of one name: it is through when both are.
        # (Path(...).name of an s3a:// URI is its object's name as well.)
        now = batches.record(result)
        alerts_of[result.batch_id] = result.alerts
        for file in map(Path, result.files):
            done[file.name] = now
            batch_of[file.name] = result.batch_id
            feeds_through.setdefault(file.name, set()).add(file.parent.name)
        warmed.set()

    producer = Producer(
        Feed(
            tuple(symbols),
            rate,
            warmup,
            rate_seconds,
            landing=str(landing),
            bad_every=bad_every,
            **(feed_fields or {}),
        ),
        landed,
    )

    def feed() -> None:
        # Not measured: the query's start (table creation, first batch, JIT), then the warm-up.
        if not warmed.wait(timeout=300):
            producer.stop()
            stop.set()
            return
        producer.measure()
        try:
            producer.join()
        finally:
            # Let the last files through: up to 8 s, less once both files of every pair are (as bench_kafka's drain).
            ends = time.monotonic() + 8
            while time.monotonic() < ends and not all(len(feeds_through.get(name, ())) == 2 for name in landed):
                time.sleep(0.2)
            stop.set()

    (landing / "quotes").mkdir(parents=True, exist_ok=True)
    (landing / "orders").mkdir(parents=True, exist_ok=True)
    say(f"latency: {rate:,} events/s for {rate_seconds:.0f}s after a {warmup:.0f}s warm-up")
    producer.start()
    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    with batch_times(spark) as listener:
        # No interval: the product's default trigger is what is measured.
        run_stream(
            spark,
            landing,
            lake,
            symbols,
            available_now=False,
            on_batch=on_batch,
            stop=stop,
            on_query=listener.take,
            alerts_topic=alerts_topic,
        )
        feeder.join()
        producer.check()
        figures, latencies, behind = latency_figures(landed, done)
        figures["split_ms"] = split_figures(landed, done, batch_of, listener, batches)
    figures["batch_seconds"] = run_batch_times(batch_of, landed, batches)
    figures["first_batch"] = min((batch_of[n] for n in landed if n in batch_of), default=None)
    figures["batch_cost"] = batch_cost(batch_of, landed, batches)
    if visible is not None:
        figures["topic"] = topic_figures(landed, batch_of, alerts_of, visible)
    return figures, latencies, behind


def topic_figures(
    landed: dict[str, float], batch_of: dict[str, int], alerts_of: dict[int, int], visible: dict[int, float]
) -> dict:
    """Landing to visible in the alerts topic, over the file pairs whose batch had alerts; a pair
    whose batch's records were never seen counts as behind."""
    with_alerts = {n: at for n, at in landed.items() if alerts_of.get(batch_of.get(n, -1), 0) > 0}
    seen = {n: visible[batch_of[n]] for n in with_alerts if batch_of[n] in visible}
    figures, latencies, behind = latency_figures(with_alerts, seen)
    return {**figures, "file_pairs": len(latencies), "files_behind": behind}


def latency(spark, work: Path, plan: Plan) -> dict:
    """Continuous mode at fixed rates: each file's latency from its landing to its batch's last commit."""
    symbols = bench_symbols(3_000)
    out = {}
    for rate in plan.rates:
        # Files still waiting when the run ended count as "behind": a stream that cannot keep up
        # with the rate shows it there, not as flattering percentiles over the files it did take.
        figures, latencies, behind = file_latency(spark, work, rate, plan.rate_seconds, symbols)
        out[str(rate)] = {**figures, "file_pairs": len(latencies), "files_behind": behind}
        say(
            f"latency at {rate:,}/s: p50 {out[str(rate)]['p50']} ms, p95 {out[str(rate)]['p95']} ms, "
            f"p99 {out[str(rate)]['p99']} ms over {len(latencies)} file pairs"
            + (f"; {behind} file pairs not yet processed when the run ended (the stream fell behind)" if behind else "")
        )
        say(f"latency at {rate:,}/s: {split_line(figures['split_ms'])}; batch time {figures['batch_seconds']}")
    return out

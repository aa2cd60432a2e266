"""The benchmark's dirty feeds: the latency runs (files and Kafka) at 10,000 events/s with one bad
line in 10,000 and in 1,000 among the feed's own, every kind of bad line the contract names in
turn, and the cost of a batch with quarantined lines beside a clean one of the same run.
"""

from __future__ import annotations

from pathlib import Path

from market_spread_tools.bench_kafka import kafka_latency
from market_spread_tools.bench_latency import file_latency
from market_spread_tools.bench_measure import say
from market_spread_tools.bench_phases import split_line

RATE = 10_000
BAD_EVERY = (10_000, 1_000)


def dirty_feeds(spark, work: Path, rate_seconds: float, symbols: list[str], kafka_skipped: str | None) -> dict:
    """Latency and batch cost with bad lines, from files and (when a broker can start) Kafka."""
    out: dict = {"files": {}, "kafka": {}}
    for every in BAD_EVERY:
        figures, latencies, behind = file_latency(
            spark, work, RATE, rate_seconds, symbols, bad_every=every, name=f"-dirty{every}"
        )
        out["files"][str(every)] = {**figures, "file_pairs": len(latencies), "files_behind": behind}
        _say("files", every, out["files"][str(every)])
        if kafka_skipped:
            continue
        row = kafka_latency(spark, work, (RATE,), rate_seconds, symbols, bad_every=every, name=f"-dirty{every}")[
            str(RATE)
        ]
        out["kafka"][str(every)] = row
        _say("Kafka", every, row)
    if kafka_skipped:
        out["kafka_skipped"] = kafka_skipped
    return out


def _say(source: str, every: int, row: dict) -> None:
    cost = row["batch_cost"]
    say(
        f"dirty {source}, one bad line in {every:,}, {RATE:,} events/s: p50 {row['p50']} ms, p99 {row['p99']} ms; "
        f"batches with quarantined lines {cost['dirty_p50_s']} s (median of {cost['dirty_batches']}) against clean "
        f"{cost['clean_p50_s']} s (median of {cost['clean_batches']}): {cost['ratio']}x"
    )
    say(f"dirty {source}, one bad line in {every:,}: {split_line(row['split_ms'])}")

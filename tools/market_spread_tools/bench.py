"""`market-spread bench`: throughput, latency and scaling, with baselines, figures and plots.

Measures on this machine, in one run:
- throughput of `stream --available-now` over a generated backlog (Wallaroo profile), every Delta
  commit included;
- the event-at-a-time reference (Wallaroo's way) on the same files;
- the Spark batch ceiling: one plain Spark job computing the same alerts from the same files,
  without state table, streaming or Delta commits per batch;
- latency in continuous mode at fixed input rates: file landed -> its alerts committed;
- batch time against the number of past batches and against the number of symbols;
- where the time of a micro-batch goes (parse, as-of check, appends, MERGE);
- the median 2,000-event batch, p99 at 1,000 events/s and the backlog's throughput on the local S3
  server (`market-spread object-store`, started for the run) beside local disk (part `s3`);
- latency and the cost of a batch with quarantined lines, with bad lines among the feed's (part `dirty`);
- the CPU an idle stream takes, from files and from Kafka (part `idle`);
- the backlog, and the batch size from which Spark's executors beat the driver's path, on a
  2-worker local Spark cluster, with the peak memory of driver, daemons and executors (part `cluster`);
- batch time, the state write's share of it, latency and peak memory at 10,000 events/s with 300,
  200,000 and 1,000,000 symbols, the state pre-filled (part `universe`).
The latency and idle runs start the stream with the product's defaults (its default trigger).
Writes latest.json, PNG plots and summary.md into bench/results/quick or bench/results/full (--out).

This module runs the parts and writes the files; the work is in bench_plans (how much),
bench_measure, bench_latency, bench_kafka, bench_phases, bench_idle, bench_storage and bench_cluster (measuring),
bench_plots and bench_report.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

from market_spread_tools.bench_dirty import dirty_feeds
from market_spread_tools.bench_idle import idle_cost
from market_spread_tools.bench_kafka import broker_available, kafka_latency
from market_spread_tools.bench_latency import latency
from market_spread_tools.bench_measure import (
    bench_symbols,
    growth,
    machine,
    peak_memory_mb,
    plan_backlog,
    say,
    symbols_scaling,
    throughput,
)
from market_spread_tools.bench_plans import Plan, chosen_parts, plan_for
from market_spread_tools.bench_plots import plots
from market_spread_tools.bench_report import summary_markdown
from market_spread_tools.bench_storage import s3_unavailable, storage_comparison


def _session(with_kafka: bool):
    from market_spread.runtime.spark import build_session
    from market_spread.sources.kafka_source import session_conf

    # Every batch's progress kept, for where each tick's latency went (bench_phases.BatchTimes).
    extra = {**(session_conf() if with_kafka else {}), "spark.sql.streaming.numRecentProgressUpdates": "1000000"}
    return build_session("market-spread-bench", shuffle_partitions=4, extra_conf=extra, long_running=True)


def measure(
    spark, work: Path, plan: Plan, parts: set[str], kafka_skipped: str | None, s3_skipped: str | None = None
) -> dict:
    """The figures of every part asked for, under the keys latest.json has always used."""
    results: dict = {}
    if "throughput" in parts:
        tp = throughput(spark, work, plan)
        results["throughput"] = tp
        for key in ("throughput_events_per_s", "reference_events_per_s", "batch_ceiling_events_per_s"):
            results[key] = tp[key]
    if "latency" in parts:
        results["latency_ms"] = latency(spark, work, plan)
    if "growth" in parts:
        results["growth"] = growth(spark, work, plan)
        results["batch_time_growth"] = {k: v for k, v in results["growth"].items() if k != "batch_seconds"}
    if "symbols" in parts:
        results["symbols_scaling"] = symbols_scaling(spark, work, plan)
    if "kafka" in parts:
        if kafka_skipped:
            say(f"kafka latency: skipped: {kafka_skipped}")
            results["kafka_latency_skipped"] = kafka_skipped
        else:
            # The file source's rates up to 10,000 events/s, for the row beside its own.
            rates = tuple(r for r in plan.rates if r <= 10_000)
            results["kafka_latency_ms"] = kafka_latency(spark, work, rates, plan.rate_seconds, bench_symbols(3_000))
    if "topic" in parts:
        if kafka_skipped:
            say(f"alerts topic: skipped: {kafka_skipped}")
            results["topic_skipped"] = kafka_skipped
        else:
            from market_spread_tools.bench_topic import topic_latency

            results["topic"] = topic_latency(spark, work, plan.rate_seconds)
    if "dirty" in parts:
        results["dirty"] = dirty_feeds(spark, work, plan.rate_seconds, bench_symbols(3_000), kafka_skipped)
    if "idle" in parts:
        results["idle"] = idle_cost(spark, work, plan.idle_seconds, kafka_skipped)
    if "s3" in parts:
        if s3_skipped:
            say(f"s3 comparison: skipped: {s3_skipped}")
            results["storage_skipped"] = s3_skipped
        else:
            results["storage"] = storage_comparison(spark, work, plan)
    if "cluster" in parts:
        results["cluster"] = cluster(work, plan, results.get("throughput"))
    if "sql" in parts:
        from market_spread_tools.bench_sql import sql_part

        results["sql"] = sql_part(work, plan.sql_alerts)
    if "universe" in parts:
        from market_spread_tools.bench_universe import universe_part

        results["universe"] = universe_part(work, plan)
    results["peak_memory_mb"] = peak_memory_mb(spark)
    return results


def cluster(work: Path, plan: Plan, tp: dict | None) -> dict:
    """The cluster part over the throughput part's backlog (written here when that part did not run)."""
    from market_spread_tools.bench_cluster import cluster_part

    symbols = bench_symbols(3_000)
    landing = work / "tp" / "landing"
    if tp is None:
        say(f"cluster: generating the backlog, {plan.events:,} events in {plan.files} file pairs")
        plan_backlog(landing, plan, symbols)
    out = cluster_part(work, landing, symbols, plan.files_per_batch, plan.cluster_sizes, plan.cluster_pair_events)
    if tp is not None:
        out["backlog"]["alerts_agree"] = out["backlog"]["alerts"] == tp["alerts"]
    return out


def reproduce_command(quick: bool, growth_batches: int | None, only: str | None = None) -> str:
    """The command that repeats this run, for the summary."""
    if growth_batches is not None or only:
        return (
            f"market-spread bench{' --quick' if quick else ''}"
            + (f" --growth-batches {growth_batches}" if growth_batches is not None else "")
            + (f" --only {only}" if only else "")
        )
    return "market-spread bench --quick" if quick else "make bench"


def write_results(results: dict, out: Path, command: str) -> None:
    """latest.json, the plots and summary.md into `out`."""
    results["plots"] = plots(results, out)
    (out / "latest.json").write_text(json.dumps(results, indent=2, default=str))
    (out / "summary.md").write_text(summary_markdown(results, command))
    say(f"done in {results['seconds']}s: {out / 'latest.json'}, {out / 'summary.md'}, plots {results['plots']}")


def run(args: argparse.Namespace) -> int:
    parts = chosen_parts(args.only)
    growth_batches = getattr(args, "growth_batches", None)
    plan = plan_for(args.quick, growth_batches)
    out, work = Path(args.out), Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    # The idle part measures a stream from Kafka too, when a broker can be started.
    with_kafka = bool({"kafka", "idle", "dirty", "topic"} & parts)
    kafka_skipped = broker_available() if with_kafka else None
    s3_skipped = s3_unavailable() if "s3" in parts else None
    spark = _session(with_kafka and not kafka_skipped)
    results: dict = {"mode": "quick" if args.quick else "full", "machine": machine()}
    began = time.perf_counter()
    try:
        results.update(measure(spark, work, plan, parts, kafka_skipped, s3_skipped))
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    results["seconds"] = round(time.perf_counter() - began, 1)
    results["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    write_results(results, out, reproduce_command(args.quick, growth_batches, args.only))
    return 0

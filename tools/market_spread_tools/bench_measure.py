"""The benchmark's measurements on this machine (the latency runs are in bench_latency and
bench_kafka): throughput of the stream, of the stream command in its own process, of one plain
Spark batch job (the ceiling) and of the event-at-a-time reference on the same files; batch time as
batches pile up and against the number of symbols; and the machine and memory the figures came from.
"""

from __future__ import annotations

import os
import platform
import resource
import shutil
import statistics
import sys
import threading
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from market_spread.domain.rules import DEFAULT_THRESHOLDS
from market_spread.feeds.generate import Generator, write_backlog
from market_spread.runtime.paths import default_symbols
from market_spread.runtime.storage import Location, S3Path
from market_spread_tools import reference
from market_spread_tools.bench_phases import WARMUP_BATCHES, batch_time_stats
from market_spread_tools.bench_plans import Plan


def say(text: str) -> None:
    print(f"bench: {text}", flush=True)


def bench_symbols(n: int) -> list[str]:
    real = [s for s in default_symbols().read_text().split() if s]
    if n <= len(real):
        return real[:n]
    return real + [f"S{i:05d}" for i in range(n - len(real))]


def _peak_rss_mb() -> float:
    """Peak resident memory of this process's children (the Spark JVM) and itself, in MB."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(max(kids, own) / 1024, 1)


def peak_memory_mb(spark) -> float:
    """Peak resident memory of the Spark JVM, or (not found) of this process and its children."""
    return _jvm_rss_mb(spark) or _peak_rss_mb()


def _jvm_rss_mb(spark) -> float:
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return 0.0


def machine() -> dict:
    import pyspark

    try:
        import delta

        delta_version = getattr(delta, "__version__", None) or _dist_version("delta-spark")
    except ImportError:
        delta_version = None
    mem_kb = next(int(l.split()[1]) for l in Path("/proc/meminfo").read_text().splitlines() if l.startswith("MemTotal"))
    return {
        "cores": os.cpu_count(),
        "memory_gb": round(mem_kb / 1024 / 1024, 1),
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "delta_spark": delta_version,
        "platform": platform.platform(),
    }


def _dist_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def run_stream(
    spark,
    landing: Location,
    lake: Location,
    symbols: list[str],
    on_batch=None,
    stop: threading.Event | None = None,
    on_query=None,
    **spec_fields,
) -> None:
    """One stream over `landing`; `spec_fields` are further StreamSpec fields (trigger, files per batch).

    A lake on S3 is written under its lease, as the stream command does: the lease's renewals and
    its check before each batch's commits are part of what S3 costs."""
    from market_spread.lake.lock import LeaseLock
    from market_spread.stream.query import started, supervise
    from market_spread.stream.spec import StreamSpec

    lease = LeaseLock(lake) if isinstance(lake, S3Path) else None
    if lease:
        lease.acquire()
        spec_fields["before_commit"] = lease.check
    try:
        spec = StreamSpec(lake=lake, symbols=symbols, landing=landing, **{"available_now": True, **spec_fields})
        with started(spark, spec, on_batch or (lambda r: None)) as run:
            supervise(run.query, run.busy, stop or threading.Event())
        if on_query is not None:  # the ended query, e.g. for its progress (bench_phases.BatchTimes)
            on_query(run.query)
    finally:
        if lease:
            lease.release()


# Phases of a micro-batch, in order. The appends and the MERGE run side by side: "writes (wall)"
# is their elapsed time together, the others are each write's own time.
PHASES = {
    "parse": "parse + count",
    "check": "as-of check",
    "append_quotes": "append quote history",
    "append_alerts": "append alerts",
    "append_quarantine": "append quarantine",
    "merge": "MERGE symbol_state",
    "write": "writes (wall)",
    "commit_metrics": "commit batch_metrics",
    "sync": "flush to disk",
}


def plan_backlog(landing: Location, plan: Plan, symbols: list[str]) -> None:
    """The plan's backlog (Wallaroo's profile, one seed): the throughput, S3 and cluster parts
    measure the same files, so that their alerts can be compared."""
    gen = Generator(symbols, seed=42, profile="wallaroo", wide_share=0.05)
    write_backlog(landing, gen, plan.events // 2, plan.events - plan.events // 2, plan.files, "bench")


def throughput(spark, work: Path, plan: Plan) -> dict:
    symbols = bench_symbols(3_000)
    landing = work / "tp" / "landing"
    say(f"throughput: generating {plan.events:,} events in {plan.files} file pairs")
    plan_backlog(landing, plan, symbols)
    # Untimed: a small run first, so the JVM's JIT is warm for the stream as it is for the ceiling
    # and the reference that come after it.
    warm = work / "tp-warm"
    write_backlog(
        warm / "landing", Generator(symbols, seed=41, profile="wallaroo", wide_share=0.05), 10_000, 10_000, 2, "warm"
    )
    say("throughput: warm-up run (20,000 events, not timed)")
    run_stream(spark, warm / "landing", warm / "lake", symbols)
    engines = in_process_engines(spark, work / "tp-engines", landing, symbols, plan.files_per_batch, "throughput")
    batches, seconds, events = engines["batches"], engines["stream"]["seconds"], engines["stream"]["events"]
    phases = {k: sum(b.phases_ms.get(k, 0) for b in batches) for k in PHASES}
    say(
        "throughput: time per phase, summed over batches (ms): "
        + ", ".join(f"{PHASES[k]} {v:,}" for k, v in phases.items())
    )
    alerts = engines["stream"]["alerts"]
    own = stream_command(work / "tp-cli", landing, symbols, plan.files_per_batch)
    from market_spread_tools.bench_backlog import polars_baseline

    polars = polars_baseline(landing)
    ceiling, ref = engines["ceiling"], engines["reference"]
    ceiling_s, ceiling_alerts, ref_s, ref_total = ceiling["seconds"], ceiling["alerts"], ref["seconds"], ref["events"]
    big = None
    if plan.big_backlog_events:
        from market_spread_tools.bench_backlog import big_backlog

        big = big_backlog(spark, work, plan.big_backlog_events, symbols)
    return {
        "big_backlog": big,
        "events": events,
        "seconds": round(seconds, 2),
        "throughput_events_per_s": round(events / seconds),
        "alerts": alerts,
        "batches": len(batches),
        "phases_ms": phases,
        "spark_jobs_per_batch": statistics.median([b.spark_jobs or 0 for b in batches]),
        "stream_command_events_per_s": own["events_per_s"],
        "stream_command": own,
        "batch_ceiling_events_per_s": round(events / ceiling_s),
        "ceiling_alerts": ceiling_alerts,
        "reference_events_per_s": round(ref_total / ref_s),
        "reference_alerts": ref["alerts"],
        "in_process_peak_mb": {name: engines[name]["peak_mb"] for name in ("stream", "ceiling", "reference")},
        "polars_events_per_s": round(events / polars["seconds"]),
        "polars": polars,
        "alerts_agree": alerts == ceiling_alerts == ref["alerts"] == own["alerts"] == polars["alerts"],
    }


def in_process_engines(
    spark, work: Path, landing: Path, symbols: list[str], files_per_batch: int | None, label: str
) -> dict:
    """Over the same files, in this process (the JVM warm): `stream --available-now`, one plain Spark
    batch job and the event-at-a-time reference, each with its seconds, events, alerts and the peak
    memory of this process's tree while it ran; `batches`: the stream's batch results."""
    from market_spread_tools.bench_backlog import peak_during

    batches: list = []
    say(f"{label}: stream --available-now (in this process)")
    with peak_during() as peak:
        start = time.perf_counter()
        run_stream(spark, landing, work / "lake", symbols, on_batch=batches.append, max_files_per_batch=files_per_batch)
        seconds = time.perf_counter() - start
    events = sum(b.input_lines for b in batches)
    stream = {"seconds": round(seconds, 2), "events": events, "alerts": sum(b.alerts for b in batches), **peak}
    say(
        f"{label}: {events:,} events in {seconds:.1f}s = {events / seconds:,.0f} events/s, {stream['alerts']:,} alerts, "
        f"{statistics.median([b.spark_jobs or 0 for b in batches]):.0f} Spark jobs per batch (median), "
        f"peak {peak['peak_mb']:,.0f} MB"
    )
    say(f"{label}: ceiling: one plain Spark batch job over the same files")
    with peak_during() as peak:
        start = time.perf_counter()
        alerts = batch_ceiling(spark, landing, work / "ceiling", symbols)
        ceiling = {"seconds": round(time.perf_counter() - start, 2), "events": events, "alerts": alerts, **peak}
    say(
        f"{label}: ceiling: {events / ceiling['seconds']:,.0f} events/s ({alerts:,} alerts, peak {peak['peak_mb']:,.0f} MB)"
    )
    say(f"{label}: reference: event at a time over every file pair, a pair a batch")
    with peak_during() as peak:
        start = time.perf_counter()
        result = reference.run_reference(reference.file_pairs(landing), symbols)
        ref_s = time.perf_counter() - start
    total = result.quotes + result.orders + len(result.quarantined)
    ref = {"seconds": round(ref_s, 2), "events": total, "alerts": len(result.alerts), **peak}
    say(f"{label}: reference: {total / ref_s:,.0f} events/s ({ref['alerts']:,} alerts, peak {peak['peak_mb']:,.0f} MB)")
    return {"batches": batches, "stream": stream, "ceiling": ceiling, "reference": ref}


def stream_command(
    work: Path,
    landing: Path,
    symbols: list[str],
    files_per_batch: int | None,
    master: str | None = None,
    env: dict[str, str] | None = None,
    also=lambda: [],
    label: str = "throughput",
) -> dict:
    """Throughput as users run it: `market-spread stream --available-now` in a process of its own
    (on `master` when given, with `env`; `also`: run_measured's further processes).

    Its JVM is cold. The JVM's start is left out: the time is that of its batches, from the
    batch_metrics table it wrote (started_at to finished_at of each batch, summed)."""
    from deltalake import DeltaTable

    lake = work / "lake"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "symbols.txt").write_text("\n".join(symbols) + "\n")
    argv = [
        sys.executable,
        "-m",
        "market_spread.cli.main",
        "stream",
        "--landing",
        str(landing),
        "--lake",
        str(lake),
        "--symbols",
        str(work / "symbols.txt"),
        "--available-now",
    ]
    if files_per_batch:
        argv += ["--max-files-per-batch", str(files_per_batch)]
    if master:
        argv += ["--master", master]
    say(f"{label}: the stream command in a process of its own" + (f" on {master}" if master else ""))
    from market_spread_tools.bench_backlog import run_measured

    done, wall, peak_mb = run_measured(argv, env=env, also=also)
    if done.returncode != 0:
        raise RuntimeError(f"stream command failed ({done.returncode}): {done.stderr[-2000:]}")
    metrics = DeltaTable(str(lake / "batch_metrics")).to_pyarrow_table().to_pylist()
    events = sum(m["input_lines"] for m in metrics)
    times = [(m["finished_at"] - m["started_at"]).total_seconds() for m in metrics]
    batch_s, slowest = sum(times), max(times, default=0.0)
    out = {
        "events": events,
        "batches": len(metrics),
        "median_batch_seconds": round(statistics.median(times), 3) if times else None,
        # Spark jobs a batch ran (median): none or a few on the driver placement, more in Spark's tasks.
        "spark_jobs_per_batch": statistics.median([m["spark_jobs"] or 0 for m in metrics]) if metrics else None,
        "batch_seconds": round(batch_s, 2),
        "slowest_batch_seconds": round(slowest, 2),
        "wall_seconds": round(wall, 2),
        "peak_mb": peak_mb,
        "alerts": sum(m["alerts"] for m in metrics),
        "events_per_s": round(events / batch_s) if batch_s else None,
    }
    say(
        f"{label}: stream command: {events:,} events in {len(metrics)} batches, {batch_s:.1f}s of batches "
        f"({wall:.1f}s with the JVM's start; slowest batch {slowest:.1f}s; peak {peak_mb:,.0f} MB) = "
        f"{out['events_per_s']:,} events/s"
    )
    return out


def batch_ceiling(spark, landing: Path, out: Path, symbols: list[str]) -> int:
    """The same alerts by one plain Spark batch job: no state table, no streaming, one write. Written
    here on its own in Spark SQL (`from_json`, a window for the as-of choice), as a ceiling to
    measure the stream against: the product's kernel is not Spark SQL."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    fields = {
        "quotes": "symbol STRING, transact_time STRING, bid DECIMAL(18,8), offer DECIMAL(18,8), seq BIGINT",
        "orders": "order_id STRING, account BIGINT, symbol STRING, side STRING, qty DECIMAL(18,8), "
        "price DECIMAL(18,8), transact_time STRING, seq BIGINT",
    }

    def feed(name: str):
        rows = spark.read.text(str(landing / name)).select(F.from_json("value", fields[name]).alias("j")).select("j.*")
        rows = rows.withColumn("t", F.to_timestamp("transact_time")).where(F.col("symbol").isin(symbols))
        return rows.where("t IS NOT NULL" + (" AND bid > 0 AND offer > 0" if name == "quotes" else " AND qty > 0"))

    key = F.struct(F.col("seq").isNotNull(), F.coalesce("seq", F.lit(0)), "bid", "offer")
    quotes = feed("quotes").select(
        "symbol", "t", F.lit(0).alias("is_order"), key.alias("key"), F.struct("bid", "offer").alias("q")
    )
    orders = feed("orders").select("order_id", "symbol", "t", F.lit(1).alias("is_order"))
    both = quotes.unionByName(orders, allowMissingColumns=True)
    # Quotes before orders at the same time (a quote at the order's time counts); among quotes, the key order.
    window = Window.partitionBy("symbol").orderBy("t", "is_order", "key").rowsBetween(Window.unboundedPreceding, 0)
    checked = both.withColumn("cur", F.last("q", ignorenulls=True).over(window)).where("is_order = 1")
    bid, offer, th = F.col("cur.bid"), F.col("cur.offer"), DEFAULT_THRESHOLDS
    spread = offer - bid
    wide = (spread > 0) & (
        (spread >= F.lit(th.max_spread)) | (2 * spread >= F.lit(th.max_spread_ratio) * (bid + offer))
    )
    alerts = checked.where(F.col("cur").isNull() | wide).select("order_id", "symbol", "t")
    shutil.rmtree(out, ignore_errors=True)
    alerts.write.format("delta").save(str(out))
    return spark.read.format("delta").load(str(out)).count()


def growth(spark, work: Path, plan: Plan) -> dict:
    """Batch time as batches (and with them history, Delta logs and checkpoints) pile up.

    One available-now query over a backlog of small equal file pairs, one pair per micro-batch
    (`--max-files-per-batch 1`): every batch does the same work, so any growth is the lake's.
    """
    symbols = bench_symbols(3_000)
    landing, lake = work / "growth" / "landing", work / "growth" / "lake"
    total = plan.past_batches[-1]
    gen = Generator(symbols, seed=7, profile="wallaroo", wide_share=0.05)
    say(f"growth: writing {total} file pairs of 2,000 events")
    write_backlog(landing, gen, 1_000 * total, 1_000 * total, total, "g")
    durations: list[float] = []
    jobs: list[int] = []
    phases: list[dict[str, int]] = []

    def phases_at(n: int) -> dict[str, float]:
        """Median time of each phase (ms) over the 10 batches up to n: which phase grows."""
        window = phases[max(1, n - 10) : n]
        return {k: statistics.median(p.get(k, 0) for p in window) for k in sorted({k for p in window for k in p})}

    def on_batch(result) -> None:
        durations.append(result.seconds)
        jobs.append(result.spark_jobs or 0)
        phases.append(dict(result.phases_ms))
        if len(durations) % 500 == 0 or len(durations) in plan.past_batches:
            say(
                f"growth: {len(durations)}/{total} batches, last 10 average {statistics.mean(durations[-10:]):.2f}s, "
                f"phases (ms, median) {phases_at(len(durations))}"
            )

    run_stream(spark, landing, lake, symbols, on_batch=on_batch, max_files_per_batch=1)
    from market_spread.lake import compaction
    from market_spread.lake import tables as lake_mod

    # What the lake holds at the end: the stream compacts small files (lake.compaction), so this stays small.
    files = {
        t: compaction.data_files(lake_mod.table_path(lake, t))
        for t in ("alerts", "quotes", "batch_metrics", "symbol_state")
    }
    say(f"growth: data files per table at the end: {files}")
    # The mean of the 10 batches up to N, leaving out the first (the query's start and a cold JIT).
    at = {
        str(n): round(statistics.mean(durations[max(1, n - 10) : n]), 3)
        for n in plan.past_batches
        if n <= len(durations)
    }
    first, last = plan.past_batches[0], plan.past_batches[-1]
    return {
        "batch_seconds_at": at,
        "batch_seconds": [round(d, 3) for d in durations],
        "first": first,
        "last": last,
        "phases_ms_at": {str(n): phases_at(n) for n in plan.past_batches if n <= len(durations)},
        "growth_ratio": round(at[str(last)] / at[str(first)], 3),
        "median_batch_seconds": round(statistics.median(durations[1:] or durations), 3),
        "median_spark_jobs": statistics.median(jobs[1:] or jobs),
        "data_files_at_end": files,
        # Issue 43's tail target: p50/p99/max of the batches after the warm-up (the first 10).
        "batch_time_after_warmup": {**batch_time_stats(durations[WARMUP_BATCHES:]), "warmup_batches": WARMUP_BATCHES},
    }


def symbols_scaling(spark, work: Path, plan: Plan) -> dict:
    out = {}
    for n in plan.symbol_counts:
        symbols = bench_symbols(n)
        landing, lake = work / f"sym{n}" / "landing", work / f"sym{n}" / "lake"
        gen = Generator(symbols, seed=n, profile="wallaroo", wide_share=0.05)
        durations: list[float] = []
        for i in range(3):
            write_backlog(landing, gen, 10_000, 10_000, 1, f"s{i}")
            run_stream(spark, landing, lake, symbols, on_batch=lambda r, d=durations: d.append(r.seconds))
        out[str(n)] = round(statistics.mean(durations[1:]), 3)  # the first batch also creates tables
        say(f"symbols: {n:,} symbols, {out[str(n)]:.2f}s per 20k-event batch")
    return out

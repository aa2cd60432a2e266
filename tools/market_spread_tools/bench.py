"""`market-spread bench`: throughput, latency and scaling, with baselines, figures and plots.

Measures on this machine, in one run:
- throughput of `stream --available-now` over a generated backlog (Wallaroo profile), every Delta
  commit included;
- the event-at-a-time reference (Wallaroo's way) on the same files;
- the Spark batch ceiling: one plain Spark job computing the same alerts from the same files,
  without state table, streaming or Delta commits per batch;
- latency in continuous mode at fixed input rates: file landed -> its alerts committed;
- batch time against the number of past batches and against the number of symbols;
- where the time of a micro-batch goes (parse, as-of check, appends, MERGE).
Writes bench/results/latest.json, PNG plots and summary.md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import threading
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from market_spread.domain.rules import DEFAULT_THRESHOLDS
from market_spread.runtime.paths import default_symbols


@dataclass(frozen=True)
class Plan:
    events: int  # backlog for throughput
    files: int
    files_per_batch: int | None  # None: one batch takes every file, as `stream` does by default
    rates: tuple[int, ...]  # events/s for the latency runs
    rate_seconds: float
    past_batches: tuple[int, ...]  # checkpoints of the batch-growth run
    symbol_counts: tuple[int, ...]
    reference_events: int


# Quick: small enough for a few minutes; growth keeps 10 and 20 batches so that each window of
# 10 batches holds one of Delta's log checkpoints (every 10th commit), as in the full run.
# The quick backlog is cut into 3 batches, so that its throughput is that of several batches.
QUICK = Plan(120_000, 6, 2, (1_000, 10_000), 12, (10, 20), (350, 3_000), 120_000)
FULL = Plan(2_000_000, 40, None, (1_000, 10_000, 50_000), 60, (100, 1_000, 10_000), (350, 3_000, 30_000), 2_000_000)


def with_growth_batches(plan: Plan, batches: int | None) -> Plan:
    """The plan with its growth run cut (or stretched) to `batches` batches: the full run's 10,000
    batches take hours at 2-3 s each. Keeps the plan's earlier checkpoints below it."""
    if batches is None:
        return plan
    if batches < 20:
        raise ValueError(f"--growth-batches: at least 20 (each figure is the mean of 10 batches), not {batches}")
    earlier = tuple(n for n in plan.past_batches if n < batches) or (batches // 2,)
    return replace(plan, past_batches=earlier + (batches,))


def _say(text: str) -> None:
    print(f"bench: {text}", flush=True)


def _symbols(n: int) -> list[str]:
    real = [s for s in default_symbols().read_text().split() if s]
    if n <= len(real):
        return real[:n]
    return real + [f"S{i:05d}" for i in range(n - len(real))]


def _peak_rss_mb() -> float:
    """Peak resident memory of this process's children (the Spark JVM) and itself, in MB."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(max(kids, own) / 1024, 1)


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
        "cores": os.cpu_count(), "memory_gb": round(mem_kb / 1024 / 1024, 1), "python": platform.python_version(),
        "pyspark": pyspark.__version__, "delta_spark": delta_version, "platform": platform.platform(),
    }


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _stream(spark, landing: Path, lake: Path, symbols: list[str], on_batch=None, stop: threading.Event | None = None,
            **spec_fields) -> None:
    """One stream over `landing`; `spec_fields` are further StreamSpec fields (trigger, files per batch)."""
    from market_spread.stream.query import StreamSpec, start_query, supervise

    spec = StreamSpec(lake=lake, symbols=symbols, landing=landing, **spec_fields)
    query, busy = start_query(spark, spec, on_batch or (lambda r: None))
    supervise(query, busy, stop or threading.Event())


# Phases of a micro-batch, in order. The appends and the MERGE run side by side: "writes (wall)"
# is their elapsed time together, the others are each write's own time.
PHASES = {
    "parse": "parse + count", "check": "as-of check", "append_quotes": "append quote history",
    "append_alerts": "append alerts", "append_quarantine": "append quarantine", "merge": "MERGE symbol_state",
    "write": "writes (wall)", "commit_metrics": "commit batch_metrics",
}


def throughput(spark, work: Path, plan: Plan) -> dict:
    from market_spread_tools import reference
    from market_spread.feeds.generate import Generator, write_backlog

    symbols = _symbols(3_000)
    landing, lake = work / "tp" / "landing", work / "tp" / "lake"
    gen = Generator(symbols, seed=42, profile="wallaroo", wide_share=0.05)
    _say(f"throughput: generating {plan.events:,} events in {plan.files} file pairs")
    write_backlog(landing, gen, plan.events // 2, plan.events - plan.events // 2, plan.files, "bench")
    # Untimed: a small run first, so the JVM's JIT is warm for the stream as it is for the ceiling
    # and the reference that come after it.
    warm = work / "tp-warm"
    write_backlog(warm / "landing", Generator(symbols, seed=41, profile="wallaroo", wide_share=0.05),
                  10_000, 10_000, 2, "warm")
    _say("throughput: warm-up run (20,000 events, not timed)")
    _stream(spark, warm / "landing", warm / "lake", symbols)
    batches: list = []
    _say("throughput: stream --available-now (in this process)")
    start = time.perf_counter()
    _stream(spark, landing, lake, symbols, on_batch=batches.append, max_files_per_batch=plan.files_per_batch)
    seconds = time.perf_counter() - start
    events = sum(b.input_lines for b in batches)
    phases = {k: sum(b.phases_ms.get(k, 0) for b in batches) for k in PHASES}
    _say("throughput: time per phase, summed over batches (ms): "
         + ", ".join(f"{PHASES[k]} {v:,}" for k, v in phases.items()))
    alerts = sum(b.alerts for b in batches)
    _say(f"throughput: {events:,} events in {seconds:.1f}s = {events / seconds:,.0f} events/s, {alerts:,} alerts, "
         f"{statistics.median([b.spark_jobs or 0 for b in batches]):.0f} Spark jobs per batch (median)")
    own = stream_command(work / "tp-cli", landing, symbols, plan.files_per_batch)

    _say("ceiling: one plain Spark batch job over the same files")
    start = time.perf_counter()
    ceiling_alerts = batch_ceiling(spark, landing, work / "ceiling", symbols)
    ceiling_s = time.perf_counter() - start
    _say(f"ceiling: {events / ceiling_s:,.0f} events/s ({ceiling_alerts:,} alerts)")

    ref_events = min(plan.reference_events, events)
    files = reference.landing_files(landing)
    _say(f"reference: event at a time over {'all' if ref_events == events else ref_events} events")
    start = time.perf_counter()
    result = reference.run_reference([files], symbols)
    ref_s = time.perf_counter() - start
    ref_total = result.quotes + result.orders + len(result.quarantined)
    _say(f"reference: {ref_total / ref_s:,.0f} events/s ({len(result.alerts):,} alerts)")
    return {
        "events": events, "seconds": round(seconds, 2), "throughput_events_per_s": round(events / seconds),
        "alerts": alerts, "batches": len(batches), "phases_ms": phases,
        "spark_jobs_per_batch": statistics.median([b.spark_jobs or 0 for b in batches]),
        "stream_command_events_per_s": own["events_per_s"], "stream_command": own,
        "batch_ceiling_events_per_s": round(events / ceiling_s), "ceiling_alerts": ceiling_alerts,
        "reference_events_per_s": round(ref_total / ref_s), "reference_alerts": len(result.alerts),
        "alerts_agree": alerts == ceiling_alerts == len(result.alerts),
    }


def stream_command(work: Path, landing: Path, symbols: list[str], files_per_batch: int | None) -> dict:
    """Throughput as users run it: `market-spread stream --available-now` in a process of its own.

    Its JVM is cold. The JVM's start is left out: the time is that of its batches, from the
    batch_metrics table it wrote (started_at to finished_at of each batch, summed)."""
    import subprocess
    import sys

    from deltalake import DeltaTable

    lake = work / "lake"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "symbols.txt").write_text("\n".join(symbols) + "\n")
    argv = [sys.executable, "-m", "market_spread.cli.main", "stream", "--landing", str(landing), "--lake", str(lake),
            "--symbols", str(work / "symbols.txt"), "--available-now"]
    if files_per_batch:
        argv += ["--max-files-per-batch", str(files_per_batch)]
    _say("throughput: the stream command in a process of its own")
    began = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"stream command failed ({done.returncode}): {done.stderr[-2000:]}")
    metrics = DeltaTable(str(lake / "batch_metrics")).to_pyarrow_table().to_pylist()
    events = sum(m["input_lines"] for m in metrics)
    batch_s = sum((m["finished_at"] - m["started_at"]).total_seconds() for m in metrics)
    out = {"events": events, "batches": len(metrics), "batch_seconds": round(batch_s, 2),
           "wall_seconds": round(wall, 2), "events_per_s": round(events / batch_s) if batch_s else None}
    _say(f"throughput: stream command: {events:,} events in {len(metrics)} batches, {batch_s:.1f}s of batches "
         f"({wall:.1f}s with the JVM's start) = {out['events_per_s']:,} events/s")
    return out


def batch_ceiling(spark, landing: Path, out: Path, symbols: list[str]) -> int:
    """The same alerts by one Spark batch job: no state table, no streaming, one write."""
    from pyspark.sql import functions as F

    from market_spread.transforms import parsing
    from market_spread.transforms.asof import asof_alerts

    def feed(name: str):
        # _metadata exists only on the file relation itself: select it before the union.
        return spark.read.text(str(landing / name)).select(
            F.lit(name).alias("stream"), "value", F.col("_metadata.file_path").alias("source_file"))

    raw = feed("quotes").unionByName(feed("orders"))
    parsed = parsing.parse_lines(parsing.nonblank_lines(raw), symbols)
    quotes = parsing.valid_quotes(parsed, DEFAULT_THRESHOLDS).select("symbol", "bid", "offer", "quote_time", "seq")
    alerts = asof_alerts(quotes, parsing.valid_orders(parsed), DEFAULT_THRESHOLDS, 0)
    shutil.rmtree(out, ignore_errors=True)
    alerts.write.format("delta").save(str(out))
    return spark.read.format("delta").load(str(out)).count()


def latency_figures(started: dict[str, float], done: dict[str, float]) -> tuple[dict, list[float], int]:
    """p50/p95/p99 (ms) and the CDF of done - started over the names that are done; the sorted
    latencies (s); how many started names are not done (behind)."""
    latencies = sorted(done[name] - at for name, at in started.items() if name in done)
    q = lambda p: round(1000 * latencies[min(len(latencies) - 1, int(p * len(latencies)))], 1) if latencies else None  # noqa: E731
    figures = {"p50": q(0.50), "p95": q(0.95), "p99": q(0.99), "cdf_ms": [round(1000 * x, 1) for x in latencies]}
    return figures, latencies, len(started) - len(latencies)


def latency(spark, work: Path, plan: Plan) -> dict:
    """Continuous mode at fixed rates: each file's latency from its landing to its batch's last commit."""
    from market_spread.feeds.generate import Generator, write_atomically

    symbols = _symbols(3_000)
    out = {}
    for rate in plan.rates:
        landing, lake = work / f"lat{rate}" / "landing", work / f"lat{rate}" / "lake"
        landed: dict[str, float] = {}
        stop = threading.Event()

        warmed = threading.Event()

        done: dict[str, float] = {}

        def on_batch(result) -> None:
            # A landing is a quotes file and an orders file of one name: it is through when both are.
            now = time.time()
            done.update((Path(f).name, now) for f in result.files)
            warmed.set()

        def land(gen, name: str, count: int) -> None:
            events = gen.events(count // 2, count - count // 2)
            write_atomically(landing / "quotes", name, [l for f, _, l in events if f == "quotes"])
            write_atomically(landing / "orders", name, [l for f, _, l in events if f == "orders"])

        def feed() -> None:
            gen = Generator(symbols, seed=rate, profile="wallaroo", wide_share=0.05,
                            start=datetime.now(timezone.utc))
            # Not measured: the query's start (table creation, first batch, JIT) and then
            # `warmup` seconds at the rate, so the figures are those of a stream in its steady state.
            land(gen, "warm-start.jsonl", 100)
            if not warmed.wait(timeout=300):
                stop.set()
                return
            tick, n, began = 0.25, 0, time.monotonic()
            while time.monotonic() - began < warmup + plan.rate_seconds:
                name = f"lat-{n:06d}.jsonl"
                land(gen, name, int(rate * tick))
                if time.monotonic() - began >= warmup:
                    landed[name] = time.time()
                n += 1
                time.sleep(max(0.0, began + n * tick - time.monotonic()))
            time.sleep(8)  # let the last files through
            stop.set()

        (landing / "quotes").mkdir(parents=True, exist_ok=True)
        (landing / "orders").mkdir(parents=True, exist_ok=True)
        warmup = max(5.0, plan.rate_seconds / 3)
        _say(f"latency: {rate:,} events/s for {plan.rate_seconds:.0f}s after a {warmup:.0f}s warm-up")
        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        _stream(spark, landing, lake, symbols, available_now=False, interval=0.5, on_batch=on_batch, stop=stop)
        feeder.join()
        # Files still waiting when the run ended count as "behind": a stream that cannot keep up
        # with the rate shows it there, not as flattering percentiles over the files it did take.
        figures, latencies, behind = latency_figures(landed, done)
        out[str(rate)] = {**figures, "file_pairs": len(latencies), "files_behind": behind}
        _say(f"latency at {rate:,}/s: p50 {out[str(rate)]['p50']} ms, p95 {out[str(rate)]['p95']} ms, "
             f"p99 {out[str(rate)]['p99']} ms over {len(latencies)} file pairs"
             + (f"; {behind} file pairs not yet processed when the run ended (the stream fell behind)" if behind else ""))
    return out


def growth(spark, work: Path, plan: Plan) -> dict:
    """Batch time as batches (and with them history, Delta logs and checkpoints) pile up.

    One available-now query over a backlog of small equal file pairs, one pair per micro-batch
    (`--max-files-per-batch 1`): every batch does the same work, so any growth is the lake's.
    """
    from market_spread.feeds.generate import Generator, write_backlog

    symbols = _symbols(3_000)
    landing, lake = work / "growth" / "landing", work / "growth" / "lake"
    total = plan.past_batches[-1]
    gen = Generator(symbols, seed=7, profile="wallaroo", wide_share=0.05)
    _say(f"growth: writing {total} file pairs of 2,000 events")
    write_backlog(landing, gen, 1_000 * total, 1_000 * total, total, "g")
    durations: list[float] = []
    jobs: list[int] = []
    phases: list[dict[str, int]] = []

    def phases_at(n: int) -> dict[str, float]:
        """Median time of each phase (ms) over the 10 batches up to n: which phase grows."""
        window = phases[max(1, n - 10):n]
        return {k: statistics.median(p.get(k, 0) for p in window) for k in sorted({k for p in window for k in p})}

    def on_batch(result) -> None:
        durations.append(result.seconds)
        jobs.append(result.spark_jobs or 0)
        phases.append(dict(result.phases_ms))
        if len(durations) % 500 == 0 or len(durations) in plan.past_batches:
            _say(f"growth: {len(durations)}/{total} batches, last 10 average {statistics.mean(durations[-10:]):.2f}s, "
                 f"phases (ms, median) {phases_at(len(durations))}")

    _stream(spark, landing, lake, symbols, on_batch=on_batch, max_files_per_batch=1)
    from market_spread.lake import compaction, tables as lake_mod

    # What the lake holds at the end: the stream compacts small files (lake.compaction), so this stays small.
    files = {t: compaction.data_files(lake_mod.table_path(lake, t)) for t in ("alerts", "quotes", "batch_metrics", "symbol_state")}
    _say(f"growth: data files per table at the end: {files}")
    # The mean of the 10 batches up to N, leaving out the first (the query's start and a cold JIT).
    at = {str(n): round(statistics.mean(durations[max(1, n - 10):n]), 3) for n in plan.past_batches if n <= len(durations)}
    first, last = plan.past_batches[0], plan.past_batches[-1]
    return {"batch_seconds_at": at, "batch_seconds": [round(d, 3) for d in durations], "first": first, "last": last,
            "phases_ms_at": {str(n): phases_at(n) for n in plan.past_batches if n <= len(durations)},
            "growth_ratio": round(at[str(last)] / at[str(first)], 3),
            "median_batch_seconds": round(statistics.median(durations[1:] or durations), 3),
            "median_spark_jobs": statistics.median(jobs[1:] or jobs), "data_files_at_end": files}


def symbols_scaling(spark, work: Path, plan: Plan) -> dict:
    from market_spread.feeds.generate import Generator, write_backlog

    out = {}
    for n in plan.symbol_counts:
        symbols = _symbols(n)
        landing, lake = work / f"sym{n}" / "landing", work / f"sym{n}" / "lake"
        gen = Generator(symbols, seed=n, profile="wallaroo", wide_share=0.05)
        durations: list[float] = []
        for i in range(3):
            write_backlog(landing, gen, 10_000, 10_000, 1, f"s{i}")
            _stream(spark, landing, lake, symbols, on_batch=lambda r: durations.append(r.seconds))
        out[str(n)] = round(statistics.mean(durations[1:]), 3)  # the first batch also creates tables
        _say(f"symbols: {n:,} symbols, {out[str(n)]:.2f}s per 20k-event batch")
    return out


def plots(results: dict, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    tp = results.get("throughput")
    if tp:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        # Two-line labels: on one line the three names run into each other.
        names = ["stream\n(this product)", "Spark batch\nceiling", "reference\n(event at a time)"]
        values = [tp["throughput_events_per_s"], tp["batch_ceiling_events_per_s"], tp["reference_events_per_s"]]
        ax.bar(names, values, color=["#1f77b4", "#7f7f7f", "#ff7f0e"])
        ax.set_ylabel("events / s")
        ax.set_title("Throughput on the same backlog")
        for i, v in enumerate(values):
            ax.text(i, v, f"{v:,}", ha="center", va="bottom")
        ax.set_ylim(0, max(values) * 1.12)  # room for the figure above the tallest bar
        fig.tight_layout()
        fig.savefig(out / "throughput.png", dpi=110)
        made.append("throughput.png")
        fig, ax = plt.subplots(figsize=(7, 3.8))
        keys = [k for k in PHASES if k in tp["phases_ms"]][::-1]
        colors = ["#ff7f0e" if k in ("append_quotes", "append_alerts", "append_quarantine", "merge") else "#1f77b4"
                  for k in keys]
        ax.barh([PHASES[k] for k in keys], [tp["phases_ms"][k] / 1000 for k in keys], color=colors)
        ax.set_xlabel("seconds (sum over batches)")
        ax.set_title("Where the time of the micro-batches goes\n(orange: concurrent writes, inside 'writes (wall)')")
        fig.tight_layout()
        fig.savefig(out / "phases.png", dpi=110)
        made.append("phases.png")
    lat = results.get("latency_ms")
    if lat:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for rate, d in lat.items():
            xs = d["cdf_ms"]
            ax.plot(xs, [(i + 1) / len(xs) for i in range(len(xs))], label=f"{int(rate):,} events/s")
        ax.set_xlabel("latency: file landed -> alerts committed (ms)")
        ax.set_ylabel("share of files")
        ax.legend()
        ax.set_title("Latency CDF in continuous mode")
        fig.tight_layout()
        fig.savefig(out / "latency_cdf.png", dpi=110)
        made.append("latency_cdf.png")
    gr = results.get("growth")
    if gr:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot(range(1, len(gr["batch_seconds"]) + 1), gr["batch_seconds"], ".", markersize=3)
        ax.set_xlabel("batch number")
        ax.set_ylabel("batch time (s)")
        ax.set_title("Batch time as history and Delta log grow")
        fig.tight_layout()
        fig.savefig(out / "batch_growth.png", dpi=110)
        made.append("batch_growth.png")
    return made


def targets(results: dict) -> list[tuple[str, str, bool]]:
    """The targets of the performance issue against the figures of this run: (target, measured, met)."""
    out = []
    tp = results.get("throughput")
    if tp:
        ev, ref, ceil = tp["throughput_events_per_s"], tp["reference_events_per_s"], tp["batch_ceiling_events_per_s"]
        out += [(">= 2x the event-at-a-time reference", f"{ev / ref:.2f}x", ev >= 2 * ref),
                (">= 70 % of the Spark batch ceiling", f"{100 * ev / ceil:.0f} %", 10 * ev >= 7 * ceil)]
        own = tp.get("stream_command_events_per_s")
        if own:
            out.append(("stream command (own process) >= 2x the reference", f"{own / ref:.2f}x", own >= 2 * ref))
    g = results.get("batch_time_growth") or {}
    if g.get("median_batch_seconds") is not None:
        out.append(("median 2,000-event micro-batch <= 1.0 s", f"{g['median_batch_seconds']} s",
                    g["median_batch_seconds"] <= 1.0))
    for rate, limit in (("1000", 2000), ("10000", 3000)):
        at = (results.get("latency_ms") or {}).get(rate)
        if at:
            p99, behind = at.get("p99"), at.get("files_behind", 0)
            out.append((f"p99 latency <= {limit // 1000} s at {int(rate):,} events/s",
                        f"{p99} ms" + (f", {behind} file pairs behind" if behind else ""),
                        p99 is not None and p99 <= limit and not behind))
    at50 = (results.get("latency_ms") or {}).get("50000")
    if at50:
        out.append(("keeps up at 50,000 events/s", f"{at50.get('files_behind', 0)} file pairs behind",
                    not at50.get("files_behind")))
    if g.get("growth_ratio") is not None:
        out.append((f"batch time after {g.get('last', 'the last')} batches <= 1.1x that after {g.get('first', 'the first')}",
                    f"{g['growth_ratio']}x", g["growth_ratio"] <= 1.1))
    return out


def limits(results: dict) -> list[str]:
    """What limits the figures, from this run's own measurements: for the summary of missed targets."""
    out = []
    tp = results.get("throughput")
    if tp and tp.get("seconds"):
        ph = tp["phases_ms"]
        share = lambda key: 100 * ph.get(key, 0) / (1000 * tp["seconds"])  # noqa: E731
        out.append(
            f"Throughput: of the stream's {tp['seconds']} s, parsing, validating, caching and counting the batch took "
            f"{share('parse'):.0f} %, the as-of check {share('check'):.0f} %, the concurrent writes (quote history, "
            f"alerts, quarantine and the state MERGE) {share('write'):.0f} % and the batch_metrics commit "
            f"{share('commit_metrics'):.0f} %. The batch ceiling ({tp['batch_ceiling_events_per_s']:,} events/s) has no "
            "state table, no quote history and one commit instead of five; the reference has no commit at all.")
    g = results.get("growth") or {}
    if g.get("batch_seconds"):
        floor = statistics.median(g["batch_seconds"][1:] or g["batch_seconds"])
        out.append(
            f"Latency: even a micro-batch of only 2,000 events takes {floor:.1f} s (median of the growth run, "
            f"{g.get('median_spark_jobs', '?')} Spark jobs each), mostly planning the parse and the as-of check "
            "and their jobs (the commits are delta-rs's, milliseconds each); a landed file "
            "waits for the batch in flight and then for its own, so p99 is several batch times.")
    return out


def summary_markdown(results: dict, command: str) -> str:
    m = results["machine"]
    lines = [f"# Benchmark ({results['mode']}, {results['finished_at']})", "",
             f"Machine: {m['cores']} cores, {m['memory_gb']} GB, Python {m['python']}, PySpark {m['pyspark']}, "
             f"delta-spark {m['delta_spark']}. Reproduce: `{command}`.", ""]
    tp = results.get("throughput")
    if tp:
        lines += ["| system | events/s |", "| --- | --- |",
                  f"| stream --available-now (every Delta commit included) | {tp['throughput_events_per_s']:,} |",
                  f"| stream command in its own process (batch time from batch_metrics) | {tp.get('stream_command_events_per_s') or 0:,} |",
                  f"| Spark batch ceiling (one plain batch job) | {tp['batch_ceiling_events_per_s']:,} |",
                  f"| reference, event at a time (Wallaroo's way) | {tp['reference_events_per_s']:,} |", "",
                  f"{tp['events']:,} events in {tp['batches']} micro-batch(es); alerts agree across the three: "
                  f"{tp['alerts_agree']}. Time per phase (ms): {tp['phases_ms']}. Spark jobs per batch (median): "
                  f"{tp.get('spark_jobs_per_batch')}.", ""]
    lat = results.get("latency_ms")
    if lat:
        lines += ["| input rate (events/s) | p50 ms | p95 ms | p99 ms | file pairs measured | file pairs behind at the end |",
                  "| --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {int(r):,} | {d['p50']} | {d['p95']} | {d['p99']} | {d.get('file_pairs', '')} | {d.get('files_behind', 0)} |"
                  for r, d in lat.items()]
        lines.append("")
    klat = results.get("kafka_latency_ms")
    if klat:
        lines += ["Kafka source (record produced -> its alerts committed; ticks of 0.25 s of input):", "",
                  "| input rate (events/s) | p50 ms | p95 ms | p99 ms | ticks measured | ticks behind at the end |",
                  "| --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {int(r):,} | {d['p50']} | {d['p95']} | {d['p99']} | {d.get('ticks', '')} | {d.get('ticks_behind', 0)} |"
                  for r, d in klat.items()]
        lines.append("")
    elif results.get("kafka_latency_skipped"):
        lines += [f"Kafka latency: skipped ({results['kafka_latency_skipped']}).", ""]
    if results.get("batch_time_growth"):
        g = results["batch_time_growth"]
        lines += [f"Batch time after N batches (s): {g['batch_seconds_at']}; ratio last/first {g['growth_ratio']}; "
                  f"median 2,000-event batch {g.get('median_batch_seconds')} s, {g.get('median_spark_jobs')} Spark jobs.", ""]
    if results.get("symbols_scaling"):
        lines += [f"Batch time (s, 20k events) by number of symbols: {results['symbols_scaling']}.", ""]
    lines += [f"Peak memory of the job: {results['peak_memory_mb']} MB.", ""]
    checks = targets(results)
    if checks:
        lines += ["| target | measured | met |", "| --- | --- | --- |"]
        lines += [f"| {name} | {value} | {'yes' if ok else 'no'} |" for name, value, ok in checks]
        lines.append("")
        if not all(ok for _, _, ok in checks):
            lines += ["## What limits it", ""] + [f"- {text}" for text in limits(results)]
            lines += ["", "More in the README's Performance section.", ""]
    lines += [f"![{p}]({p})" for p in results.get("plots", [])]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from market_spread.cli.main import UsageError
    from market_spread.runtime.spark import build_session

    parts = set((args.only or "throughput,latency,growth,symbols,kafka").split(","))
    unknown = parts - {"throughput", "latency", "growth", "symbols", "kafka"}
    if unknown:
        raise UsageError(f"--only: unknown part(s) {', '.join(sorted(unknown))}")
    growth_batches = getattr(args, "growth_batches", None)
    try:
        plan = with_growth_batches(QUICK if args.quick else FULL, growth_batches)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    out, work = Path(args.out), Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    from market_spread_tools.bench_kafka import broker_available

    kafka_skipped = broker_available() if "kafka" in parts else None
    extra = None
    if "kafka" in parts and not kafka_skipped:
        from market_spread.stream.kafka_source import session_conf

        extra = session_conf()
    spark = build_session("market-spread-bench", shuffle_partitions=4, extra_conf=extra, long_running=True)
    results: dict = {"mode": "quick" if args.quick else "full", "machine": machine()}
    began = time.perf_counter()
    try:
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
                _say(f"kafka latency: skipped: {kafka_skipped}")
                results["kafka_latency_skipped"] = kafka_skipped
            else:
                from market_spread_tools.bench_kafka import kafka_latency

                # The file source's rates up to 10,000 events/s, for the row beside its own.
                rates = tuple(r for r in plan.rates if r <= 10_000)
                results["kafka_latency_ms"] = kafka_latency(spark, work, rates, plan.rate_seconds, _symbols(3_000))
        results["peak_memory_mb"] = _jvm_rss_mb(spark) or _peak_rss_mb()
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    results["seconds"] = round(time.perf_counter() - began, 1)
    results["finished_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    results["plots"] = plots(results, out)
    (out / "latest.json").write_text(json.dumps(results, indent=2, default=str))
    command = "market-spread bench --quick" if args.quick else "make bench"
    if growth_batches is not None:
        command = f"market-spread bench{' --quick' if args.quick else ''} --growth-batches {growth_batches}"
    (out / "summary.md").write_text(summary_markdown(results, command))
    _say(f"done in {results['seconds']}s: {out / 'latest.json'}, {out / 'summary.md'}, plots {results['plots']}")
    return 0

"""Profile small micro-batches: time per phase and Spark jobs per batch.

    .venv/bin/python tools/profile_batches.py [--pairs 12] [--events 2000] [--symbols 3000] [--alter SQL]

Lands PAIRS file pairs of EVENTS events each, runs the stream (available-now, one pair per batch)
and prints, per batch, its wall time, phases and the number of Spark jobs it ran. Used to measure
performance changes one at a time on the same machine in the same run. `--alter` (repeatable) runs
`ALTER TABLE delta.`<table>` SQL` on every table of the new lake before the stream starts, as a
user turning on a feature would (for example `SET TBLPROPERTIES ('delta.enableRowTracking' =
'true')`, which sends the commits through delta-spark: lake.protocol).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "jobs"))


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of a process so far: less sensitive than wall time to other load."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def codegen_compiles(spark) -> tuple[int, float]:
    """Whole-stage and expression classes Janino compiled so far, and their total compile time (ms):
    a plan whose generated code differs from every cached one (e.g. a new literal) is compiled again."""
    hist = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    return hist.getCount(), hist.getSnapshot().getMean() * hist.getCount()


def gc_seconds(spark) -> float:
    """Time the driver JVM has spent in garbage collection so far (all collectors)."""
    beans = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    return sum(beans.get(i).getCollectionTime() for i in range(beans.size())) / 1000


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=12)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--symbols", type=int, default=3000)
    parser.add_argument("--work", default=None)
    parser.add_argument("--jobs", action="store_true", help="list each batch's Spark jobs")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting")
    parser.add_argument("--alter", action="append", default=[], metavar="SQL", help="ALTER TABLE each table: SQL")
    return parser.parse_args()


def print_jobs(spark, first: int, last: int) -> None:
    """One line per Spark job in [first, last): time, stages, tasks, and where in our code it ran."""
    store = spark.sparkContext._jsc.sc().statusStore()
    for job_id in range(first, last):
        try:
            data = store.job(job_id)
            took = data.completionTime().get().getTime() - data.submissionTime().get().getTime()
            stage = store.lastStageAttempt(data.stageIds().head())
            frames = [
                l.strip()
                for l in stage.details().splitlines()
                if ("delta" in l or "market_spread" in l or "python" in l.lower()) and "Logging" not in l
            ]
            where = " < ".join(
                f.split("(")[0].split(".")[-2] + "." + f.split("(")[0].split(".")[-1] for f in frames[:4]
            )
            desc = data.description()
            desc = desc.get() if desc.isDefined() else ""
            # The stream prefixes its own query id and batch: keep what follows.
            desc = " ".join(desc.split("\n")[3:] if desc.startswith("\nid =") else desc.split("\n")).replace(
                "market-spread ", ""
            )
            print(
                f"   job {job_id}: {took:5d} ms  {data.stageIds().size()} st {data.numTasks():3d} tasks  {stage.name()[:50]} | {desc[:110]} {where[:100]}"
            )
        except Exception as exc:  # noqa: BLE001 - evicted from the store
            print(f"   job {job_id}: ? {str(exc)[:120]}")


class Profiler:
    """The stream's batch callback: what each batch cost since the one before, printed and kept."""

    def __init__(self, spark, list_jobs: bool) -> None:
        from market_spread.runtime.spark import spark_jobs_so_far

        self.spark, self.list_jobs, self.jobs_so_far = spark, list_jobs, spark_jobs_so_far
        self.jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
        self.rows: list[tuple] = []  # (result, jobs, seconds since last, JVM CPU s, codegen compiles)
        self.last = self._now()

    def _now(self) -> tuple:
        spark = self.spark
        return (
            self.jobs_so_far(spark),
            time.perf_counter(),
            cpu_seconds(self.jvm),
            codegen_compiles(spark),
            gc_seconds(spark),
        )

    def __call__(self, result) -> None:
        last = self.last
        now = self.last = self._now()
        now_jobs, wall, cpu, compiles, gc = now
        self.rows.append((result, now_jobs - last[0], wall - last[1], cpu - last[2], compiles[0] - last[3][0]))
        print(
            f"batch {result.batch_id}: {result.seconds:.2f}s in batch, {wall - last[1]:.2f}s since last, "
            f"{now_jobs - last[0]} jobs, JVM CPU {cpu - last[2]:.2f}s (GC {gc - last[4]:.2f}s), {compiles[0] - last[3][0]} codegen compiles "
            f"({compiles[1] - last[3][1]:.0f} ms), {result.input_lines} lines, {result.alerts} alerts; {result.phases_ms}",
            flush=True,
        )
        if self.list_jobs:
            print_jobs(self.spark, last[0], now_jobs)


def print_summary(rows: list[tuple], total: float, query) -> None:
    """Medians over the steady batches (the third on), then the streaming engine's own steps."""
    steady = rows[2:] or rows
    print(
        f"\n{len(rows)} batches in {total:.1f}s; steady state (batches 2+): median batch "
        f"{statistics.median(r[0].seconds for r in steady):.2f}s, median between batches "
        f"{statistics.median(r[2] for r in steady):.2f}s, median jobs {statistics.median(r[1] for r in steady)}, "
        f"median JVM CPU {statistics.median(r[3] for r in steady):.2f}s, "
        f"median codegen compiles {statistics.median(r[4] for r in steady)}"
    )
    times = sorted(r[0].seconds for r in steady)
    print(
        f"batch time over the steady batches: p90 {times[int(0.9 * (len(times) - 1))]:.2f}s, max {times[-1]:.2f}s, "
        f"mean {statistics.mean(times):.2f}s"
    )
    keys = sorted({k for r in steady for k in r[0].phases_ms})
    print(
        "median phases (ms): "
        + ", ".join(f"{k} {statistics.median(r[0].phases_ms.get(k, 0) for r in steady):.0f}" for k in keys)
    )
    spread = {k: sorted(r[0].phases_ms.get(k, 0) for r in steady) for k in keys}
    print(
        "p90 / max phases (ms): " + ", ".join(f"{k} {v[int(0.9 * (len(v) - 1))]} / {v[-1]}" for k, v in spread.items())
    )
    # The streaming engine's own steps (listing, offset and commit logs) around each foreachBatch call.
    progress = [p["durationMs"] for p in query.recentProgress if p.get("numInputRows")][2:]
    steps = sorted({k for d in progress for k in d})
    if progress:
        print(
            "median streaming engine steps (ms): "
            + ", ".join(f"{k} {statistics.median(d.get(k, 0) for d in progress):.0f}" for k in steps)
        )


def main() -> int:
    args = parse_args()
    from market_spread.feeds.generate import Generator, write_backlog
    from market_spread.runtime.spark import build_session
    from market_spread.stream.query import started, supervise
    from market_spread.stream.spec import StreamSpec

    symbols = [f"S{i:05d}" for i in range(args.symbols)]
    work = Path(args.work or tempfile.mkdtemp(prefix="profile-"))
    shutil.rmtree(work, ignore_errors=True)
    landing, lake = work / "landing", work / "lake"
    gen = Generator(symbols, seed=7, profile="wallaroo", wide_share=0.05)
    half = args.events // 2
    write_backlog(landing, gen, half * args.pairs, half * args.pairs, args.pairs, "p")

    extra = dict(c.split("=", 1) for c in args.conf)
    spark = build_session("profile", master="local[*]", extra_conf=extra or None, long_running=True)
    if args.alter:
        from market_spread.lake.tables import TABLES, ensure_tables, table_path

        ensure_tables(spark, lake)
        for table in TABLES:
            for sql in args.alter:
                spark.sql(f"ALTER TABLE delta.`{table_path(lake, table)}` {sql}")
    profiler = Profiler(spark, args.jobs)
    start = time.perf_counter()
    spec = StreamSpec(lake=lake, symbols=symbols, landing=landing, max_files_per_batch=1, available_now=True)
    with started(spark, spec, profiler) as run:
        supervise(run.query, run.busy, threading.Event())
    print_summary(profiler.rows, time.perf_counter() - start, run.query)
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

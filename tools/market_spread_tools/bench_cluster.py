"""The benchmark's cluster part: `stream --available-now --master spark://…` on a Spark standalone
cluster of two workers on this machine (market_spread_tools.cluster.LocalCluster), each run in a
process of its own, its peak memory that of the driver and of every daemon and executor together:

- the throughput part's backlog (same files, same layout) with the product's routing: batches of
  CLUSTER_BATCH_LINES and more go to the executors only where they have more cores than the
  driver's machine (stream.driver_batch), which these, on the driver's own cores, do not;
- the crossover: the same batches on each placement, at growing batch sizes, so that where one
  overtakes the other is measured on this machine rather than assumed: the kernel in the driver
  process (`--placement driver`) and the same kernel in Spark's tasks (`--placement executors`).

On one 2-core machine the executors share the driver's cores: the crossover measured here is the
executors' path at its least favourable; on a real cluster they add cores of their own.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from market_spread.feeds.generate import Generator, write_backlog
from market_spread_tools.bench_measure import say, stream_command
from market_spread_tools.cluster import LocalCluster

WORKERS = 2
# Batch sizes of the crossover, in file pairs of CROSSOVER_PAIR_EVENTS events each (the full plan's).
CROSSOVER_PAIRS = (1, 5, 20)
CROSSOVER_PAIR_EVENTS = 20_000
# Each path's settings: its placement.
PATHS = {
    "driver": {"MARKET_SPREAD_PLACEMENT": "driver"},
    "executors": {"MARKET_SPREAD_PLACEMENT": "executors"},
}


def _env(cluster: LocalCluster, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The driver's environment on the local cluster (as tests/e2e/test_cluster.py runs it)."""
    return {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "MARKET_SPREAD_DRIVER_HOST": "127.0.0.1",  # executors reach the driver on the loopback
        "SPARK_CONF_DIR": str(cluster.conf_dir),  # spark.authenticate and the cluster's secret
        "MARKET_SPREAD_EXECUTOR_MEMORY": "1g",
        **(extra or {}),
    }


def _run(
    cluster: LocalCluster, work: Path, landing: Path, symbols: list[str], per_batch: int | None, label: str, extra=None
) -> dict:
    def daemons() -> list[int]:
        return [p.pid for p in cluster.procs.values() if p.poll() is None]

    return stream_command(
        work,
        landing,
        symbols,
        per_batch,
        master=cluster.master_url,
        env=_env(cluster, extra),
        also=daemons,
        label=label,
    )


def crossover(
    cluster: LocalCluster,
    work: Path,
    symbols: list[str],
    sizes: tuple[int, ...] = CROSSOVER_PAIRS,
    pair_events: int = CROSSOVER_PAIR_EVENTS,
    paths: tuple[str, ...] = tuple(PATHS),
) -> list[dict]:
    """Median batch time and events/s of each of `paths` at each batch size of `sizes` file pairs of
    `pair_events` events (same files, own process each)."""
    landing = work / "crossover" / "landing"
    pairs = max(sizes)
    events = pair_events * pairs
    say(f"cluster: crossover files: {events:,} events in {pairs} file pairs")
    write_backlog(
        landing, Generator(symbols, seed=44, profile="wallaroo", wide_share=0.05), events // 2, events // 2, pairs, "x"
    )
    rows = []
    for per_batch in sizes:
        row: dict = {"batch_events": per_batch * pair_events}
        for path in paths:
            out = _run(
                cluster,
                work / f"crossover-{path}-{per_batch}",
                landing,
                symbols,
                per_batch,
                f"cluster crossover ({path}, {row['batch_events']:,}-event batches)",
                PATHS[path],
            )
            row[path] = {
                k: out[k] for k in ("median_batch_seconds", "events_per_s", "peak_mb", "alerts", "spark_jobs_per_batch")
            }
        row["faster"] = max(paths, key=lambda path: row[path]["events_per_s"])
        rows.append(row)
    return rows


def crossover_at(rows: list[dict]) -> int | None:
    """The smallest batch size from which a path on Spark's executors is the fastest, or None."""
    return next((r["batch_events"] for r in rows if r["faster"] != "driver"), None)


def cluster_part(
    work: Path,
    backlog: Path | None,
    symbols: list[str],
    files_per_batch: int | None,
    sizes: tuple[int, ...] = CROSSOVER_PAIRS,
    pair_events: int = CROSSOVER_PAIR_EVENTS,
    paths: tuple[str, ...] = tuple(PATHS),
) -> dict:
    """The `cluster` section of latest.json. `backlog`: the throughput part's landing (None: the
    crossover only); `sizes`, `pair_events` and `paths`: the crossover's (see `crossover`)."""
    cluster = LocalCluster(work / "cluster", workers=WORKERS, worker_cores=1, worker_memory="1536m")
    say(f"cluster: starting a master and {WORKERS} workers (1 core each)")
    cluster.start()
    try:
        out: dict = {"workers": WORKERS, "worker_cores": 1}
        if backlog is not None:
            out["backlog"] = _run(
                cluster, work / "cluster-backlog", backlog, symbols, files_per_batch, "cluster backlog"
            )
        out["crossover"] = crossover(cluster, work, symbols, sizes, pair_events, paths)
        out["crossover_batch_events"] = crossover_at(out["crossover"])
        out["alerts_agree"] = all(len({r[path]["alerts"] for path in paths}) == 1 for r in out["crossover"])
    finally:
        cluster.stop()
    at = out["crossover_batch_events"]
    say(
        "cluster: "
        + (
            f"Spark's executors faster from {at:,}-event batches"
            if at
            else "the driver's path faster at every batch size measured"
        )
    )
    return out

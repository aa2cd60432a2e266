"""The benchmark's plans: how much each part of `market-spread bench` measures.

Built with keywords, one `Plan` per mode; `--growth-batches` and `--only` adjust or select.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from market_spread.errors import UsageError

# s3: the median 2,000-event batch, p99 at 1,000 events/s and the backlog's throughput on the
# local S3 server beside local disk (bench_storage). idle: the CPU an idle stream takes (bench_idle).
# dirty: latency and batch cost with bad lines among the feed's (bench_dirty).
# cluster: the backlog and the driver/executors crossover on a 2-worker local cluster (bench_cluster).
# sql: a person's first query over the alerts, a whole `sql` process each time (bench_sql).
# topic: landing to alerts committed and to alerts visible in the alerts topic, 1,000 events/s (bench_topic).
# universe: batch time, state write, latency and peak memory at 10,000 events/s against the
# universe's size, the state pre-filled (bench_universe).
PARTS = (
    "throughput",
    "latency",
    "growth",
    "symbols",
    "kafka",
    "dirty",
    "idle",
    "s3",
    "cluster",
    "sql",
    "topic",
    "universe",
)


@dataclass(frozen=True)
class Plan:
    events: int  # backlog for throughput
    files: int
    files_per_batch: int | None  # None: one batch takes every file, as `stream` does by default
    rates: tuple[int, ...]  # events/s for the latency runs
    rate_seconds: float
    past_batches: tuple[int, ...]  # checkpoints of the batch-growth run
    symbol_counts: tuple[int, ...]
    # The storage comparison's median batch: this many batches of 2,000 events, on each storage.
    storage_batches: int = 20
    # The idle part: seconds without input, measured (issue 43's target is for a minute).
    idle_seconds: float = 60.0
    # A second, larger backlog for the throughput part (0: none): its batches' times and peak memory.
    big_backlog_events: int = 0
    # The cluster part's crossover: batch sizes in file pairs, and the events of a file pair.
    cluster_sizes: tuple[int, ...] = (1, 4)
    cluster_pair_events: int = 5_000
    # The sql part's alerts (issue 68's target is for 1,000,000).
    sql_alerts: int = 100_000
    # The universe part's sizes (symbols), each measured for rate_seconds after a warm-up, and why
    # the plan leaves any of issue 66's (300, 200,000, 1,000,000) out.
    universe_sizes: tuple[int, ...] = (300, 200_000, 1_000_000)
    universe_left_out: str = ""


# Quick: small enough for a few minutes; growth keeps 10 and 20 batches so that each window of
# 10 batches holds one of Delta's log checkpoints (every 10th commit), as in the full run.
# The quick backlog is cut into 3 batches, so that its throughput is that of several batches.
QUICK = Plan(
    events=120_000,
    files=6,
    files_per_batch=2,
    rates=(1_000, 10_000),
    rate_seconds=12,
    past_batches=(10, 20),
    symbol_counts=(350, 3_000),
    idle_seconds=15.0,
)
FULL = Plan(
    events=2_000_000,
    files=40,
    files_per_batch=None,
    rates=(1_000, 10_000, 50_000),
    rate_seconds=60,
    past_batches=(100, 1_000, 10_000),
    symbol_counts=(350, 3_000, 30_000),
    storage_batches=100,
    big_backlog_events=10_000_000,
    cluster_sizes=(1, 5, 20),
    cluster_pair_events=20_000,
    sql_alerts=1_000_000,
)


def with_growth_batches(plan: Plan, batches: int | None) -> Plan:
    """The plan with its growth run cut (or stretched) to `batches` batches: the full run's 10,000
    batches took hours (docs/performance.md, row '`bench --growth-batches N`'). Keeps the plan's
    earlier checkpoints below it."""
    if batches is None:
        return plan
    if batches < 20:
        raise ValueError(f"--growth-batches: at least 20 (each figure is the mean of 10 batches), not {batches}")
    earlier = tuple(n for n in plan.past_batches if n < batches) or (batches // 2,)
    return replace(plan, past_batches=earlier + (batches,))


def chosen_parts(only: str | None) -> set[str]:
    """The parts `--only` names (all when unset); UsageError for a name that is not a part."""
    parts = set((only or ",".join(PARTS)).split(","))
    unknown = parts - set(PARTS)
    if unknown:
        raise UsageError(f"--only: unknown part(s) {', '.join(sorted(unknown))}")
    return parts


def plan_for(quick: bool, growth_batches: int | None) -> Plan:
    """The quick or full plan, its growth run cut to `growth_batches`; UsageError when too few."""
    try:
        return with_growth_batches(QUICK if quick else FULL, growth_batches)
    except ValueError as exc:
        raise UsageError(str(exc)) from None

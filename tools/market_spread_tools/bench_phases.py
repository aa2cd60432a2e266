"""Where each tick's latency goes (issue 43, item 4): the latency runs (bench_latency, bench_kafka)
split every measured tick's latency, from its landing (or producing) to its batch's BatchResult
handed to on_batch (after the batch's last commit), into parts that add up to it:

- `in_progress`: waiting for the batch running when the tick landed: landing -> the end of the
  batch before the one that took it (its trigger's end, offsets committed); 0 if that batch had
  ended before the tick landed (the stream was idle);
- `seen`: waiting to be seen: max(landing, that end) -> the end of the listing (files) or offset
  fetch (Kafka) of the batch that took it: its trigger start + durationMs['latestOffset'];
- `engine`: Spark's own steps of that batch before our code runs: getBatch, queryPlanning, walCommit;
- the batch's own phases (BatchResult.phases_ms, whatever keys appear; the concurrent writes are
  inside `write`, as bench_measure.PHASES counts them);
- `other`: the remainder (Spark and Python between the steps, the hand-over to on_batch).

Spark's per-batch figures (trigger start, durationMs) come from the query's recent progress, read
once the run has ended.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

ENGINE = ("getBatch", "queryPlanning", "walCommit")  # Spark's steps between the fetch and addBatch
WAITING = ("in_progress", "seen", "engine")
WARMUP_BATCHES = 10  # the growth run's batch-time distribution leaves these out (query start, cold JIT)


def inside_write(key: str) -> bool:
    """A write that runs side by side with the others inside `write` (lake.writes.run_all names
    them append_<table>, merge, state_mirror): its own time overlaps theirs."""
    return key.startswith("append_") or key in ("merge", "state_mirror")


def batch_phases(phases_ms: dict[str, int]) -> dict[str, int]:
    """The batch's phases that follow each other: the concurrent writes are inside `write` (its
    wall time), so they are left out, as bench_measure.PHASES counts them."""
    return {k: v for k, v in phases_ms.items() if not inside_write(k)}


@dataclass(frozen=True)
class Trigger:
    """One batch's trigger as Spark reports it (epoch seconds)."""

    start: float
    listed: float  # the end of the listing / offset fetch
    end: float
    engine: float  # seconds of getBatch + queryPlanning + walCommit


class BatchTimes:
    """The trigger of each batch of one run, by batch id, from the query's recent progress read once
    after the run (`take`). Not a StreamingQueryListener: a Python listener costs the JVM a py4j
    call-back per batch whose class look-ups took more CPU than the stream itself (a profile of the
    1,000 events/s run: 535 samples in the listener's thread against 215 in the stream's), which
    would slow what it measures. The bench session keeps every progress (bench._session)."""

    def __init__(self) -> None:
        self.triggers: dict[int, Trigger] = {}
        self.lock = threading.Lock()

    def take(self, query) -> None:
        for p in query.recentProgress:
            d = p.durationMs or {}
            start = datetime.fromisoformat(p.timestamp.replace("Z", "+00:00")).timestamp()
            with self.lock:
                self.triggers[p.batchId] = Trigger(
                    start,
                    start + d.get("latestOffset", 0) / 1000,
                    start + d.get("triggerExecution", 0) / 1000,
                    sum(d.get(k, 0) for k in ENGINE) / 1000,
                )

    def wait_for(self, batch_ids: set[int], timeout: float = 10.0) -> None:
        """Nothing to wait for: `take` has read every batch's progress once the run ended."""


@contextmanager
def batch_times(spark) -> Iterator[BatchTimes]:
    """A BatchTimes for one run: hand its `take` the run's query once it has ended."""
    yield BatchTimes()


@dataclass
class Batches:
    """What a latency run keeps of each batch: when its result reached on_batch, its own time, its phases."""

    done_at: dict[int, float] = field(default_factory=dict)
    seconds: dict[int, float] = field(default_factory=dict)
    phases: dict[int, dict[str, int]] = field(default_factory=dict)
    quarantined: dict[int, int] = field(default_factory=dict)
    lines: dict[int, int] = field(default_factory=dict)  # input lines (the universe part's batch size)

    def record(self, result) -> float:
        """Keep `result` (a BatchResult); returns the moment it was handed over."""
        now = time.time()
        self.done_at[result.batch_id] = now
        self.seconds[result.batch_id] = result.seconds
        self.phases[result.batch_id] = dict(result.phases_ms)
        self.quarantined[result.batch_id] = result.quarantined
        self.lines[result.batch_id] = result.input_lines
        return now


def split(
    landed: float, done: float, batch_id: int, triggers: dict[int, Trigger], phases_ms: dict[str, int]
) -> dict[str, float] | None:
    """One tick's latency (ms) and its parts, which add up to it; None without the batch's trigger."""
    own = triggers.get(batch_id)
    if own is None:
        return None
    before = triggers.get(batch_id - 1)
    ended = before.end if before is not None else landed
    ms = lambda s: round(1000 * s, 1)  # noqa: E731
    parts = {
        "in_progress": ms(max(0.0, ended - landed)),
        "seen": ms(own.listed - max(landed, ended)),
        "engine": ms(own.engine),
    }
    parts.update({k: float(v) for k, v in batch_phases(phases_ms).items()})
    latency = ms(done - landed)
    parts["other"] = round(latency - sum(parts.values()), 1)
    return {"latency": latency, **parts}


def quantile_index(n: int, p: float) -> int:
    """The index of the p-quantile in n sorted values, as latency_figures takes its percentiles."""
    return min(n - 1, int(p * n))


def mean_split(splits: list[dict[str, float]]) -> dict[str, float]:
    keys = list(dict.fromkeys(k for s in splits for k in s))
    return {k: round(statistics.mean(s.get(k, 0.0) for s in splits), 1) for k in keys}


def split_figures(
    started: dict[str, float], done: dict[str, float], batch_of: dict[str, int], listener: BatchTimes, batches: Batches
) -> dict:
    """The `split_ms` of a latency row: the split of the median tick and of the p99 tick, the mean
    split of the slowest 1 % of ticks; `ticks`: how many were split (`unsplit`: done, but with no
    batch or trigger to split by, e.g. a Kafka tick taken before its acknowledgements came back)."""
    names = [n for n in started if n in done]
    listener.wait_for({batch_of[n] for n in names if n in batch_of})
    with listener.lock:
        triggers = dict(listener.triggers)
    splits = [
        s
        for n in names
        if n in batch_of
        and (s := split(started[n], done[n], batch_of[n], triggers, batches.phases.get(batch_of[n], {})))
    ]
    splits.sort(key=lambda s: s["latency"])
    out: dict = {"ticks": len(splits), "unsplit": len(names) - len(splits)}
    if splits:
        n = len(splits)
        out["median"] = splits[quantile_index(n, 0.50)]
        out["p99"] = splits[quantile_index(n, 0.99)]
        out["slowest_1pct"] = {**mean_split(splits[quantile_index(n, 0.99) :]), "ticks": n - quantile_index(n, 0.99)}
    return out


def batch_time_stats(seconds: list[float]) -> dict:
    """p50/p99/max (s) of batch times, and how many batches."""
    s = sorted(seconds)
    if not s:
        return {"batches": 0, "p50": None, "p99": None, "max": None}
    return {
        "batches": len(s),
        "p50": round(s[quantile_index(len(s), 0.50)], 3),
        "p99": round(s[quantile_index(len(s), 0.99)], 3),
        "max": round(s[-1], 3),
    }


def run_batch_times(batch_of: dict[str, int], started: dict[str, float], batches: Batches) -> dict:
    """batch_time_stats of a latency run's batches from the first that took a measured tick on
    (the warm-up's batches left out)."""
    measured = [batch_of[n] for n in started if n in batch_of]
    first = min(measured, default=None)
    return batch_time_stats([s for b, s in batches.seconds.items() if first is not None and b >= first])


def batch_cost(batch_of: dict[str, int], started: dict[str, float], batches: Batches) -> dict:
    """The median time of the run's batches with quarantined lines beside the median of its clean
    ones (the warm-up's batches left out), and their ratio."""
    measured = [batch_of[n] for n in started if n in batch_of]
    first = min(measured, default=None)
    kept = [b for b in batches.seconds if first is not None and b >= first]
    clean = sorted(batches.seconds[b] for b in kept if not batches.quarantined.get(b))
    dirty = sorted(batches.seconds[b] for b in kept if batches.quarantined.get(b))
    median = lambda s: round(s[len(s) // 2], 4) if s else None  # noqa: E731
    out: dict[str, Any] = {
        "clean_batches": len(clean),
        "dirty_batches": len(dirty),
        "clean_p50_s": median(clean),
        "dirty_p50_s": median(dirty),
    }
    out["ratio"] = round(out["dirty_p50_s"] / out["clean_p50_s"], 3) if clean and dirty else None
    return out


def split_line(split_ms: dict) -> str:
    """The median and p99 ticks' splits in one line, for the bench's progress output."""

    def one(s: dict) -> str:
        return f"{s['latency']} ms = " + ", ".join(f"{k} {v}" for k, v in s.items() if k != "latency")

    if not split_ms.get("ticks"):
        return "no tick split (no trigger progress)"
    return f"median tick {one(split_ms['median'])}; p99 tick {one(split_ms['p99'])}"


SOURCES = (("files", "latency_ms"), ("Kafka", "kafka_latency_ms"))
TICKS = (("median", "median"), ("p99", "p99 tick"), ("slowest_1pct", "slowest 1 %"))


def split_rows(results: dict) -> list[tuple[str, int, str, dict]]:
    """(source, rate, which tick, split) of every latency row of the results that has a split."""
    rows = []
    for source, key in SOURCES:
        for rate, row in (results.get(key) or {}).items():
            split_ms = row.get("split_ms") or {}
            rows += [(source, int(rate), label, split_ms[k]) for k, label in TICKS if k in split_ms]
    return rows


def split_keys(splits: list[dict]) -> list[str]:
    """The parts of the splits in order: the waiting, the batch's phases as they came, the rest."""
    phases = [k for s in splits for k in s if k not in (*WAITING, "latency", "other", "ticks")]
    return [*WAITING, *dict.fromkeys(phases), "other"]

"""The benchmark's backlog baselines and memory: a command in a process of its own with the peak
memory of its whole process tree (the stream's driver and its Spark JVM), the Polars as-of script
on the same files, and the 10M-event backlog of the full run."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

from market_spread_tools.bench_measure import say


def run_measured(
    argv: list[str],
    timeout: float = 3600,
    env: dict[str, str] | None = None,
    also: Callable[[], list[int]] = lambda: [],
) -> tuple[subprocess.CompletedProcess, float, float]:
    """Run `argv`; (its result, wall seconds, peak memory of its process tree in MB: proportional
    set sizes summed, sampled every 0.2 s). `also`: further processes whose trees count with it
    (a cluster's daemons, whose children are the run's executors)."""
    began = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    with peak_during(lambda: [proc.pid, *also()], every=0.2) as peak:
        out, err = proc.communicate(timeout=timeout)
    return (
        subprocess.CompletedProcess(argv, proc.returncode, out, err),
        time.perf_counter() - began,
        peak["peak_mb"],
    )


@contextmanager
def peak_during(
    roots: Callable[[], list[int]] | None = None, every: float = 0.5, alone: Callable[[], list[int]] | None = None
) -> Iterator[dict[str, float]]:
    """The peak memory (MB, `peak_mb`) of the process trees of `roots` (None: this process's, the
    bench's Python and its Spark JVM) and of the processes `alone` without their children, while the
    block runs, proportional set sizes summed, sampled every `every` seconds."""
    import os

    pids = roots or (lambda: [os.getpid()])
    singles = alone or (lambda: [])
    peak, done = {"peak_mb": 0.0}, threading.Event()

    def sample() -> None:
        while True:
            sizes = _tree_pss(pids()) + _tree_pss(singles(), children=False)
            peak["peak_mb"] = max(peak["peak_mb"], round(sum(sizes) / 2**20, 1))
            if done.wait(every):
                return

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield peak
    finally:
        done.set()
        sampler.join()


def _tree_pss(roots: list[int], children: bool = True) -> list[int]:
    """The proportional set size of each live process in the trees of `roots` (of `roots` alone
    without `children`)."""
    sizes = []
    for pid in roots:
        try:
            root = psutil.Process(pid)
            members = [root, *(root.children(recursive=True) if children else [])]
        except psutil.Error:
            continue
        for p in members:
            try:
                sizes.append(p.memory_full_info().pss)
            except psutil.Error:
                pass
    return sizes


def polars_baseline(landing: Path) -> dict:
    """The Polars as-of script (market_spread_tools.polars_asof) over the same files, in its own process."""
    say("polars: the as-of script over the same files")
    done, wall, peak = run_measured([sys.executable, "-m", "market_spread_tools.polars_asof", str(landing)])
    if done.returncode != 0:
        raise RuntimeError(f"polars script failed: {done.stderr[-2000:]}")
    out = {**json.loads(done.stdout.strip().splitlines()[-1]), "wall_seconds": round(wall, 2), "peak_mb": peak}
    say(f"polars: {out['alerts']:,} alerts in {out['seconds']} s (peak {peak:,.0f} MB)")
    return out


def big_backlog(spark, work: Path, events: int, symbols: list[str]) -> dict:
    """A backlog of `events` as users catch up on it: `stream --available-now` in its own process
    (its batches' times and the peak memory of driver and JVM), beside the same engines as the 2M
    backlog (the stream, a plain Spark batch job and the reference in this process; Polars)."""
    from market_spread.feeds.generate import Generator, write_backlog
    from market_spread_tools.bench_measure import in_process_engines, stream_command

    landing = work / "big" / "landing"
    files = max(2, events // 125_000)
    say(f"big backlog: generating {events:,} events in {files} file pairs")
    write_backlog(
        landing,
        Generator(symbols, seed=43, profile="wallaroo", wide_share=0.05),
        events // 2,
        events - events // 2,
        files,
        "big",
    )
    own = stream_command(work / "big-cli", landing, symbols, None, label="big backlog")
    polars = polars_baseline(landing)
    engines = in_process_engines(spark, work / "big-engines", landing, symbols, None, "big backlog")
    engines.pop("batches")
    found = {own["alerts"], polars["alerts"], *(e["alerts"] for e in engines.values())}
    return {
        "events": events,
        "stream_command": own,
        "polars": polars,
        "in_process": engines,
        "alerts_agree": len(found) == 1,
    }

"""The benchmark's universe part (`--only universe`, issue 66 item 5): what a batch costs against the
size of the symbol universe, side by side in one run, for universes of 300, 200,000 and 1,000,000
symbols.

Each universe runs as the `latency` part runs a rate (bench_latency.file_latency: the product's
defaults, driver placement on the local master, its default trigger, landing files from a producer
in a process of its own), at 10,000 events/s in ticks of one 5,000-line file pair every 0.5 s, so
that a stream that keeps up takes 5,000 lines a batch. Its quotes go round the universe
(bench_feeder.EvenGenerator), each symbol once a round.

Each universe runs in a Python process and Spark JVM of its own (in_child), with the bench's session
settings. The state is pre-filled first, the cheapest honest way: a `stream --available-now` run (in this
process) over one file pair that quotes every symbol of the universe once, then the measured
continuous stream on the same landing folder, lake and checkpoint, as a stream that has caught up
on a backlog goes on. Per universe: the median batch, the `symbol_state` write's own time in it
(BatchResult.phases_ms['merge'], batch_metrics' merge_ms: it runs beside the appends, so its share
overlaps theirs), landing -> committed p50/p99, the median phases, and the peak memory of the
stream's process (that child and its Spark JVM, proportional set sizes sampled every 0.5 s; the
producer's process left out).
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from market_spread_tools.bench_backlog import peak_during
from market_spread_tools.bench_feeder import EvenGenerator
from market_spread_tools.bench_latency import file_latency
from market_spread_tools.bench_measure import bench_symbols, run_stream, say
from market_spread_tools.bench_phases import Batches
from market_spread_tools.bench_plans import Plan

RATE = 10_000  # events/s, the rate
BATCH_LINES = 5_000  # the batch: one file pair a tick
TICK_SECONDS = BATCH_LINES / RATE
ORDERS_IN_PREFILL = 1_000  # the pre-fill pair is a quotes backlog; a few orders so it is a whole pair
ALL_SIZES = (300, 200_000, 1_000_000)  # the universes


def universe_part(work: Path, plan: Plan) -> dict:
    """Every universe of the plan, smallest first, each in a process of its own (in_child); the
    ratio of the medians and what the plan left out."""
    out: dict = {"rate": RATE, "batch_lines": BATCH_LINES, "seconds": plan.rate_seconds, "universes": {}}
    for n in sorted(plan.universe_sizes):
        out["universes"][str(n)] = in_child(work, n, plan.rate_seconds)
    small, large = out["universes"].get("300"), out["universes"].get("200000")
    if small and large and small.get("median_batch_s") and large.get("median_batch_s"):
        out["ratio_200000_300"] = round(large["median_batch_s"] / small["median_batch_s"], 2)
    left = [n for n in ALL_SIZES if n not in plan.universe_sizes]
    if left:
        out["left_out"] = {"sizes": left, "why": plan.universe_left_out}
        say(f"universe: left out {', '.join(f'{n:,}' for n in left)} symbols: {plan.universe_left_out}")
    return out


def in_child(work: Path, n: int, seconds: float) -> dict:
    """One universe in a Python process (and Spark JVM) of its own, its row as JSON in a file. Why:
    a stream that dies takes its process with it (with 1,000,000 symbols delta-rs died of a
    segmentation fault in this bench's process, and every part's figures with it); and the peak
    memory is then this universe's alone, not that of a JVM whose heap the universe before grew."""
    out = work / f"universe-{n}.json"
    argv = [sys.executable, "-m", "market_spread_tools.bench_universe", str(work), str(n), str(seconds), str(out)]
    done = subprocess.run(argv, timeout=1800)
    if done.returncode == 0 and out.exists():
        return json.loads(out.read_text())
    code = done.returncode
    why = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
    say(f"universe {n:,}: the stream's process ended without figures ({why})")
    return {"symbols": n, "failed": why}


def main(argv: list[str]) -> int:
    """In the child (in_child): WORK N SECONDS OUT."""
    from market_spread_tools.bench import _session

    work, n, seconds, out = Path(argv[0]), int(argv[1]), float(argv[2]), Path(argv[3])
    spark = _session(False)
    try:
        row = one_universe(spark, work, n, seconds)
    finally:
        spark.stop()
    out.write_text(json.dumps(row, default=str))
    return 0


def one_universe(spark, work: Path, n: int, seconds: float) -> dict:
    """The pre-fill, then the measured continuous run, on one lake."""
    symbols = bench_symbols(n)
    name = f"-u{n}"
    base = work / f"lat{RATE}{name}"  # file_latency's landing and lake for this rate and name
    with peak_of_stream(spark) as prefill_peak:
        prefill = prefill_state(spark, base / "landing", base / "lake", symbols)
    say(f"universe {n:,}: state pre-filled in {prefill['seconds']} s ({prefill['batches']} batch(es))")
    batches = Batches()
    with peak_of_stream(spark) as peak:
        figures, latencies, behind = file_latency(
            spark,
            work,
            RATE,
            seconds,
            symbols,
            name=name,
            feed_fields={"tick": TICK_SECONDS, "even": True},
            batches=batches,
        )
    row = universe_row(n, figures, len(latencies), behind, batches)
    row.update(peak_mb=peak["peak_mb"], prefill={**prefill, "peak_mb": prefill_peak["peak_mb"]})
    say(universe_line(row))
    return row


def prefill_state(spark, landing: Path, lake: Path, symbols: list[str]) -> dict:
    """One file pair quoting every symbol once (and a few orders), taken by `stream --available-now`
    into a new lake: `symbol_state` then holds one row per symbol before the measured run."""
    # The producer's seed (bench_feeder._produce: the rate), so the same symbols quote wide here and there.
    gen = EvenGenerator(symbols, seed=RATE, profile="wallaroo", wide_share=0.05)
    # Streamed to the file: a million lines held as a list would swell the Python process measured next.
    write_lines(landing / "quotes", "prefill-00000.jsonl", (gen.quote() for _ in symbols))
    write_lines(landing / "orders", "prefill-00000.jsonl", (gen.order() for _ in range(ORDERS_IN_PREFILL)))
    results: list = []
    began = time.perf_counter()
    run_stream(spark, landing, lake, symbols, on_batch=results.append)
    return {
        "seconds": round(time.perf_counter() - began, 2),
        "batches": len(results),
        "lines": sum(r.input_lines for r in results),
        "batch_seconds": [round(r.seconds, 3) for r in results],
        "state_write_ms": [r.phases_ms.get("merge", 0) for r in results],
    }


def write_lines(folder: Path, name: str, lines: Iterable[str]) -> None:
    """As feeds.generate.write_atomically (aside under a dot name, fsync, rename), line by line."""
    folder.mkdir(parents=True, exist_ok=True)
    temp = folder / f".{name}.tmp"
    with open(temp, "w", encoding="utf-8") as handle:
        for line in lines:
            handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, folder / name)


def peak_of_stream(spark, every: float = 0.5):
    """The peak (MB, `peak_mb`) of the stream's process while the block runs: this Python process
    and its Spark JVM's tree, proportional set sizes summed. Not this process's whole tree: that
    would count the producer's process, which is the feed's, not the stream's."""
    jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    return peak_during(lambda: [jvm], every, alone=lambda: [os.getpid()])


def universe_row(n: int, figures: dict, pairs: int, behind: int, batches: Batches) -> dict:
    """A universe's figures over the measured batches (from the first that took a measured file pair)."""
    first = figures.get("first_batch")
    ids = sorted(b for b in batches.seconds if first is not None and b >= first)
    median = lambda values: statistics.median(values) if values else None  # noqa: E731
    batch_s = median([batches.seconds[b] for b in ids])
    state_ms = median([batches.phases[b].get("merge", 0) for b in ids])
    keys = dict.fromkeys(k for b in ids for k in batches.phases[b])
    return {
        "symbols": n,
        "batches": len(ids),
        "median_batch_s": round(batch_s, 3) if batch_s is not None else None,
        "batch_seconds": figures["batch_seconds"],
        "median_lines": median([batches.lines[b] for b in ids]),
        "state_write_ms": state_ms,
        "state_write_share": round(state_ms / (1000 * batch_s), 3) if batch_s and state_ms is not None else None,
        "phases_ms": {k: median([batches.phases[b].get(k, 0) for b in ids]) for k in keys},
        **{k: figures[k] for k in ("p50", "p95", "p99")},
        "file_pairs": pairs,
        "files_behind": behind,
        "split_ms": {k: v for k, v in figures["split_ms"].items() if k in ("median", "p99")},
    }


def universe_line(row: dict) -> str:
    """One universe's figures, as the bench prints them."""
    share = row["state_write_share"]
    return (
        f"universe {row['symbols']:,}: median batch {row['median_batch_s']} s ({row['median_lines']} lines; "
        f"state write {row['state_write_ms']} ms, {share if share is None else round(100 * share)} %), "
        f"latency p50 {row['p50']} ms, p99 {row['p99']} ms over {row['file_pairs']} file pairs"
        + (f", {row['files_behind']} behind" if row["files_behind"] else "")
        + f"; peak {row['peak_mb']:,} MB; phases (ms, median) {row['phases_ms']}"
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

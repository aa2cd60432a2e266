"""The benchmark's plots (matplotlib, PNG): one function per figure, each given the results of a
run and the folder to write to, each returning the file it wrote."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import matplotlib

matplotlib.use("Agg")  # files only, no display; before pyplot is imported
import matplotlib.pyplot as plt  # noqa: E402

from market_spread_tools.bench_measure import PHASES  # noqa: E402
from market_spread_tools.bench_phases import WARMUP_BATCHES, split_keys, split_rows  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Sequence

    from matplotlib.colors import ListedColormap

# The phases that run side by side inside "writes (wall)", drawn in another colour.
CONCURRENT_WRITES = ("append_quotes", "append_alerts", "append_quarantine", "merge")


def _save(fig, out: Path, name: str) -> str:
    fig.tight_layout()
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    return name


def throughput_bars(tp: dict, out: Path) -> str:
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
    return _save(fig, out, "throughput.png")


def phase_bars(tp: dict, out: Path) -> str:
    fig, ax = plt.subplots(figsize=(7, 3.8))
    keys = [k for k in PHASES if k in tp["phases_ms"]][::-1]
    colors = ["#ff7f0e" if k in CONCURRENT_WRITES else "#1f77b4" for k in keys]
    ax.barh([PHASES[k] for k in keys], [tp["phases_ms"][k] / 1000 for k in keys], color=colors)
    ax.set_xlabel("seconds (sum over batches)")
    ax.set_title("Where the time of the micro-batches goes\n(orange: concurrent writes, inside 'writes (wall)')")
    return _save(fig, out, "phases.png")


def latency_cdf(lat: dict, out: Path) -> str:
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for rate, d in lat.items():
        xs = d["cdf_ms"]
        ax.plot(xs, [(i + 1) / len(xs) for i in range(len(xs))], label=f"{int(rate):,} events/s")
    ax.set_xlabel("latency: file landed -> alerts committed (ms)")
    ax.set_ylabel("share of files")
    ax.legend()
    ax.set_title("Latency CDF in continuous mode")
    return _save(fig, out, "latency_cdf.png")


def batch_growth(gr: dict, out: Path) -> str:
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(range(1, len(gr["batch_seconds"]) + 1), gr["batch_seconds"], ".", markersize=3)
    ax.set_xlabel("batch number")
    ax.set_ylabel("batch time (s)")
    ax.set_title("Batch time as history and Delta log grow")
    return _save(fig, out, "batch_growth.png")


def batch_time_hist(gr: dict, out: Path) -> str | None:
    """The growth run's batch times after the warm-up, log count: the tail is what matters."""
    seconds = gr["batch_seconds"][WARMUP_BATCHES:]
    if not seconds:
        return None
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.hist(seconds, bins=min(50, max(5, len(seconds) // 4)), log=True, color="#1f77b4")
    ax.axvline(1.5, color="#d62728", linestyle="--", label="target: no batch over 1.5 s")
    ax.set_xlabel("batch time (s)")
    ax.set_ylabel("batches (log)")
    ax.legend(fontsize=8)
    ax.set_title(f"Growth run: batch times after the first {WARMUP_BATCHES} batches ({len(seconds)} batches)")
    return _save(fig, out, "batch_time_hist.png")


def latency_phases(results: dict, out: Path) -> str | None:
    """Where the latency goes: one stacked bar per source x rate x (median tick, slowest 1 % mean)."""
    rows = [r for r in split_rows(results) if r[2] in ("median", "slowest 1 %")]
    if not rows:
        return None
    keys = split_keys([split for *_, split in rows])
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(rows) + 1.8))
    labels = [f"{source} {rate:,}/s, {tick}" for source, rate, tick, _ in rows][::-1]
    left = [0.0] * len(rows)
    cmap = cast("ListedColormap", plt.get_cmap("tab20"))  # a list of 20 colours
    colors = cast("Sequence[Any]", cmap.colors)
    for i, key in enumerate(keys):
        widths = [split.get(key, 0.0) for *_, split in rows][::-1]
        ax.barh(labels, widths, left=left, color=colors[i % len(colors)], label=key)
        left = [a + max(0.0, w) for a, w in zip(left, widths)]
    ax.set_xlabel("ms from landing (or producing) to the batch's result")
    ax.legend(fontsize=7, ncol=min(len(keys), 5), loc="upper center", bbox_to_anchor=(0.5, -0.18))
    ax.set_title("Where a tick's latency goes (product defaults): median tick and slowest 1 % (mean)")
    return _save(fig, out, "latency_phases.png")


def storage_bars(st: dict, out: Path) -> str:
    """The storage comparison: each figure on local disk and on S3, side by side."""
    figures = [
        ("median 2,000-event batch (s)", st["local"]["median_batch_seconds"], st["s3"]["median_batch_seconds"]),
        (f"p99 at {st.get('rate', 1000):,} events/s (ms)", st["local"]["latency"]["p99"], st["s3"]["latency"]["p99"]),
        ("throughput (events/s)", st["local"]["throughput"]["events_per_s"], st["s3"]["throughput"]["events_per_s"]),
    ]
    fig, axes = plt.subplots(1, 3, figsize=(9, 3.2))
    for ax, (title, local, s3) in zip(axes, figures):
        values = [local or 0, s3 or 0]
        ax.bar(["local disk", "S3"], values, color=["#1f77b4", "#ff7f0e"])
        for i, v in enumerate(values):
            ax.text(i, v, f"{v:,}", ha="center", va="bottom", fontsize=8)
        ax.set_ylim(0, max(values + [1]) * 1.15)
        ax.set_title(title, fontsize=9)
    fig.suptitle("Local disk against the local S3 server, same run")
    return _save(fig, out, "storage.png")


def plots(results: dict, out: Path) -> list[str]:
    """Every plot the results have figures for, in this order; the names of the files written."""
    made: list[str | None] = []
    tp = results.get("throughput")
    if tp:
        made += [throughput_bars(tp, out), phase_bars(tp, out)]
    if results.get("latency_ms"):
        made.append(latency_cdf(results["latency_ms"], out))
    made.append(latency_phases(results, out))
    if results.get("growth"):
        made += [batch_growth(results["growth"], out), batch_time_hist(results["growth"], out)]
    if results.get("storage"):
        made.append(storage_bars(results["storage"], out))
    return [name for name in made if name]

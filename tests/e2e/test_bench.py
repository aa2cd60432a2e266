"""The benchmark's parts on tiny plans: they must agree on the alerts and write their figures.

No timing is asserted here (figures are the benchmark's job); what is asserted is that the three
systems compute the same alerts, that each batch of the growth run takes exactly one file pair,
that a tick's latency splits into parts that add up to it, that the idle cost is measured, and
that the results, plots and summary are written.
"""

from __future__ import annotations

import argparse
import json
import uuid
from dataclasses import replace

import pytest

from market_spread.errors import UsageError
from market_spread_tools import (
    bench,
    bench_idle,
    bench_latency,
    bench_measure,
    bench_plans,
    bench_plots,
    bench_report,
    bench_storage,
)
from tests.helpers.campaign import FULL

TINY = bench_plans.Plan(
    events=4_000,
    files=2,
    files_per_batch=1,
    rates=(200,),
    rate_seconds=2,
    past_batches=(2, 4),
    symbol_counts=(350,),
)


def test_throughput_stream_ceiling_and_reference_agree(spark, tmp_path):
    """The backlog part on tiny files, the big backlog too: every engine finds the same alerts, and
    each in-process engine's peak memory is measured (issue 54: side by side, peak memory of each)."""
    result = bench_measure.throughput(spark, tmp_path, replace(TINY, big_backlog_events=4_000))
    assert result["events"] == TINY.events
    assert result["alerts"] > 0
    assert result["alerts_agree"], result
    assert set(result["phases_ms"]) == set(bench_measure.PHASES)
    # The state's write: staging, the commit trailing it (lake.state_writes), so it may round to 0 ms.
    assert result["phases_ms"]["parse"] > 0 and result["phases_ms"]["merge"] >= 0
    assert result["batches"] == 2, "one file pair per batch: the backlog is several batches"
    # 2,000-event batches: files read, parsed and checked on the driver (stream.driver_batch), no Spark job.
    assert result["spark_jobs_per_batch"] == 0
    own = result["stream_command"]
    assert own["events"] == TINY.events and own["batches"] == 2 and own["events_per_s"] > 0
    assert all(result["in_process_peak_mb"][k] > 100 for k in ("stream", "ceiling", "reference")), result
    big = result["big_backlog"]
    assert big["alerts_agree"] and big["stream_command"]["events"] == 4_000, big
    assert {k: e["events"] for k, e in big["in_process"].items()} == dict.fromkeys(
        ("stream", "ceiling", "reference"), 4_000
    ), big
    lines = "\n".join(bench_report.backlog_lines(result))
    assert (
        "The 4,000-event backlog, engine by engine:" in lines
        and "| plain Spark batch job (peak: this process) |" in lines
    )
    assert "in this process (its Python and JVM) the stream" in lines, lines


def test_growth_takes_one_file_pair_per_batch(spark, tmp_path):
    result = bench_measure.growth(spark, tmp_path, TINY)
    assert len(result["batch_seconds"]) == TINY.past_batches[-1]
    assert set(result["batch_seconds_at"]) == {"2", "4"}
    assert result["growth_ratio"] > 0
    assert result["median_spark_jobs"] == 0 and result["median_batch_seconds"] > 0  # on the driver, as above
    # Which phase grows: each checkpoint carries the median of every phase the batches time.
    assert set(result["phases_ms_at"]) == {"2", "4"}
    assert {"parse", "check", "write"} <= set(result["phases_ms_at"]["4"]), result["phases_ms_at"]
    # One file pair per batch, 4 batches: each append-only table holds 4 files (+1 from its creation at most).
    assert set(result["data_files_at_end"]) == {"alerts", "quotes", "batch_metrics", "symbol_state"}
    assert 1 <= result["data_files_at_end"]["batch_metrics"] <= 5, result["data_files_at_end"]
    # Only 4 batches: none is left after the warm-up's 10, and the figures say so.
    assert result["batch_time_after_warmup"] == {
        "batches": 0,
        "p50": None,
        "p99": None,
        "max": None,
        "warmup_batches": 10,
    }


def test_results_summary_and_plots_are_written(tmp_path):
    results = {
        "mode": "quick",
        "finished_at": "2026-11-22T00:00:00+00:00",
        "peak_memory_mb": 900.0,
        "machine": {"cores": 2, "memory_gb": 24.0, "python": "3.11", "pyspark": "4.1.3", "delta_spark": "4.4.1"},
        "throughput": {
            "events": 10,
            "batches": 1,
            "seconds": 0.1,
            "throughput_events_per_s": 100,
            "batch_ceiling_events_per_s": 150,
            "reference_events_per_s": 50,
            "alerts_agree": True,
            "phases_ms": {k: 10 for k in bench_measure.PHASES},
        },
        "latency_ms": {"1000": {"p50": 1.0, "p95": 2.0, "p99": 3.0, "files": 3, "cdf_ms": [1.0, 2.0, 3.0]}},
        "growth": {"batch_seconds": [1.0, 1.1, 1.2], "batch_seconds_at": {"1": 1.0, "3": 1.2}, "growth_ratio": 1.2},
        "batch_time_growth": {"batch_seconds_at": {"1": 1.0, "3": 1.2}, "growth_ratio": 1.2},
    }
    made = bench_plots.plots(results, tmp_path)
    assert made == ["throughput.png", "phases.png", "latency_cdf.png", "batch_growth.png"]
    for name in made:
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    results["plots"] = made
    summary = bench_report.summary_markdown(results, "market-spread bench --quick")
    assert "| 1,000 | 1.0 | 2.0 | 3.0 |" in summary
    assert "market-spread bench --quick" in summary and "![phases.png](phases.png)" in summary
    # The throughput target is missed here: the summary says what limits it, from the run's figures.
    assert "## What limits it" in summary and "the as-of check 10 %" in summary
    json.dumps(results)  # the results must be JSON as they are


def test_unknown_part_is_a_usage_error(tmp_path):
    args = argparse.Namespace(
        quick=True, out=str(tmp_path / "out"), work=str(tmp_path / "work"), only="throughput,speed"
    )
    with pytest.raises(UsageError, match="speed"):
        bench.run(args)


def test_growth_batches_cut_the_growth_run_and_keep_its_earlier_checkpoints():
    assert bench_plans.with_growth_batches(bench_plans.FULL, None) == bench_plans.FULL
    cut = bench_plans.with_growth_batches(bench_plans.FULL, 1_000)
    assert cut.past_batches == (100, 1_000) and cut.events == bench_plans.FULL.events
    assert bench_plans.with_growth_batches(bench_plans.QUICK, 60).past_batches == (10, 20, 60)
    assert bench_plans.with_growth_batches(bench_plans.FULL, 50).past_batches == (25, 50)
    with pytest.raises(ValueError, match="at least 20"):
        bench_plans.with_growth_batches(bench_plans.FULL, 10)


def test_s3_comparison_measures_both_storages_and_reports_them(spark, tmp_path):
    """A tiny run of part `s3`: its own object store, every figure on both storages, the report's rows."""
    if bench_storage.s3_unavailable():
        pytest.skip(bench_storage.s3_unavailable())
    plan = bench_plans.Plan(
        events=2_000,
        files=1,
        files_per_batch=None,
        rates=(),
        rate_seconds=1,
        past_batches=(2,),
        symbol_counts=(),
        storage_batches=2,
    )
    # A bucket of its own: Hadoop caches an S3A client per bucket, and the session is the whole run's.
    st = bench_storage.storage_comparison(spark, tmp_path, plan, bucket=f"bench-{uuid.uuid4().hex[:8]}", warm_batches=0)
    assert st["prefix"].startswith("s3://bench-")
    for name in ("local", "s3"):
        assert st[name]["batches"] == 2 and st[name]["median_batch_seconds"] > 0, st[name]
        assert st[name]["latency"]["file_pairs"] > 0 and st[name]["latency"]["p99"] is not None, st[name]
        assert st[name]["throughput"]["events"] == plan.events, st[name]
    assert all(st["ratios"][k] > 0 for k in ("median_batch", "p99", "throughput")), st["ratios"]
    results = {"storage": st}
    assert [name for name, _, _ in bench_report.targets(results)] == [
        "S3: median 2,000-event batch <= 1.5x local disk's",
        "S3: p99 latency <= 2 s at 1,000 events/s",
    ]
    lines = "\n".join(bench_report.storage_lines(results))
    assert "| median 2,000-event batch (s, over 2 batches) |" in lines and "| throughput, 2,000 events" in lines
    assert bench_plots.plots(results, tmp_path) == ["storage.png"]


def test_latency_splits_into_parts_and_idle_cost_is_measured(spark, tmp_path):
    """A short file latency run (the product's default trigger) and a short idle period: each
    reported tick's parts add up to its latency, the idle share of a core is a number; both reach
    the report and the plots."""
    figures, latencies, _ = bench_latency.file_latency(spark, tmp_path, 200, 2, bench_measure.bench_symbols(50))
    split_ms = figures["split_ms"]
    assert split_ms["ticks"] > 0 and split_ms["ticks"] + split_ms["unsplit"] == len(latencies), split_ms
    for which in ("median", "p99", "slowest_1pct"):
        split = split_ms[which]
        parts = {k: v for k, v in split.items() if k not in ("latency", "ticks")}
        assert {"in_progress", "seen", "engine", "parse", "check", "write", "other"} <= set(parts), split
        assert abs(sum(parts.values()) - split["latency"]) <= 2, split
        assert parts["in_progress"] >= 0 and parts["engine"] >= 0, split
        # Within clock rounding, unless the batch's phases overlap (a new phase inside another).
        assert parts["seen"] > -20 and parts["other"] > -20, split
    if not split_ms["unsplit"]:  # the same ticks: the same median
        assert split_ms["median"]["latency"] == figures["p50"]
    b = figures["batch_seconds"]
    assert b["batches"] > 0 and 0 < b["p50"] <= b["p99"] <= b["max"], b

    idle = bench_idle.idle_cost(spark, tmp_path, 2.0, kafka_skipped="not in this test")
    files = idle["files"]
    assert files["cpu_percent_of_one_core"] >= 0 and files["wall_seconds"] >= 2, files
    assert files["other_active_queries"] == 0, files

    results = {"latency_ms": {"200": {**figures, "file_pairs": len(latencies)}}, "idle": idle}
    assert [name for name, _, _ in bench_report.issue43_targets(results)] == [
        "idle stream (files, no input for 2 s, product defaults) <= 5 % of one core"
    ]
    lines = "\n".join(bench_report.split_lines(results) + bench_report.idle_lines(results))
    assert "| files | 200 | median |" in lines and "| files | 200 | slowest 1 % (" in lines, lines
    assert "kafka skipped (not in this test)" in lines, lines
    assert "latency_phases.png" in bench_plots.plots(results, tmp_path)


@pytest.mark.skipif(
    not FULL, reason="make reliability: a 2-worker cluster, twice (make test's cluster runs are test_cluster.py's)"
)
def test_cluster_part_runs_both_placements_on_a_local_cluster_with_the_same_alerts(tmp_path):
    """A tiny run of part `cluster`: one batch size, the stream command on a 2-worker local cluster
    on two paths (the kernel on the driver and in Spark's tasks): the same alerts, each path the one
    asked for (no Spark job on the driver's, some in Spark's tasks), memory counted beyond the driver.
    No backlog run: that the product's routing keeps a backlog on the driver's path here is
    tests/e2e/test_cluster.py's (test_cluster_run_gives_the_same_tables_as_a_local_run)."""
    from market_spread_tools import bench_cluster

    symbols = bench_measure.bench_symbols(350)
    out = bench_cluster.cluster_part(tmp_path, None, symbols, None, sizes=(1,), pair_events=2_000)
    (row,) = out["crossover"]
    driver, executors = row["driver"], row["executors"]
    assert row["batch_events"] == 2_000 and driver["alerts"] > 0, row
    assert out["alerts_agree"] and driver["alerts"] == executors["alerts"], row
    assert driver["spark_jobs_per_batch"] == 0 and executors["spark_jobs_per_batch"] > 0, row
    # Executors are the workers' children, not the driver's: only counted through the daemons.
    assert executors["peak_mb"] > driver["peak_mb"], row
    assert out["crossover_batch_events"] == (2_000 if row["faster"] != "driver" else None)
    assert "backlog" not in out
    lines = "\n".join(bench_report.cluster_lines(out))
    assert "| 2,000 | " in lines and "| not run |" not in lines and "alerts agree on every path: True" in lines, lines


def test_sql_part_times_whole_processes_on_datafusion_and_reports_the_target(tmp_path):
    """A tiny run of part `sql`: the alerts written, each run a whole `sql` process answered without
    Spark (the part fails on a fallback), the figures and the target in the report."""
    from market_spread_tools import bench_sql

    out = bench_sql.sql_part(tmp_path, 3_000, runs=2)
    assert out["alerts"] == 3_000 and len(out["seconds"]) == 2 and out["median_s"] > 0, out
    assert out["target_s"] == 1.5
    lines = "\n".join(bench_sql.sql_lines({"sql": out}))
    assert "over 3,000 alerts, whole process: median" in lines, lines
    (target, measured, met) = bench_sql.sql_targets({"sql": out})[0]
    assert target.startswith("sql over 3,000 alerts") and measured == f"{out['median_s']} s"
    assert met == (out["median_s"] <= 1.5)


def test_universe_part_reports_each_universe_and_the_issue_targets():
    """The universe part's figures of each batch become its row, and the rows the summary's table and
    issue 66's targets (a fake run: the part itself takes minutes); its quotes go round the universe."""
    from market_spread_tools import bench_feeder, bench_phases, bench_universe

    symbols = bench_measure.bench_symbols(400)
    gen = bench_feeder.EvenGenerator(symbols, seed=1, profile="wallaroo", wide_share=0.05)
    assert sorted(json.loads(gen.quote())["symbol"] for _ in symbols) == sorted(symbols)
    batches = bench_phases.Batches()
    for b, (seconds, merge) in enumerate([(2.0, 900), (0.2, 20), (0.3, 40), (0.4, 60)]):
        batches.seconds[b], batches.phases[b], batches.lines[b] = seconds, {"merge": merge, "parse": 5}, 5_000
    figures = {"first_batch": 1, "batch_seconds": {}, "p50": 400.0, "p95": 700.0, "p99": 900.0, "split_ms": {}}
    row = bench_universe.universe_row(200_000, figures, 30, 0, batches)
    assert row["batches"] == 3 and row["median_batch_s"] == 0.3 and row["state_write_ms"] == 40, row
    assert row["state_write_share"] == 0.133 and row["phases_ms"] == {"merge": 40, "parse": 5}, row
    small = {**row, "symbols": 300, "median_batch_s": 0.25}
    big = {**row, "symbols": 1_000_000, "p99": 1_600.0, "files_behind": 2}
    for r in (small, row, big):
        r.update(peak_mb=1_000.0, prefill={"peak_mb": 1_200.0})
    rows = {"300": small, "200000": row, "1000000": big}
    results = {"universe": {"rate": 10_000, "batch_lines": 5_000, "universes": rows, "ratio_200000_300": 1.2}}
    assert [(name, ok) for name, _, ok in bench_report.universe_targets(results)] == [
        ("universe: median batch, 200,000 symbols <= 1.5x 300", True),
        ("universe: 200,000 symbols at 10,000 events/s, p50 <= 0.5 s, p99 <= 1.0 s", True),
        ("universe: 1,000,000 symbols at 10,000 events/s, p99 <= 1.5 s", False),
    ]
    lines = "\n".join(bench_report.universe_lines(results))
    assert "| 200,000 | 0.3 (5000) | 40 (13 %) | 400.0 | 900.0 | 30 (0) | 1,000.0 (1,200.0) |" in lines, lines
    assert "200,000 symbols / 300: 1.2x" in lines, lines
    rows["1000000"] = {"symbols": 1_000_000, "failed": "killed by SIGSEGV"}  # a stream that died (in_child)
    assert bench_report.universe_targets(results)[-1][1:] == ("the stream's process died (killed by SIGSEGV)", False)
    assert "| 1,000,000 | the stream's process died (killed by SIGSEGV) |" in "\n".join(
        bench_report.universe_lines(results)
    )


def test_topic_part_reports_committed_and_visible_side_by_side():
    """The alerts topic part's figures (a fake run: the part itself needs a broker and a minute)
    become the summary's two rows, with issue 67's target named."""
    out = {
        "rate": 1_000,
        "committed_ms": {"p50": 274.7, "p95": 400.1, "p99": 424.9},
        "topic_ms": {"p50": 339.3, "p95": 450.0, "p99": 469.4, "file_pairs": 48, "files_behind": 0},
        "records": 3_039,
        "file_pairs": 48,
        "files_behind": 0,
    }
    lines = "\n".join(bench_report.topic_lines({"topic": out}))
    assert "target: visible p99 <= 1,000 ms" in lines
    assert "| alerts committed (Delta) | 274.7 | 400.1 | 424.9 | 48 |" in lines
    assert (
        "| alerts visible to a read_committed consumer | 339.3 | 450.0 | 469.4 | 48 (with alerts; 0 never seen) |"
        in lines
    )
    assert bench_report.topic_lines({"topic_skipped": "no JARs"}) == ["Alerts topic: skipped (no JARs).", ""]
    assert bench_report.topic_lines({}) == []


def test_topic_latency_counts_pairs_whose_batch_had_alerts_and_those_never_seen():
    from market_spread_tools.bench_latency import topic_figures

    landed = {"a": 10.0, "b": 10.5, "c": 11.0, "d": 11.5}
    batch_of = {"a": 1, "b": 2, "c": 3, "d": 3}
    alerts_of = {1: 4, 2: 0, 3: 2}  # batch 2 had no alerts: pair b has no record to wait for
    visible = {1: 10.25}  # batch 3's records never seen
    out = topic_figures(landed, batch_of, alerts_of, visible)
    assert (out["file_pairs"], out["files_behind"], out["p50"]) == (1, 2, 250.0)

"""Crash campaign (contract 5.6 and 5.7): a continuous `stream` over feeds that keep landing is
SIGKILLed (driver and Spark JVM together) N times at the dangerous instants -- the moment a new file
appears in the Delta log of each table or in the checkpoint's offsets/ and commits/ -- and at purely
random ones, restarted each time; `maintain` runs beside the live stream and, between a kill and the
restart, over the half-written lake. The stream archives the files it has read (`--archive`) and
trims them from its file source log at each start and every 3 batches. At the end the lake must
equal an uninterrupted run over the same files: nothing lost, nothing doubled, batch_metrics adding
up.

It runs on local disk (this file) and on the run's S3 server (test_crash_campaign_s3.py, the same
body, run_crash_campaign below): landing, lake, checkpoint and archive all on S3 there, the
uninterrupted reference on local disk. Two files because `make test`'s workers take whole files
(--dist loadfile): in one file the two runs (about 4 and 7 minutes) went to the same worker.

By default (`make test`) the kills follow campaign.SHORT_PLANS: 2 on local disk, 2 on S3, and with
the Kafka campaign of tests/stream/test_kafka.py every window of a batch is hit at least once across
the three (on S3 a rename is a copy and a delete, and the lease replaces the flock); a planned window
that is not reached fails the test; maintenance runs beside the live stream on local disk only.
MARKET_SPREAD_RELIABILITY=full (`make reliability`) runs 24 kills (every window three times) and
more maintenance on both, and on local disk every stream also publishes its alerts to a Kafka topic
(`--alerts-topic`): at the end the topic holds each alert row of the table exactly once."""

from __future__ import annotations

import random
import re
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest

from market_spread.feeds.broker import BrokerProcess
from market_spread.feeds.producer import ensure_topics
from market_spread.runtime.storage import location
from market_spread_tools.bench_kafka import broker_available
from tests.helpers.alerts_topic import assert_topic_is_the_table
from tests.helpers.campaign import (
    FULL,
    SHORT_PLANS,
    Job,
    Lander,
    diff_rows,
    duplicates_by_key,
    full_plan,
    in_flight,
    kill_when_new_file,
    make_source,
    readable_with_delta_rs,
    wait_for_lock,
    window_folder,
)
from tests.helpers.lake import comparable_tables, metrics_totals, rows, stream
from tests.helpers.storage import Place, arg
from tests.helpers.symbols import SYMBOLS, symbols_file

# The placement of each restart in turn on local disk (on S3 the driver's only: the executors
# placement's replay on S3 is test_pipeline's every_place scenario, at a fraction of the time).
TURNS = {"local": ("executors", "driver"), "s3": ("driver",)}
ALERTS_TOPIC, ALERTS_PARTITIONS = "alerts", 3


@pytest.fixture
def alerts_broker(tmp_path):
    """`make reliability`'s campaign on local disk publishes its alerts to a topic (contract 4b): a
    broker for it (None in make test, whose campaign with the topic on is test_kafka.py's)."""
    if not FULL or broker_available() is not None:
        yield None
        return
    broker = BrokerProcess(tmp_path / "kafka")
    broker.start()
    ensure_topics(broker.bootstrap, [ALERTS_TOPIC], ALERTS_PARTITIONS)
    yield broker
    broker.stop()


@pytest.mark.slow
@pytest.mark.parametrize("place", ["local"], indirect=True)
def test_crash_campaign_loses_and_doubles_nothing(spark, place, tmp_path, monkeypatch, alerts_broker):
    run_crash_campaign(spark, place, tmp_path, monkeypatch, alerts_broker)


def finish_sides(sides: list[Job], maintained: list[str], peak_rss: int) -> int:
    """Wait for the `maintain` runs started beside a live stream; each must have succeeded and said it
    skipped compaction (the stream held the lock). Returns the peak memory, `sides` emptied."""
    for side in sides:
        code = side.wait(600)
        assert code == 0, side.tail()
        peak_rss = max(peak_rss, side.peak_rss)
        assert "compaction skipped" in side.tail(100_000), side.tail()  # it ran beside the live stream
        maintained.append("beside the live stream")
    sides.clear()
    return peak_rss


def run_crash_campaign(
    spark, place: Place, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broker: BrokerProcess | None = None
) -> None:
    """The campaign on `place` (the fixture's Place, local or s3), asserting as it goes; with a
    `broker`, every stream publishes its alerts to its ALERTS_TOPIC too, checked at the end."""
    began = time.monotonic()
    rng = random.Random(20261123)
    plan = full_plan(rng, 24) if FULL else list(SHORT_PLANS[place.kind])
    kills = len(plan)
    symbols = symbols_file(tmp_path, SYMBOLS)
    source = tmp_path / "source"
    # On S3 bad lines in every third file pair only: batches of clean files as well as dirty ones.
    files = make_source(
        source,
        SYMBOLS,
        seed=23,
        quotes=120 * (2 * kills + 4),
        orders=120 * (2 * kills + 4),
        files=2 * kills + 4,
        dirty_every=3 if place.s3 else 1,
    )
    landing, lake, archive = place / "landing", place / "lake", place / "archive"
    lander = Lander(files, landing)
    stream_args = [
        "stream",
        "--landing",
        arg(landing),
        "--lake",
        arg(lake),
        "--symbols",
        str(symbols),
        "--archive",
        arg(archive),
    ]
    if broker is not None:
        stream_args += ["--alerts-topic", ALERTS_TOPIC, "--bootstrap-servers", broker.bootstrap]
    monkeypatch.setenv("MARKET_SPREAD_SOURCE_LOG_TRIM_EVERY", "3")  # trims inside the batch, killed or not
    # Spark compacts that log every 10 batches; every 2 here, so that even the short campaign has
    # compact files to trim (spark-submit reads spark-defaults.conf from SPARK_CONF_DIR).
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text("spark.sql.streaming.fileSource.log.compactInterval 2\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    # Maintenance: beside the live stream (vacuum only), and over the lake of a killed stream, before
    # the restart (compaction of a half-written batch, then its replay).
    # (The exclusive run costs a whole JVM start and a compaction: in the full campaign only; so
    # does the run beside the stream on S3, about 35 s there: make test has it on local disk.)
    beside = {1, 9, 17} if FULL else set() if place.s3 else {1}
    exclusive = {4, 12, 20} if FULL else set()

    by_window: Counter[str] = Counter()
    replayed: list[tuple[int, list[str]]] = []
    peak_rss = peak_maintain_rss = 0
    maintained: list[str] = []
    sides: list[Job] = []
    for i, window in enumerate(plan):
        lander.land(rng.randint(2, 4))
        # The restarts alternate placements: a batch a kill left in flight is replayed by the other one.
        turns = TURNS[place.kind]
        placement = turns[i % len(turns)]
        job = Job([*stream_args, "--interval", "0.5", "--placement", placement], tmp_path / f"stream-{i:02d}.log")
        side = None
        if i in beside:
            wait_for_lock(job, lake)
            side = Job(
                ["maintain", "--lake", arg(lake), "--retain-hours", "1", "--master", "local[1]"],
                tmp_path / f"maintain-beside-{i:02d}.log",
            )
        if window == "random":
            # A random instant once the stream has started a batch: inside the writes or between batches.
            kill_when_new_file(job, window_folder(lake, "offsets"), committed_only=False, timeout=300, kill=False)
            time.sleep(rng.uniform(0, 4))
            assert job.alive(), job.tail()
            job.kill()
            seen = "random"
        else:
            committed = i % 2 == 0
            seen = kill_when_new_file(job, window_folder(lake, window), committed_only=committed, timeout=300)
            assert seen is not None, f"the stream ended by itself before the kill:\n{job.tail()}"
            seen = f"{window} ({'after' if committed else 'during'} commit: {seen})"
        peak_rss = max(peak_rss, job.peak_rss)
        by_window[window] += 1
        batch, written = in_flight(lake)
        if batch is not None:
            replayed.append((batch, written))
        readable_with_delta_rs(lake)  # every table stays readable after every kill
        print(
            f"kill {i + 1}/{kills}: {seen}; batch in flight: {batch} (tables already written: {written or 'none'})",
            flush=True,
        )
        if side is not None:
            # Left running past the kill, beside the restarts (or the drains) too: it takes no lock
            # and commits nothing, so waiting for it here only idled the campaign (about 20 s a run).
            sides.append(side)
        if i in exclusive:
            peak_maintain_rss = finish_sides(sides, maintained, peak_maintain_rss)
            alone = Job(
                ["maintain", "--lake", arg(lake), "--retain-hours", "1", "--master", "local[1]"],
                tmp_path / f"maintain-alone-{i:02d}.log",
            )
            assert alone.wait(600) == 0, alone.tail()
            assert "optimize:" in alone.tail(100_000), alone.tail()
            peak_maintain_rss = max(peak_maintain_rss, alone.peak_rss)
            maintained.append("exclusive, over a killed stream's lake")

    assert set(by_window) == set(plan), f"planned windows missed: {set(plan) - set(by_window)}"
    # A file pair a batch: the rest in several batches, whatever batch the kills left the stream in
    # (with both kills in one batch, one drain batch compacted no table).
    # Two drains: a file pair in Spark's tasks (whatever batch the kills left behind first), then the
    # rest on the driver, so that both placements commit whole batches after the kills.
    per_batch = ["--max-files-per-batch", "1"]
    drains = (("executors", lambda: lander.land(2)),) if "executors" in TURNS[place.kind] else ()
    for placement, land in (*drains, ("driver", lander.land_all)):
        land()
        drain = Job(
            [*stream_args, "--available-now", "--placement", placement, *per_batch], tmp_path / f"drain-{placement}.log"
        )
        assert drain.wait(900) == 0, drain.tail()
        peak_rss = max(peak_rss, drain.peak_rss)

    peak_maintain_rss = finish_sides(sides, maintained, peak_maintain_rss)

    # The uninterrupted run over the very same files.
    clean = tmp_path / "clean"
    for feed, path in files:  # the landing folder was archived as it went: every file, from the source
        (clean / "landing" / feed).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, clean / "landing" / feed / path.name)
    assert stream(spark, clean / "landing", clean / "lake") == 0

    # Read with delta-rs (tests.helpers.lake.rows; the shared session's scans took 35-55 s here).
    got, want = comparable_tables(spark, lake), comparable_tables(spark, clean / "lake")
    lost = doubled = 0
    for table in want:
        t_lost, t_doubled = diff_rows(got[table], want[table])
        lost, doubled = lost + t_lost, doubled + t_doubled
        assert duplicates_by_key(table, got[table]) == 0, f"{table}: duplicated keys"
        assert (t_lost, t_doubled) == (0, 0), f"{table}: {t_lost} rows lost, {t_doubled} doubled"
        assert got[table] == want[table], table
    metrics = rows(spark, lake, "batch_metrics", drop=())
    assert len({m["batch_id"] for m in metrics}) == len(metrics), "a batch_metrics row written twice"
    totals, clean_totals = metrics_totals(spark, lake), metrics_totals(spark, clean / "lake")
    assert totals["alerts"] == len(got["alerts"])
    assert totals["quotes"] == len(got["quotes"])
    assert totals["quarantined"] == len(got["quarantine"])
    assert totals["quotes"] + totals["orders"] + totals["quarantined"] == lander.lines
    for key in ("quotes", "orders", "alerts", "quarantined"):
        assert totals[key] == clean_totals[key], key
    assert len(got["alerts"]) > 0 and len(got["quarantine"]) > 0, "the campaign must exercise every table"
    # A driver batch reads its landing files itself and runs no Spark job: its commits, its bad lines
    # and its late orders' history reads (contract 5.8) went through the kills too.
    on_driver = [m for m in metrics if m["spark_jobs"] == 0]
    assert on_driver and sum(m["late_symbols"] for m in on_driver) > 0, "late orders on the driver path"
    assert sum(m["quarantined"] for m in on_driver) > 0, "bad lines on the driver path"
    archived = len(list(location(archive).rglob("*.jsonl")))
    trims = sum(log.read_text(errors="replace").count("entries of archived files") for log in tmp_path.glob("*.log"))
    assert archived > 0, "--archive moved no file"
    # compact files old enough to trim; the trim runs on local disks only (docs/operations.md, Object storage)
    if not place.s3 and max(m["batch_id"] for m in metrics) >= 5:
        assert trims > 0, "the file source log was never trimmed"
    # Stream progress lines name each compaction (every 3 commits here, campaign.Job), or the line
    # after the last batch when it finished later.
    compactions = sum(
        len(re.findall(r"compacted \w+: \d+ files", log.read_text(errors="replace"))) for log in tmp_path.glob("*.log")
    )
    assert compactions > 0, "the streams never compacted a table"

    published = (
        assert_topic_is_the_table(broker.bootstrap, ALERTS_TOPIC, Path(str(lake)), ALERTS_PARTITIONS)
        if broker is not None
        else None
    )
    placed = Counter(m["placement"] for m in metrics)
    assert set(placed) == set(TURNS[place.kind]), placed
    partial = [f"{b}:{'+'.join(w)}" for b, w in replayed if w]
    report = "\n".join(
        [
            f"crash campaign report ({place.kind}: {place.root})",
            f"  kills survived:       {kills} (SIGKILL of driver + JVM group, restarted each time)",
            "  kills by window:      " + ", ".join(f"{w} {n}" for w, n in sorted(by_window.items())),
            f"  batches replayed:     {len(replayed)} in flight at a kill, {len(partial)} of them with tables already "
            f"written ({', '.join(partial) or 'none'})",
            f"  maintenance runs:     {len(maintained)} ({'; '.join(maintained) or 'none'})",
            f"  lines tried:          {lander.lines} in {len(files)} files ({totals['quotes']} quotes, "
            f"{totals['orders']} orders, {totals['quarantined']} quarantined), {totals['batches']} batches",
            f"  alerts:               {totals['alerts']}"
            + (f" ({published} in the alerts topic, each once)" if published is not None else ""),
            "  batches by placement: " + ", ".join(f"{p} {n}" for p, n in sorted(placed.items())),
            f"  archived files:       {archived}; file source log trimmed {trims} times",
            f"  compactions:          {compactions} by the streams (every 3 commits to a table)",
            f"  rows lost:            {lost}",
            f"  duplicates:           {doubled}",
            f"  peak memory:          {peak_rss / 2**20:.0f} MB (stream: driver + JVM), "
            f"{peak_maintain_rss / 2**20:.0f} MB (maintain)",
            f"  duration:             {time.monotonic() - began:.0f} s",
        ]
    )
    (tmp_path / "crash-campaign-report.txt").write_text(report + "\n")
    print("\n" + report + f"\n  (written to {tmp_path / 'crash-campaign-report.txt'})")

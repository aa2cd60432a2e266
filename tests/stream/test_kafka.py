"""Kafka (contract 3b): a real single-node broker started by `market-spread broker` on free ports,
real Spark reading it with the Kafka connector, real Delta. Nothing mocked.

- the semantics scenarios of test_pipeline.py, fed through topics, give the same tables as files;
- bad records (not JSON, wrong types, unknown symbols, a 2 MB value) are quarantined with their
  topic/partition/offset; a topic that does not exist is one clear error line;
- SIGKILL of the stream's process group at the dangerous instants while a producer keeps writing:
  nothing lost, nothing doubled, in the tables or in the alerts topic (`--alerts-topic` on) (its share of the windows, campaign.SHORT_PLANS; 20 kills with
  MARKET_SPREAD_RELIABILITY=full);
- the broker stopped and started under a running stream: it waits, resumes, loses nothing.
"""

from __future__ import annotations

import random
import re
import signal
import threading
import time
import uuid
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest

from market_spread.feeds.broker import BrokerProcess
from market_spread.feeds.generate import Generator, write_backlog
from market_spread.feeds.producer import KafkaSink, ensure_topics
from market_spread.sources.kafka_source import KafkaSettings
from market_spread.stream.query import run_query
from market_spread.stream.spec import StreamSpec
from market_spread_tools.bench_kafka import broker_available
from tests.helpers.alerts_topic import assert_topic_is_the_table
from tests.helpers.campaign import (
    FULL,
    SHORT_PLANS,
    Job,
    diff_rows,
    duplicates_by_key,
    full_plan,
    kill_when_new_file,
    make_source,
    window_folder,
)
from tests.helpers.cli import market_spread
from tests.helpers.lake import comparable_tables, metrics_totals, rows, stream
from tests.helpers.landing import land
from tests.helpers.records import BAD_ORDERS, BAD_QUOTES, T, order, quote
from tests.helpers.symbols import symbols_file

pytestmark = pytest.mark.skipif(
    broker_available() is not None,
    reason="Kafka JARs not fetched: run `make setup`",
)

SYMBOLS = ["AAPL", "MSFT", "IBM", "GOOG", "TSLA", "ASOF", "LATE", "LQ", "TA", "TM", "TI", "NM"]
ALERTS_PARTITIONS = 3
SOURCE_RE = re.compile(r"^(?P<topic>[A-Za-z0-9._-]+)/(?P<partition>\d+)/(?P<offset>\d+)$")


def topics() -> KafkaSettings:
    tag = uuid.uuid4().hex[:8]
    return KafkaSettings("", f"quotes-{tag}", f"orders-{tag}")


def settings_for(broker: BrokerProcess, base: KafkaSettings) -> KafkaSettings:
    return KafkaSettings(broker.bootstrap, base.quotes_topic, base.orders_topic)


def kstream(spark, settings: KafkaSettings, lake: Path, symbols=SYMBOLS, placement="auto") -> int:
    spec = StreamSpec(lake=lake, symbols=list(symbols), kafka=settings, available_now=True, placement=placement)
    return run_query(spark, spec)


# The scenarios of test_pipeline.py on distinct symbols, as runs of landing "files" in landing order.
BIG = "not json " + "x" * (2 * 1024 * 1024)
RUNS: list[list[tuple[str, list[str]]]] = [
    [
        (
            "quotes",
            [
                quote("ASOF", T.format(1), "1.00", "1.10"),
                quote("ASOF", T.format(3), "1.00", "1.01"),
                quote("ASOF", T.format(5), "2.00", "2.50"),
                quote("LATE", T.format(1), "10.00", "10.50"),
                quote("LATE", T.format(3), "10.00", "10.01"),
                quote("LQ", T.format(5), "100.00", "100.01"),
                quote("TA", T.format(1), "1.00", "1.01", seq=2),
                quote("TA", T.format(1), "1.00", "1.50", seq=1),
                quote("TM", T.format(1), "1.00", "1.50", seq=1),
                quote("TM", T.format(1), "1.00", "1.01"),
                quote("TI", T.format(1), "1.00", "1.50"),
                quote("TI", T.format(1), "1.00", "1.01"),
                quote("AAPL", T.format(1), "1.10", "1.15"),
                quote("MSFT", T.format(1), "0.50", "0.53"),
                quote("GOOG", T.format(1), "0.1234567850000000000000000000001", "0.74749102461495"),
                *[l for ls in BAD_QUOTES.values() for l in ls],
                "",
                "   ",
            ],
        ),
        (
            "orders",
            [
                order("O-0", "ASOF", T.format(0)),
                order("O-2", "ASOF", T.format(2)),
                order("O-4", "ASOF", T.format(4)),
                order("O-5", "ASOF", T.format(5)),
                order("ta", "TA", T.format(1)),
                order("tm", "TM", T.format(1)),
                order("ti", "TI", T.format(1)),
                order("g", "NM", T.format(2)),
                order("dup", "TSLA", T.format(1)),
                order("dup", "TSLA", T.format(2), qty="5"),
                *[l for ls in BAD_ORDERS.values() for l in ls],
                BIG,
            ],
        ),
    ],
    [
        ("quotes", [quote("LQ", T.format(3), "100.00", "120.00")]),
        (
            "orders",
            [
                order("late", "LATE", T.format(2)),
                order("now", "LATE", T.format(4)),
                order("Q4", "LQ", T.format(4)),
                order("Q6", "LQ", T.format(6)),
            ],
        ),
    ],
]


def _without_source(tables: dict[str, list[dict]]) -> dict[str, list[dict]]:
    out = dict(tables)
    out["quarantine"] = sorted(
        ({k: v for k, v in r.items() if k != "file"} for r in tables["quarantine"]),
        key=lambda r: (r["stream"], r["reason"], r["raw"]),
    )
    return out


def test_the_semantics_scenarios_through_kafka_give_the_tables_of_files(spark, broker, tmp_path, placement):
    base = settings_for(broker, topics())
    sink = KafkaSink(broker.bootstrap, base.quotes_topic, base.orders_topic)
    # Delivery reports of the records produced by hand below: (topic, partition, offset) per value.
    from confluent_kafka import Producer

    delivered: dict[str, str] = {}
    raw = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 8 * 1024 * 1024})

    def produce_by_hand(topic: str, value: str, key: str | None) -> None:
        def report(err, msg):
            assert err is None, err
            delivered[value] = f"{msg.topic()}/{msg.partition()}/{msg.offset()}"

        raw.produce(topic, value=value.encode(), key=key.encode() if key else None, on_delivery=report)
        assert raw.flush(60) == 0

    files_landing, files_lake, kafka_lake = tmp_path / "landing", tmp_path / "files-lake", tmp_path / "kafka-lake"
    gen_files, gen_kafka = (Generator(SYMBOLS[:5], seed=5, wide_share=0.4) for _ in range(2))
    mismatch = quote("IBM", T.format(7), "50.00", "50.01")  # keyed MSFT: the value's symbol rules
    for i, run in enumerate(RUNS):
        for feed, lines in run:
            land(files_landing, feed, lines, name=f"r{i}-{feed}.jsonl")
            topic = base.quotes_topic if feed == "quotes" else base.orders_topic
            for line in lines:
                if line is BIG:
                    produce_by_hand(topic, line, None)
                else:
                    sink(feed, "", [line])
        if i == 0:
            land(files_landing, "quotes", [mismatch], name="r0-zz-mismatch.jsonl")
            produce_by_hand(base.quotes_topic, mismatch, "MSFT")
            write_backlog(files_landing, gen_files, 150, 150, 3, "gen")
            write_backlog(files_landing, gen_kafka, 150, 150, 3, "gen", sink=sink)
        assert stream(spark, files_landing, files_lake, symbols=SYMBOLS) == 0
        assert kstream(spark, base, kafka_lake, placement=placement) == 0

    want, got = comparable_tables(spark, files_lake), comparable_tables(spark, kafka_lake)
    assert want["alerts"] and want["quarantine"] and want["symbol_state"]
    assert _without_source(got) == _without_source(want)
    assert metrics_totals(spark, kafka_lake)["batches"] == 2

    # Quarantine rows name their record; the 2 MB value is there whole, at the offset Kafka gave it.
    quarantine = rows(spark, kafka_lake, "quarantine")
    assert all(SOURCE_RE.match(r["source_file"]) for r in quarantine), quarantine[:3]
    big = [r for r in quarantine if r["raw"] == BIG]
    assert len(big) == 1 and big[0]["source_file"] == delivered[BIG] and big[0]["reason"] == "not_json_object"
    expected_reasons = Counter({k: len(v) for k, v in {**BAD_QUOTES, **BAD_ORDERS}.items()})
    expected_reasons["not_json_object"] += 1
    assert Counter(r["reason"] for r in quarantine) == expected_reasons
    for r in quarantine:
        topic = SOURCE_RE.match(r["source_file"])["topic"]
        assert topic == (base.quotes_topic if r["stream"] == "quotes" else base.orders_topic)
    # The mismatched key changed nothing: the quote counts for IBM, as its value says.
    state = {r["symbol"]: r for r in rows(spark, kafka_lake, "symbol_state")}
    assert state["IBM"]["bid"] == Decimal("50") and "MSFT" in state and state["MSFT"]["bid"] != Decimal("50")


def test_the_consumers_do_not_wait_out_the_brokers_long_poll(spark):
    """Each task's consumer ends on a fetch past its offset range, which the broker holds for
    fetch.max.wait.ms: at Kafka's default (500 ms) that was 2 s of every micro-batch at 1,000
    events/s (docs/performance.md). The option must reach the source as the query plans it."""
    from market_spread.sources.kafka_source import FETCH_MAX_WAIT_MS, read_feeds

    plan = read_feeds(spark, KafkaSettings("localhost:9", "q", "o"))._jdf.queryExecution().logical().toString()
    assert f"kafka.fetch.max.wait.ms={FETCH_MAX_WAIT_MS}" in plan and FETCH_MAX_WAIT_MS <= 50


def test_a_topic_that_does_not_exist_is_one_clear_error_line(broker, tmp_path):
    base = topics()
    KafkaSink(broker.bootstrap, base.quotes_topic, "orders-exists-" + base.orders_topic)
    done = market_spread(
        "stream",
        "--source",
        "kafka",
        "--bootstrap-servers",
        broker.bootstrap,
        "--lake",
        str(tmp_path / "lake"),
        "--quotes-topic",
        base.quotes_topic,
        "--orders-topic",
        "no-such-topic",
        "--available-now",
        timeout=120,
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "no-such-topic" in lines[0] and "do not exist" in lines[0] and "Traceback" not in done.stderr
    # Bad flags are usage errors (exit 2, one line).
    done = market_spread("stream", "--source", "kafka", "--lake", str(tmp_path / "lake"), timeout=60)
    assert done.returncode == 2 and "--bootstrap-servers" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def _producer_thread(sink: KafkaSink, files, stop: threading.Event, pause: float, rng: random.Random):
    """Sends the pre-generated files, one 'file' at a time (quotes of pair k before orders of pair
    k-1, each acknowledged before the next), every `pause` seconds, until done or stopped."""
    sent = {"lines": 0, "files": 0, "errors": []}

    def run() -> None:
        for feed, path in files:
            if stop.is_set():
                break
            lines = [l for l in path.read_text().splitlines() if l.strip()]
            while True:
                try:
                    sink(feed, path.name, lines)
                    break
                except ConnectionError as exc:  # the broker is down: the producer waits too
                    sent["errors"].append(str(exc))
                    time.sleep(1)
            sent["lines"] += len(lines)
            sent["files"] += 1
            time.sleep(pause * rng.uniform(0.5, 1.5))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, sent


def _compare_with_files(spark, lake: Path, source: Path, tmp_path: Path, lines: int) -> dict:
    clean = tmp_path / "clean"
    assert stream(spark, source, clean / "lake", symbols=SYMBOLS[:5]) == 0
    # Both lakes read with delta-rs (tests.helpers.lake.rows), as every table below.
    got, want = (
        _without_source(comparable_tables(spark, lake)),
        _without_source(comparable_tables(spark, clean / "lake")),
    )
    lost = doubled = 0
    for table in want:
        t_lost, t_doubled = diff_rows(got[table], want[table])
        lost, doubled = lost + t_lost, doubled + t_doubled
        if table != "quarantine":
            assert duplicates_by_key(table, got[table]) == 0, f"{table}: duplicated keys"
        assert (t_lost, t_doubled) == (0, 0), f"{table}: {t_lost} rows lost, {t_doubled} doubled"
    quarantine = rows(spark, lake, "quarantine")
    assert len({r["source_file"] for r in quarantine}) == len(quarantine), "a Kafka record quarantined twice"
    totals = metrics_totals(spark, lake)
    assert totals["quotes"] + totals["orders"] + totals["quarantined"] == lines
    assert totals["alerts"] == len(got["alerts"]) > 0
    metrics = rows(spark, lake, "batch_metrics", drop=())
    assert len({m["batch_id"] for m in metrics}) == len(metrics)
    return {"lost": lost, "doubled": doubled, **totals}


def _drain(
    base: KafkaSettings, broker: BrokerProcess, lake: Path, symbols: Path, log: Path, extra: tuple[str, ...] = ()
) -> None:
    drain = Job(
        [
            "stream",
            "--source",
            "kafka",
            "--bootstrap-servers",
            broker.bootstrap,
            "--quotes-topic",
            base.quotes_topic,
            "--orders-topic",
            base.orders_topic,
            "--lake",
            str(lake),
            "--symbols",
            str(symbols),
            "--available-now",
            *extra,
        ],
        log,
    )
    assert drain.wait(900) == 0, drain.tail()


@pytest.mark.slow
def test_sigkill_of_the_stream_while_producers_write_loses_and_doubles_nothing(spark, broker, tmp_path):
    began = time.monotonic()
    rng = random.Random(20261124)
    # make test's short version (its share of the windows, campaign.SHORT_PLANS); make reliability 20 kills
    plan = full_plan(rng, 20) if FULL else list(SHORT_PLANS["kafka"])
    kills = len(plan)
    symbols = symbols_file(tmp_path, SYMBOLS[:5])
    source = tmp_path / "source"
    files = make_source(
        source, SYMBOLS[:5], seed=29, quotes=60 * (2 * kills + 4), orders=60 * (2 * kills + 4), files=2 * kills + 4
    )
    base = settings_for(broker, topics())
    sink = KafkaSink(broker.bootstrap, base.quotes_topic, base.orders_topic)
    # With the alerts topic on (contract 4b): each alert of the table once in it, kills and all.
    alerts_topic = ("--alerts-topic", f"alerts-{base.quotes_topic}")
    ensure_topics(broker.bootstrap, [alerts_topic[1]], ALERTS_PARTITIONS)
    lake = tmp_path / "lake"
    stream_args = [
        "stream",
        "--source",
        "kafka",
        "--bootstrap-servers",
        broker.bootstrap,
        "--quotes-topic",
        base.quotes_topic,
        "--orders-topic",
        base.orders_topic,
        "--lake",
        str(lake),
        "--symbols",
        str(symbols),
        "--interval",
        "0.5",
        *alerts_topic,
    ]
    pending = list(files)
    sent_lines = 0
    seen_windows: Counter[str] = Counter()
    for i, window in enumerate(plan):
        job = Job(stream_args, tmp_path / f"stream-{i:02d}.log")
        # The producer keeps writing while the stream starts, runs and is killed.
        batch = [pending.pop(0) for _ in range(min(len(pending), rng.randint(2, 3)))]
        thread, sent = _producer_thread(sink, batch, threading.Event(), pause=1.0, rng=rng)
        if window == "random":
            kill_when_new_file(
                job, lake / "_checkpoints" / "stream" / "offsets", committed_only=False, timeout=600, kill=False
            )
            time.sleep(rng.uniform(0, 4))
            assert job.alive(), job.tail()
            job.kill()
        else:
            got = kill_when_new_file(job, window_folder(lake, window), committed_only=i % 2 == 0, timeout=600)
            assert got is not None, f"the stream ended by itself:\n{job.tail()}"
        thread.join(300)
        sent_lines += sent["lines"]
        seen_windows[window] += 1
        print(
            f"kafka kill {i + 1}/{kills}: {window}; {len(files) - len(pending)}/{len(files)} files produced", flush=True
        )
    assert set(seen_windows) == set(plan), f"planned windows missed: {set(plan) - set(seen_windows)}"
    thread, sent = _producer_thread(sink, pending, threading.Event(), pause=0.0, rng=rng)
    thread.join(300)
    sent_lines += sent["lines"]
    _drain(base, broker, lake, symbols, tmp_path / "drain.log", alerts_topic)

    result = _compare_with_files(spark, lake, source, tmp_path, sent_lines)
    published = assert_topic_is_the_table(broker.bootstrap, alerts_topic[1], lake, ALERTS_PARTITIONS)
    print(
        f"\nkafka crash campaign: {kills} kills ({dict(seen_windows)}), {sent_lines} records, "
        f"{result['batches']} batches, {result['alerts']} alerts ({published} published), lost {result['lost']}, doubled {result['doubled']}, "
        f"{time.monotonic() - began:.0f} s"
    )


@pytest.mark.slow
def test_the_stream_waits_for_a_restarted_broker_and_loses_nothing(spark, broker, tmp_path):
    # The module's broker, stopped and started again: this file's tests run one after another on one
    # worker (--dist loadfile), and the restart keeps every topic (same data folder).
    try:
        rng = random.Random(7)
        symbols = symbols_file(tmp_path, SYMBOLS[:5])
        source = tmp_path / "source"
        files = make_source(source, SYMBOLS[:5], seed=31, quotes=400, orders=400, files=8)
        base = settings_for(broker, topics())
        sink = KafkaSink(broker.bootstrap, base.quotes_topic, base.orders_topic)
        lake = tmp_path / "lake"
        job = Job(
            [
                "stream",
                "--source",
                "kafka",
                "--bootstrap-servers",
                broker.bootstrap,
                "--quotes-topic",
                base.quotes_topic,
                "--orders-topic",
                base.orders_topic,
                "--lake",
                str(lake),
                "--symbols",
                str(symbols),
                "--interval",
                "0.5",
            ],
            tmp_path / "stream.log",
        )
        thread, sent = _producer_thread(sink, files[:6], threading.Event(), pause=1.0, rng=rng)
        thread.join(300)
        # Wait for the first batch, then take the broker away for a while under the running stream.
        deadline = time.monotonic() + 600
        while "batch 0:" not in job.tail(100_000) and time.monotonic() < deadline:
            assert job.alive(), job.tail()
            time.sleep(0.5)
        broker.stop()
        time.sleep(8)  # the stream retries its offset listing every second: eight tries without a broker
        assert job.alive(), f"the stream died while the broker was down:\n{job.tail()}"
        broker.start()
        thread, sent_after = _producer_thread(sink, files[6:], threading.Event(), pause=0.5, rng=rng)
        thread.join(300)
        total = sent["lines"] + sent_after["lines"]
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            assert job.alive(), job.tail()
            done = metrics_totals(spark, lake) if (lake / "batch_metrics" / "_delta_log").is_dir() else None
            if done and done["quotes"] + done["orders"] + done["quarantined"] >= total:
                break
            time.sleep(2)
        # Stopped as a user stops it (SIGTERM): what is staged for symbol_state is committed at the
        # end (lake.state_writes; after a kill -9 the next start does it: the Kafka campaign's).
        job.proc.send_signal(signal.SIGTERM)
        assert job.wait(300) == 0, job.tail()
        result = _compare_with_files(spark, lake, source, tmp_path, total)
        assert (result["lost"], result["doubled"]) == (0, 0)
    finally:
        if not broker.alive():
            broker.start()


@pytest.mark.slow
def test_the_bench_kafka_row_measures_records_to_committed_alerts(spark, tmp_path):
    from market_spread_tools.bench_kafka import kafka_latency

    # Time enough to drain: every tick must then be followed to its batch (none left behind).
    result = kafka_latency(spark, tmp_path, (200,), 3, SYMBOLS[:5], drain_seconds=600)
    row = result["200"]
    assert row["ticks"] >= 8 and row["ticks_behind"] == 0, row
    assert 0 < row["p50"] <= row["p99"] and len(row["cdf_ms"]) == row["ticks"]


def test_a_kafka_batch_read_on_the_driver_gives_the_rows_of_sparks_job(spark, broker, tmp_path):
    """sources.kafka_read: the records of each batch's offset ranges, read by one kept consumer,
    are the rows Spark's job gives (a tombstone's null value and a 2 MB value included); a record
    that is not UTF-8 leaves the batch to Spark; a batch over the limit is not read."""
    from confluent_kafka import Producer

    from market_spread.sources.kafka_read import KafkaReader, offset_ranges
    from market_spread.sources.kafka_source import read_feeds

    settings = settings_for(broker, topics())
    KafkaSink(broker.bootstrap, settings.quotes_topic, settings.orders_topic)  # the topics, 4 partitions each
    raw = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 8 * 1024 * 1024})
    for i in range(40):
        raw.produce(settings.quotes_topic, value=quote("AAPL", T.format(i % 50), "1.00", "1.01").encode(), key=str(i))
        raw.produce(settings.orders_topic, value=order(f"o{i}", "AAPL", T.format(i % 50)).encode(), key=str(i))
    raw.produce(settings.orders_topic, value=None, key=b"tombstone")
    raw.produce(settings.orders_topic, value=BIG.encode(), key=b"big")
    assert raw.flush(60) == 0
    reader, seen, replays = KafkaReader(settings), [], []

    def compare(batch_df, batch_id):
        by_spark = batch_df.select("stream", "value", "source_file").toArrow()
        ranges = offset_ranges(batch_df)
        assert ranges and sum(r.records for r in ranges) == by_spark.num_rows
        assert reader.read(batch_df, by_spark.num_rows - 1) is None, "over the limit: not read"
        by_driver = reader.read(batch_df, by_spark.num_rows)
        assert by_driver is not None
        assert sorted(by_driver.to_pylist(), key=str) == sorted(by_spark.to_pylist(), key=str)
        seen.append(by_driver.num_rows)
        replays.append((ranges, sorted(by_driver.to_pylist(), key=str)))

    query = (
        read_feeds(spark, settings)
        .writeStream.foreachBatch(compare)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert sum(seen) == 82
    # A replayed batch (the same ranges again, after the consumer has moved past them) reads the same rows.
    again = reader.read_ranges(replays[0][0])
    assert again is not None and sorted(again.to_pylist(), key=str) == replays[0][1]
    raw.produce(settings.quotes_topic, value=b"\xff\xfe not UTF-8", key=b"x")
    assert raw.flush(60) == 0
    outcomes = []
    query = (
        read_feeds(spark, settings)
        .writeStream.foreachBatch(lambda df, _: outcomes.append(reader.read(df, 100)))
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert outcomes == [None], "a record that is not UTF-8: Spark's job reads the batch"
    reader.close()


def test_a_kafka_batch_read_on_the_driver_saves_sparks_read_job(spark, broker, tmp_path, monkeypatch):
    """With its records read on the driver (sources.kafka_read), a clean Kafka batch runs fewer Spark
    jobs than with MARKET_SPREAD_KAFKA_ON_DRIVER off, where a Spark job brings the records over;
    the alerts are the same."""
    settings = settings_for(broker, topics())
    sink = KafkaSink(broker.bootstrap, settings.quotes_topic, settings.orders_topic)
    events = Generator(SYMBOLS[:5], seed=11, wide_share=0.4).events(300, 300)
    for feed in ("quotes", "orders"):
        sink(feed, "one", [line for f, _, line in events if f == feed])
    results: dict[str, list] = {"on": [], "off": []}
    for switch in ("on", "off"):
        monkeypatch.setenv("MARKET_SPREAD_KAFKA_ON_DRIVER", switch)
        spec = StreamSpec(lake=tmp_path / switch, symbols=SYMBOLS, kafka=settings, available_now=True)
        assert run_query(spark, spec, on_batch=results[switch].append) == 0
    (on,), (off,) = results["on"], results["off"]
    # Off, a Spark job reads the batch's records; on, the driver's kept consumer reads them from the
    # offset ranges Spark's plan names. Both check the batch in the driver process.
    assert on.on_driver and off.on_driver and on.alerts == off.alerts > 0
    assert on.spark_jobs < off.spark_jobs, (on.spark_jobs, off.spark_jobs)
    assert rows(spark, tmp_path / "on", "alerts") == rows(spark, tmp_path / "off", "alerts")

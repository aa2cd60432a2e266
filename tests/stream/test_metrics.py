"""The stream's metrics as a monitoring system sees them: a real `market-spread stream` (files, then
Kafka through a real broker), its /metrics endpoint scraped over HTTP and parsed with Prometheus's
own text parser, compared with the batch_metrics rows read with delta-rs; the health record the
Stream page reads; and a taken port, which costs the stream its endpoint but never its run."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from market_spread.runtime.backlog import KafkaProbe, kafka_waiting
from market_spread.runtime.storage import open_delta
from market_spread.runtime.stream_health import read_health
from market_spread_tools.bench_kafka import broker_available
from tests.helpers.cli import CLI, market_spread
from tests.helpers.landing import land
from tests.helpers.processes import stop
from tests.helpers.records import BAD_ORDERS, T, order, quote

SYMBOLS = ("AAPL", "MSFT", "IBM")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> dict[str, float]:
    """Every sample of the endpoint, by `name{label=value,...}`."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            found[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return found


def batch_rows(lake: Path) -> list[dict]:
    """batch_metrics' rows ([] until the stream has created the table)."""
    from deltalake.exceptions import TableNotFoundError

    try:
        return open_delta(lake / "batch_metrics").to_pyarrow_table().to_pylist()
    except TableNotFoundError:
        return []


def _wait(what: str, condition, proc: subprocess.Popen, log: Path, timeout: float = 600):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the stream exited ({proc.returncode}):\n{log.read_text()[-4000:]}"
        found = condition()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}:\n{log.read_text()[-4000:]}")


def _start(args: list[str], log: Path, port: int) -> subprocess.Popen:
    env = dict(os.environ, MARKET_SPREAD_METRICS_PORT=str(port), MARKET_SPREAD_DRIVER_MEMORY="1g", PYTHONUNBUFFERED="1")
    with open(log, "wb") as out:
        return subprocess.Popen(
            [*CLI, "stream", *args], stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )


def assert_counts_equal_batch_metrics(port: int, lake: Path) -> dict[str, float]:
    rows, scraped = batch_rows(lake), scrape(port)
    total = {k: sum(r[k] for r in rows) for k in ("input_lines", "quotes", "orders", "alerts", "quarantined")}
    assert scraped["market_spread_batches_total"] == len(rows)
    assert scraped["market_spread_input_lines_total"] == total["input_lines"]
    assert scraped["market_spread_quotes_total"] == total["quotes"]
    assert scraped["market_spread_orders_total"] == total["orders"]
    assert scraped["market_spread_alerts_total"] == total["alerts"]
    assert scraped["market_spread_quarantined_lines_total"] == total["quarantined"]
    assert scraped["market_spread_batch_duration_seconds_count"] == len(rows)
    assert scraped["market_spread_last_batch_id"] == max(r["batch_id"] for r in rows)
    placed = Counter(r["placement"].split(":")[0] for r in rows)
    for placement, n in placed.items():
        assert scraped[f"market_spread_batches_placed_total{{placement={placement}}}"] == n, placement
    return scraped


def test_the_endpoint_counts_what_batch_metrics_holds(tmp_path: Path) -> None:
    landing, lake, log, port = tmp_path / "landing", tmp_path / "lake", tmp_path / "stream.log", _free_port()
    symbols = tmp_path / "symbols.txt"
    symbols.write_text("\n".join(SYMBOLS) + "\n")
    bad = [line for lines in BAD_ORDERS.values() for line in lines]
    land(landing, "quotes", [quote("AAPL", T.format(1), "1.00", "1.50"), quote("MSFT", T.format(1), "2.00", "2.01")])
    land(
        landing,
        "orders",
        [order("o1", "AAPL", T.format(2)), order("o2", "MSFT", T.format(2)), order("o3", "IBM", T.format(2)), *bad],
    )
    proc = _start(["--landing", str(landing), "--lake", str(lake), "--symbols", str(symbols)], log, port)
    try:
        _wait("the first batch", lambda: batch_rows(lake), proc, log)
        # A second round after the first batch: files the endpoint must count as they are committed.
        land(landing, "quotes", [quote("IBM", T.format(3), "3.00", "3.40")])
        land(landing, "orders", [order("o4", "IBM", T.format(4)), order("o5", "AAPL", T.format(4))])
        expected_lines = 2 + 3 + len(bad) + 1 + 2
        _wait(
            "every line committed", lambda: sum(r["input_lines"] for r in batch_rows(lake)) == expected_lines, proc, log
        )
        # Latency is measured on the sampler's thread: one observation per landing file (4 files).
        _wait(
            "four latency observations",
            lambda: scrape(port).get("market_spread_end_to_end_latency_seconds_count") == 4,
            proc,
            log,
            60,
        )
        scraped = assert_counts_equal_batch_metrics(port, lake)
        assert scraped["market_spread_quarantined_lines_total"] == len(bad) > 0
        assert scraped["market_spread_alerts_total"] == 4  # o1, o4, o5 wide; o3 without market data
        assert 0 < scraped["market_spread_end_to_end_latency_seconds_sum"] < 600
        # Nothing waits once the last batch is in (the sampler looks every 5 s).
        _wait(
            "an empty backlog",
            lambda: all(scrape(port)[f"market_spread_backlog_files{{feed={f}}}"] == 0 for f in ("quotes", "orders")),
            proc,
            log,
            60,
        )
        scraped = scrape(port)
        assert scraped["market_spread_input_waiting_seconds"] == 0
        for table in ("alerts", "quotes", "symbol_state", "quarantine", "batch_metrics"):  # no user feature
            assert scraped[f"market_spread_table_writer{{table={table},writer=delta-rs}}"] == 1, table
            assert scraped[f"market_spread_table_writer{{table={table},writer=delta-spark}}"] == 0, table
        # The record is rewritten after each sample (every 5 s), so it may lag the endpoint by one.
        _wait(
            "the page's latency: the same 4 files",
            lambda: sum(minute[1] for minute in read_health(lake).get("minutes", [])) == 4,
            proc,
            log,
            30,
        )
        health = read_health(lake)
        assert health["metrics_endpoint"] == f"http://127.0.0.1:{port}/metrics"
        assert health["last_batch"]["batch_id"] == max(r["batch_id"] for r in batch_rows(lake))
        assert health["writers"]["alerts"] == {"writer": "delta-rs", "why": ""}
    finally:
        stop(proc, signal.SIGTERM, timeout=120)
    assert proc.returncode == 0, log.read_text()[-3000:]
    with pytest.raises(OSError):  # the endpoint ends with the stream
        scrape(port)


def test_a_taken_port_costs_the_endpoint_not_the_stream(tmp_path: Path) -> None:
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    land(landing, "quotes", [quote("AAPL", T.format(1), "1.00", "1.01")])
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = market_spread(
            "stream",
            "--landing",
            str(landing),
            "--lake",
            str(lake),
            "--available-now",
            timeout=600,
            env=dict(os.environ, MARKET_SPREAD_METRICS_PORT=str(port)),
        )
    assert done.returncode == 0, done.stderr[-3000:]
    warnings = [line for line in done.stderr.splitlines() if "metrics endpoint" in line]
    assert warnings == [
        f"market-spread stream: warning: no metrics endpoint: port {port} in use: set MARKET_SPREAD_METRICS_PORT "
        "(port 0 turns it off)"
    ]
    assert "batch 0:" in done.stdout and "Traceback" not in done.stderr
    health = read_health(lake)
    # The Stream page says why there is none, with what to do (stream_page reads these two).
    assert health["metrics_endpoint"] is None
    assert health["metrics_note"] == f"none: port {port} in use: set MARKET_SPREAD_METRICS_PORT"


@pytest.mark.skipif(broker_available() is not None, reason="Kafka JARs not fetched: run `make setup`")
def test_kafka_lag_and_latency(tmp_path: Path) -> None:
    from market_spread.feeds.broker import BrokerProcess

    broker = BrokerProcess(tmp_path / "kafka")
    broker.start()
    lake, log, port = tmp_path / "lake", tmp_path / "stream.log", _free_port()
    topics = ("quotes-m", "orders-m")
    proc = None
    try:
        produced = market_spread(
            "generate",
            "--kafka",
            broker.bootstrap,
            "--quotes-topic",
            topics[0],
            "--orders-topic",
            topics[1],
            "--quotes",
            "300",
            "--orders",
            "300",
            "--files",
            "2",
            timeout=300,
        )
        assert produced.returncode == 0, produced.stderr
        # Before any batch: every record waits, the oldest produced moments ago.
        probe = KafkaProbe(broker.bootstrap)
        try:
            before = kafka_waiting(probe, lake / "_checkpoints" / "stream", topics)
        finally:
            probe.close()
        assert (before.count, before.parts) == (600, {topics[0]: 300, topics[1]: 300})
        assert before.oldest is not None and 0 <= time.time() - before.oldest < 300
        proc = _start(
            [
                "--source",
                "kafka",
                "--bootstrap-servers",
                broker.bootstrap,
                "--quotes-topic",
                topics[0],
                "--orders-topic",
                topics[1],
                "--lake",
                str(lake),
            ],
            log,
            port,
        )
        _wait("every record committed", lambda: sum(r["input_lines"] for r in batch_rows(lake)) == 600, proc, log)
        _wait(
            "no lag",
            lambda: sum(v for k, v in scrape(port).items() if k.startswith("market_spread_kafka_lag_records{")) == 0,
            proc,
            log,
            60,
        )
        scraped = assert_counts_equal_batch_metrics(port, lake)
        assert scraped[f"market_spread_kafka_lag_records{{topic={topics[0]}}}"] == 0
        # One observation per partition the batches took records from (4 partitions per topic).
        assert 1 <= scraped["market_spread_end_to_end_latency_seconds_count"] <= 8 * len(batch_rows(lake))
        assert 0 < scraped["market_spread_end_to_end_latency_seconds_sum"]
        # The record is written right after the sample the endpoint shows: it may lag it by a moment.
        _wait("the record's empty backlog", lambda: read_health(lake)["backlog"]["count"] == 0, proc, log, 30)
    finally:
        if proc is not None:
            stop(proc, signal.SIGTERM, timeout=120)
        broker.stop()

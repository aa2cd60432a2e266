"""`stream --alerts-topic` (contract 4b) against a real single-node broker, real Spark and Delta:

- the records equal the alerts table, each row once: key = symbol, value = the row's columns as
  JSON (decimals as stored, times in UTC with microseconds and `Z`), a `batch_id` header, in the
  partition Java's murmur2 picks (that a restart publishes only what follows the position it reads
  back is the kill -9 campaign's, below);
- a missing topic is one line and exit 2; so is `--alerts-topic` without brokers;
- a broker outage under a running stream over landing files: batches keep committing, the lag shows
  in the health record (the Stream page) and the metrics, and the topic catches up exactly once.
The kill -9 campaign with the topic on is test_kafka.py's (Kafka input) and, in `make reliability`,
the landing files campaign's."""

from __future__ import annotations

import os
import signal
import time
import urllib.request
from pathlib import Path

import pytest

from market_spread.feeds.broker import BrokerProcess, free_port
from market_spread.feeds.generate import Generator, write_backlog
from market_spread.feeds.producer import ensure_topics
from market_spread.runtime.stream_health import read_health
from market_spread_tools.bench_kafka import broker_available
from tests.helpers.alerts_topic import assert_topic_is_the_table, table_records
from tests.helpers.campaign import Job
from tests.helpers.cli import market_spread
from tests.helpers.symbols import symbols_file

pytestmark = pytest.mark.skipif(broker_available() is not None, reason="Kafka JARs not fetched: run `make setup`")

SYMBOLS = ["AAPL", "MSFT", "IBM", "GOOG", "TSLA"]
PARTITIONS = 3


def stream_args(landing: Path, lake: Path, symbols: Path, broker: BrokerProcess, topic: str) -> list[str]:
    return [
        "stream",
        "--landing",
        str(landing),
        "--lake",
        str(lake),
        "--symbols",
        str(symbols),
        "--alerts-topic",
        topic,
        "--bootstrap-servers",
        broker.bootstrap,
    ]


def feed(landing: Path, seed: int, files: int = 2) -> None:
    generator = Generator(SYMBOLS, seed=seed, wide_share=0.4)
    write_backlog(landing, generator, quotes=300 * files, orders=300 * files, files=files, tag=f"s{seed}")


def test_records_equal_the_table_once_each_and_a_missing_topic_is_refused(broker, tmp_path):
    symbols, landing, lake = symbols_file(tmp_path, SYMBOLS), tmp_path / "landing", tmp_path / "lake"
    args = stream_args(landing, lake, symbols, broker, "alerts-a")
    missing = market_spread(*args, "--available-now", timeout=300)
    assert missing.returncode == 2, missing.stderr
    assert "alerts topic alerts-a does not exist" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    no_brokers = market_spread("stream", "--landing", str(landing), "--lake", str(lake), "--alerts-topic", "a")
    assert no_brokers.returncode == 2 and "--bootstrap-servers" in no_brokers.stderr

    ensure_topics(broker.bootstrap, ["alerts-a"], PARTITIONS)
    feed(landing, seed=1)
    done = market_spread(*args, "--available-now", timeout=300)
    assert done.returncode == 0, done.stderr
    assert assert_topic_is_the_table(broker.bootstrap, "alerts-a", lake, PARTITIONS) > 0


def wait_for(what: str, ready, job: Job, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert job.alive(), job.tail()
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{job.tail()}"
        time.sleep(0.5)


def unpublished_metric(port: int) -> float:
    """`market_spread_alerts_unpublished` as Prometheus scrapes it from the stream's endpoint."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    (line,) = [l for l in text.splitlines() if l.startswith("market_spread_alerts_unpublished ")]
    return float(line.split()[1])


def lines_committed(lake: Path) -> int:
    from deltalake import DeltaTable

    if not (lake / "batch_metrics" / "_delta_log").is_dir():
        return 0
    rows = DeltaTable(str(lake / "batch_metrics")).to_pyarrow_table(columns=["input_lines"]).to_pylist()
    return sum(r["input_lines"] for r in rows)


@pytest.mark.slow
def test_a_broker_outage_never_stops_the_tables_and_the_topic_catches_up_exactly_once(broker, tmp_path, monkeypatch):
    symbols, landing, lake = symbols_file(tmp_path, SYMBOLS), tmp_path / "landing", tmp_path / "lake"
    port = free_port()
    monkeypatch.setenv("MARKET_SPREAD_METRICS_PORT", str(port))  # the job's environment (Job copies it)
    ensure_topics(broker.bootstrap, ["alerts-b"], PARTITIONS)
    job = Job([*stream_args(landing, lake, symbols, broker, "alerts-b"), "--interval", "0.5"], tmp_path / "s.log")
    try:
        feed(landing, seed=3)
        wait_for("the first batch", lambda: lines_committed(lake) == 1200, job)
        assert_topic_is_the_table(broker.bootstrap, "alerts-b", lake, PARTITIONS)
        broker.stop()
        feed(landing, seed=4)
        wait_for("batches while the broker is down", lambda: lines_committed(lake) == 2400, job)
        waiting = sum(table_records(lake).values())

        def lag_shown() -> bool:
            topic = read_health(lake).get("alerts_topic") or {}
            return (topic.get("unpublished") or 0) > 0

        wait_for("the lag in the health record", lag_shown, job, timeout=60)
        assert unpublished_metric(port) > 0
        broker.start()
        assert assert_topic_is_the_table(broker.bootstrap, "alerts-b", lake, PARTITIONS) == waiting
        wait_for(
            "the lag back to 0", lambda: (read_health(lake).get("alerts_topic") or {}).get("unpublished") == 0, job
        )
        os.kill(job.proc.pid, signal.SIGTERM)  # the driver only: it stops its JVM itself
        assert job.wait(120) == 0, job.tail()
    finally:
        if job.alive():
            job.kill()
        if not broker.alive():
            broker.start()

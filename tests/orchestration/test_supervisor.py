"""The stream supervisor and its health check, with a stand-in for the stream (no Spark), and the
job runner they are built on; the Kafka stall check against a real broker."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from market_spread.orchestration.jobs import run_job
from market_spread.orchestration.probes import StreamHealth
from market_spread.orchestration.settings import Settings, resolve_settings
from market_spread.orchestration.supervisor import StreamFailed, stream_argv, supervise_stream
from market_spread.runtime.backlog import BacklogUnknown, KafkaProbe, kafka_waiting
from market_spread.runtime.processes import pid_alive
from market_spread_tools.bench_kafka import broker_available
from tests.helpers.cli import market_spread

FAKE_STREAM = r"""
import signal, sys, time
mode = sys.argv[1]
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
print("market-spread stream: fake", flush=True)
batch = 0
while not stop:
    if mode == "die" and batch == 2:
        print("boom", flush=True)
        sys.exit(7)
    if mode == "busy":
        sys.exit(3)
    if mode != "hang" or batch == 0:
        print(f"batch {batch}: 10 lines, 5 quotes, 5 orders, 1 alerts, 0 quarantined in 0.01s", flush=True)
        batch += 1
    time.sleep(0.2)
time.sleep(0.3)  # the batch in flight
print("market-spread stream: stopped", flush=True)
"""


def _fake(tmp_path: Path, mode: str) -> list[str]:
    script = tmp_path / "fake_stream.py"
    script.write_text(FAKE_STREAM)
    return [sys.executable, str(script), mode]


def _settings(tmp_path: Path, **kw) -> Settings:
    return Settings(lake=tmp_path / "lake", landing=tmp_path / "landing", **kw)


def test_health_check_flags_only_waiting_input(tmp_path) -> None:
    landing = tmp_path / "landing"
    t0 = time.time()
    for feed in ("quotes", "orders"):
        (landing / feed).mkdir(parents=True)
        os.utime(landing / feed, (t0 - 50, t0 - 50))
    health = StreamHealth(landing, stall_seconds=10, startup_seconds=10, started=t0)
    assert health.check(now=t0 + 100) is None  # nothing arrived: idle, not stalled
    f = landing / "orders" / "a.jsonl"
    f.write_text("{}\n")
    os.utime(f, (t0 + 200, t0 + 200))
    os.utime(landing / "orders", (t0 + 200, t0 + 200))
    assert health.check(now=t0 + 205) is None  # waiting 5 s < 10 s
    assert "no batch progress" in health.check(now=t0 + 300)
    assert health.observe_line("batch 3: 1 lines, 1 quotes, 0 orders, 0 alerts, 0 quarantined in 0.50s", now=t0 + 301)
    assert health.last_batch_id == 3
    assert health.check(now=t0 + 400) is None  # the batch took the file
    slow_start = StreamHealth(landing, stall_seconds=10, startup_seconds=1000, started=t0)
    assert slow_start.check(now=t0 + 300) is None  # before the first batch, more slack
    os.utime(landing / "quotes", (t0 + 500, t0 + 500))  # a file left the folder: no new input
    assert health.check(now=t0 + 600) is None
    assert not health.observe_line("market-spread stream: something else")


def test_supervisor_stops_on_request(tmp_path) -> None:
    requests = iter([None, None, "the DAG is paused"])
    lines: list[str] = []
    outcome = supervise_stream(
        _settings(tmp_path),
        lambda: next(requests, "again"),
        lines.append,
        stop_check_every=0.5,
        argv=_fake(tmp_path, "ok"),
    )
    assert outcome.reason.startswith("stopped: the DAG is paused (exit 0)")
    assert outcome.batches >= 1
    assert any(line.startswith("batch 0:") for line in lines)  # progress reaches the task log
    assert "market-spread stream: stopped" in lines


def test_supervisor_fails_when_the_job_dies(tmp_path) -> None:
    with pytest.raises(StreamFailed, match="exited with code 7 after 2 batches"):
        supervise_stream(_settings(tmp_path), lambda: None, lambda _: None, argv=_fake(tmp_path, "die"))


def test_supervisor_reports_a_busy_lake(tmp_path) -> None:
    with pytest.raises(StreamFailed, match="another writer holds the lake"):
        supervise_stream(_settings(tmp_path), lambda: None, lambda _: None, argv=_fake(tmp_path, "busy"))


def test_supervisor_stops_a_stalled_job_and_fails(tmp_path) -> None:
    landing = tmp_path / "landing"
    settings = _settings(tmp_path, stall_seconds=1.0, startup_seconds=1.0, stop_timeout=5.0)
    (landing / "quotes").mkdir(parents=True)
    seen: list[str] = []

    calls = {"n": 0}

    def drop_a_file() -> None:
        # Lands after the job's only batch: then nothing ever takes it.
        calls["n"] += 1
        if calls["n"] == 3:
            (landing / "quotes" / "q.jsonl").write_text("{}\n")
        return None

    began = time.monotonic()
    with pytest.raises(StreamFailed, match="stream stalled"):
        supervise_stream(
            settings,
            drop_a_file,
            seen.append,
            stop_check_every=0.5,
            health_check_every=0.5,
            argv=_fake(tmp_path, "hang"),
        )
    assert time.monotonic() - began < 30
    assert any("health check failed" in line for line in seen)
    assert "market-spread stream: stopped" in seen  # it got SIGTERM and ended, not orphaned


def test_supervisor_never_leaves_the_job_behind(tmp_path) -> None:
    def interrupt() -> str | None:
        raise KeyboardInterrupt

    pid_file = tmp_path / "pid"
    argv = [
        sys.executable,
        "-c",
        f"import os,time; open({str(pid_file)!r},'w').write(str(os.getpid())); time.sleep(60)",
    ]
    with pytest.raises(KeyboardInterrupt):
        supervise_stream(
            _settings(tmp_path, stop_timeout=2.0), _ticker(interrupt), lambda _: None, stop_check_every=0.3, argv=argv
        )
    pid = int(pid_file.read_text())
    assert not pid_alive(pid)


def _ticker(then):
    calls = {"n": 0}

    def check():
        calls["n"] += 1
        return None if calls["n"] == 1 else then()

    return check


def test_run_job_logs_every_line() -> None:
    lines: list[str] = []
    rc = run_job([sys.executable, "-c", "print('a'); print('b'); raise SystemExit(3)"], lines.append)
    assert rc == 3
    assert lines[-2:] == ["a", "b"]


def test_stream_task_log_is_one_summary_per_n_batches() -> None:
    from types import SimpleNamespace

    from market_spread.observation.progress import ProgressSummary

    lines: list[str] = []
    summary = ProgressSummary(every=20, max_seconds=3600, out=lines.append)
    for b in range(45):
        summary(SimpleNamespace(batch_id=b, input_lines=3, quotes=1, orders=2, alerts=1, quarantined=0, seconds=0.5))
    summary.flush()
    assert lines == [
        "batch 19: 20 batches (0-19): 60 lines, 20 quotes, 40 orders, 20 alerts, 0 quarantined; last in 0.50s",
        "batch 39: 20 batches (20-39): 60 lines, 20 quotes, 40 orders, 20 alerts, 0 quarantined; last in 0.50s",
        "batch 44: 5 batches (40-44): 15 lines, 5 quotes, 10 orders, 5 alerts, 0 quarantined; last in 0.50s",
    ]
    # The supervisor's health check counts the batches a summary stands for.
    health = StreamHealth(Path("/nonexistent"), 300)
    for line in lines:
        assert health.observe_line(line)
    assert (health.batches, health.last_batch_id) == (45, 44)
    assert health.observe_line("batch 45: 3 lines, 1 quotes, 2 orders, 1 alerts, 0 quarantined in 0.40s")
    assert health.batches == 46
    # A batch that no other follows is still reported within max_seconds, so the stall check never starves.
    slow: list[str] = []
    summary = ProgressSummary(every=20, max_seconds=0.3, out=slow.append)
    summary(SimpleNamespace(batch_id=7, input_lines=1, quotes=1, orders=0, alerts=0, quarantined=0, seconds=9.0))
    assert slow == []
    time.sleep(1.0)
    assert slow == ["batch 7: 1 batches (7-7): 1 lines, 1 quotes, 0 orders, 0 alerts, 0 quarantined; last in 9.00s"]

    argv = stream_argv(Settings())
    assert argv[argv.index("--progress-every") + 1] == "20"
    assert resolve_settings(lambda name: "5" if name == "market_spread_progress_every" else None).progress_every == 5


@pytest.mark.skipif(broker_available() is not None, reason="Kafka JARs not fetched: run `make setup`")
def test_a_stalled_kafka_stream_is_stopped_and_fails_but_an_idle_one_is_not(tmp_path) -> None:
    """With a Kafka source the stall check reads the topics' end offsets against the checkpoint's
    committed ones (a real broker; the stream is the stand-in that completes one batch, then hangs)."""
    from market_spread.feeds.broker import BrokerProcess

    broker = BrokerProcess(tmp_path / "kafka")
    broker.start()
    topics = ("quotes-s", "orders-s")
    settings = _settings(
        tmp_path,
        source="kafka",
        bootstrap_servers=broker.bootstrap,
        quotes_topic=topics[0],
        orders_topic=topics[1],
        stall_seconds=1.0,
        startup_seconds=1.0,
        stop_timeout=5.0,
    )

    def produce(quotes: int, orders: int) -> None:
        done = market_spread(
            "generate",
            "--kafka",
            broker.bootstrap,
            "--quotes-topic",
            topics[0],
            "--orders-topic",
            topics[1],
            "--quotes",
            str(quotes),
            "--orders",
            str(orders),
            timeout=300,
        )
        assert done.returncode == 0, done.stderr

    try:
        produce(0, 0)  # the topics, empty: an idle source is never a stall
        assert _readable_waiting(broker.bootstrap, tmp_path / "lake", topics) == 0
        outcome = supervise_stream(
            settings,
            _after(6.0, "the DAG is paused"),
            lambda _: None,
            stop_check_every=0.5,
            health_check_every=0.5,
            argv=_fake(tmp_path, "hang"),
        )
        assert outcome.reason.startswith("stopped: the DAG is paused")
        produce(10, 10)  # records no batch will take
        seen: list[str] = []
        with pytest.raises(StreamFailed, match="stream stalled: no batch progress .* while input has waited"):
            supervise_stream(
                settings,
                _after(120, "no stall seen in 120 s"),
                seen.append,
                stop_check_every=0.5,
                health_check_every=0.5,
                argv=_fake(tmp_path, "hang"),
            )
        assert "market-spread stream: stopped" in seen
    finally:
        broker.stop()


def _readable_waiting(bootstrap: str, lake: Path, topics: tuple[str, str]) -> int:
    """The records waiting, once the new topics' partitions have their leader (seconds after creation)."""
    probe, deadline = KafkaProbe(bootstrap), time.monotonic() + 60
    try:
        while True:
            try:
                return kafka_waiting(probe, lake / "_checkpoints" / "stream", topics).count
            except BacklogUnknown:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
    finally:
        probe.close()


def _after(seconds: float, reason: str):
    deadline = time.monotonic() + seconds
    return lambda: reason if time.monotonic() > deadline else None


def test_the_alerts_topic_reaches_the_stream_with_its_brokers_whatever_the_source() -> None:
    files = stream_argv(Settings(alerts_topic="alerts", bootstrap_servers="127.0.0.1:9092"))
    assert files[files.index("--alerts-topic") + 1] == "alerts"
    assert files[files.index("--bootstrap-servers") + 1] == "127.0.0.1:9092" and "--landing" in files
    kafka = stream_argv(Settings(alerts_topic="alerts", bootstrap_servers="127.0.0.1:9092", source="kafka"))
    assert kafka.count("--bootstrap-servers") == 1 and "--alerts-topic" in kafka
    assert "--alerts-topic" not in stream_argv(Settings())

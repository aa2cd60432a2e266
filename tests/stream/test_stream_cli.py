"""The `stream` command as a process: one writer per lake, the checkpoint guard and graceful stop
(contract 5.7). Exactly-once through kill -9 is the crash campaign's (tests/reliability)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from market_spread.feeds.generate import Generator, write_backlog
from market_spread.runtime.storage import Location, location
from tests.helpers.cli import CLI, market_spread
from tests.helpers.storage import arg, remove
from tests.helpers.symbols import SYMBOLS, symbols_file


def _start(landing: Location, lake: Location, symbols: Path, *extra: str) -> subprocess.Popen:
    # A session of its own, so that killing the group takes the Spark JVM down with the driver.
    return subprocess.Popen(
        CLI + ["stream", "--landing", arg(landing), "--lake", arg(lake), "--symbols", str(symbols), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _log_versions(folder: Location) -> int:
    return len(list(folder.glob("*.json"))) if folder.is_dir() else 0


def test_bad_arguments_exit_2_with_one_line(tmp_path):
    done = market_spread("stream", "--landing", str(tmp_path), "--lake", str(tmp_path / "l"), "--interval", "-1")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "--interval" in done.stderr
    done = market_spread("stream", "--lake", str(tmp_path))
    assert done.returncode == 2 and "--landing" in done.stderr
    done = market_spread(
        "stream", "--landing", str(tmp_path), "--lake", str(tmp_path / "l"), "--symbols", str(tmp_path / "nope.txt")
    )
    assert done.returncode == 2 and "symbol file not found" in done.stderr


def test_one_writer_per_lake_graceful_stop_and_the_missing_checkpoint_guard(place, tmp_path):
    """On local disk (the flock) and on S3 (the lease, runtime.lease): the same refusals."""
    landing, lake, symbols = place / "landing", place / "lake", symbols_file(tmp_path, SYMBOLS)
    write_backlog(landing, Generator(SYMBOLS, seed=2), 50, 50, 1, "a")
    first = _start(landing, lake, symbols, "--interval", "1")
    try:
        _wait_for(lambda: (lake / "batch_metrics" / "_delta_log" / f"{1:020d}.json").exists(), 300, "the first batch")
        started = time.monotonic()
        second = market_spread(
            "stream",
            "--landing",
            arg(landing),
            "--lake",
            arg(lake),
            "--symbols",
            str(symbols),
            "--available-now",
            timeout=60,
        )
        assert second.returncode == 3
        # The flock's words locally, the lease's on S3 (lake.lock; both name the holder).
        busy = "another stream is already writing this lake"  # the lock file's words, and the lease's on S3
        assert busy in second.stderr, second.stderr
        assert time.monotonic() - started < 20, "refused at once, before starting Spark"
    finally:
        first.send_signal(signal.SIGTERM)
        out, _ = first.communicate(timeout=180)
    assert first.returncode == 0, out
    assert "stopping after the batch in flight" in out and "batch 0:" in out

    remove(lake / "_checkpoints")
    versions = _log_versions(lake / "batch_metrics" / "_delta_log")
    refused = market_spread(
        "stream",
        "--landing",
        arg(landing),
        "--lake",
        arg(lake),
        "--symbols",
        str(symbols),
        "--available-now",
        timeout=60,
    )
    assert refused.returncode == 4
    assert "checkpoint" in refused.stderr and "emit every alert again" in refused.stderr
    assert _log_versions(lake / "batch_metrics" / "_delta_log") == versions, "the refused run wrote nothing"


def test_checkpoint_guard_holds_after_delta_log_clean_up(spark, place, tmp_path):
    """Delta's clean-up deletes commit files older than a checkpoint: the guard must still see batches."""
    from market_spread.lake import tables as lake_mod
    from market_spread.lake.deltalog import latest_version
    from market_spread.runtime.storage import open_delta
    from tests.helpers.lake import stream
    from tests.helpers.landing import land
    from tests.helpers.records import order, quote

    landing, lake, symbols = place / "landing", place / "lake", symbols_file(tmp_path, SYMBOLS)
    for i in range(2):
        land(landing, "quotes", [quote("AAPL", f"2026-11-23T14:30:0{i}.000Z", "1.10", "1.15")])
        land(landing, "orders", [order(f"O-{i}", "AAPL", f"2026-11-23T14:30:0{i}.500Z")])
        assert stream(spark, landing, lake) == 0
    for table in lake_mod.TABLES:
        path = lake_mod.table_path(lake, table)
        if latest_version(path) == 0:
            continue  # created, never written (quarantine: no bad line)
        # An interval of 1 makes this very commit write a checkpoint, as every tenth commit does.
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.checkpointInterval' = '1')")
        log = location(path) / "_delta_log"
        checkpoint = max(int(p.name[:20]) for p in log.glob("*.checkpoint*.parquet"))
        assert checkpoint >= 2
        for old in log.iterdir():  # what the clean-up leaves: the checkpoint and later commits
            if old.name[:20].isdigit() and int(old.name[:20]) < checkpoint:
                old.unlink()
        assert not (log / f"{1:020d}.json").exists()
        assert latest_version(path) == open_delta(path).version() == checkpoint
    assert not [t for t in lake.iterdir() if (t / "_delta_log" / f"{1:020d}.json").exists()], (
        "the old guard's file is gone everywhere"
    )
    remove(lake / "_checkpoints")

    refused = market_spread(
        "stream",
        "--landing",
        arg(landing),
        "--lake",
        arg(lake),
        "--symbols",
        str(symbols),
        "--available-now",
        timeout=120,
    )
    assert refused.returncode == 4, refused.stdout + refused.stderr
    assert "checkpoint" in refused.stderr and "emit every alert again" in refused.stderr


def test_latest_version_from_delta_rs(tmp_path):
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake
    from deltalake.exceptions import DeltaError

    from market_spread.lake.deltalog import latest_version, read_commit

    table, log = tmp_path / "t", tmp_path / "t" / "_delta_log"
    assert latest_version(table) is None
    log.mkdir(parents=True)
    assert latest_version(table) is None, "an empty log is no table"
    for i in range(4):
        write_deltalake(str(table), pa.table({"x": [i]}), mode="append")
    (log / f".{4:020d}.json.tmp").write_text("{}")  # a commit in flight is no commit
    assert latest_version(table) == 3
    DeltaTable(str(table)).create_checkpoint()
    for version in range(3):  # what log clean-up leaves: the checkpoint and the commits after it
        (log / f"{version:020d}.json").unlink()
    assert latest_version(table) == 3
    assert read_commit(table, 1) is None, "a commit the clean-up deleted"
    commit = read_commit(table, 3)
    assert commit is not None and any("add" in action for action in commit.actions) and commit.time > 0
    (tmp_path / "u" / "_delta_log").mkdir(parents=True)
    (tmp_path / "u" / "_delta_log" / f"{0:020d}.json").write_text("{}")
    with pytest.raises(DeltaError):  # a log delta-rs cannot read is not taken for a missing table
        latest_version(tmp_path / "u")


def test_lock_record_of_a_reused_pid_is_stale(tmp_path):
    """After a reboot a recorded pid may name an unrelated live process: it must not block the lake."""
    import json
    import socket

    from market_spread.lake.lock import LOCK_FILE, LakeBusy, WriterLock
    from market_spread.orchestration.probes import live_stream
    from market_spread.runtime.processes import process_start_time

    lake = tmp_path / "lake"
    lake.mkdir()
    lock_path = lake / LOCK_FILE
    unrelated = subprocess.Popen(["sleep", "60"])
    try:
        started = process_start_time(unrelated.pid)
        assert started is not None

        def write(**record):
            lock_path.write_text(
                json.dumps({"host": socket.gethostname(), "since": "2026-01-01T00:00:00+00:00", **record})
            )

        # The recorded processes, really alive: the probe sees a live stream, a new writer waits then refuses.
        write(pid=unrelated.pid, pid_started=started, jvm_pid=unrelated.pid, jvm_started=started)
        assert live_stream(lake) is not None
        lock = WriterLock(lock_path)
        with pytest.raises(LakeBusy, match="Spark JVM"):
            lock.acquire(wait_for_jvm_s=0.5)

        # The same pids with another start time: reused pids of unrelated processes.
        write(pid=unrelated.pid, pid_started=started - 3600, jvm_pid=unrelated.pid, jvm_started=started - 3600)
        assert live_stream(lake) is None
        began = time.monotonic()
        lock.acquire(wait_for_jvm_s=30)
        assert time.monotonic() - began < 5, "a stale record must not make the writer wait"
        record = json.loads(lock_path.read_text())
        assert record["pid"] == os.getpid() and record["host"] == socket.gethostname()
        assert abs(record["pid_started"] - process_start_time()) < 1
        lock.release()

        # An older record without start times: the process started after the record was written.
        lock_path.write_text(
            json.dumps({"pid": unrelated.pid, "jvm_pid": unrelated.pid, "since": "2020-01-01T00:00:00+00:00"})
        )
        assert live_stream(lake) is None
        lock.acquire(wait_for_jvm_s=0.5)
        lock.release()

        # Another host's record: we hold the flock, so its driver is gone; the probe stays careful.
        write(
            host="some-other-host", pid=unrelated.pid, pid_started=started, jvm_pid=unrelated.pid, jvm_started=started
        )
        assert live_stream(lake) is not None
        lock.acquire(wait_for_jvm_s=0.5)
        lock.release()
    finally:
        unrelated.kill()
        unrelated.wait()


def test_a_constraint_the_products_own_rows_break_stops_the_command_in_one_line_exit_5(spark, tmp_path):
    """A CHECK constraint on batch_metrics that its rows break cannot be honoured (contract 5.5): the
    `stream` command says so in one line naming the table and the constraint, exits 5, and prints no
    stack trace (Spark's report of the failed query is not shown); nothing of the batch is lost."""
    from market_spread.lake import tables as lake_mod
    from tests.helpers.lake import rows, stream
    from tests.helpers.landing import land
    from tests.helpers.records import order, quote

    landing, lake, symbols = tmp_path / "landing", tmp_path / "lake", symbols_file(tmp_path, SYMBOLS)
    land(landing, "quotes", [quote("AAPL", "2026-11-23T14:30:00.000Z", "1.10", "1.15")])
    assert stream(spark, landing, lake) == 0
    metrics = lake_mod.table_path(lake, "batch_metrics")
    spark.sql(f"ALTER TABLE delta.`{metrics}` ADD CONSTRAINT few_quotes CHECK (quotes < 2)")
    land(landing, "orders", [order("O-1", "AAPL", "2026-11-23T14:30:01.000Z")])
    land(landing, "quotes", [quote(s, "2026-11-23T14:30:02.000Z", "1.10", "1.15") for s in ("AAPL", "MSFT")])
    where = ["--landing", str(landing), "--lake", str(lake), "--symbols", str(symbols)]
    quiet = {**os.environ, "MARKET_SPREAD_METRICS_PORT": "0"}  # another test's stream may hold 9407
    done = market_spread("stream", *where, "--available-now", env=quiet)
    assert done.returncode == 5, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    said = [line for line in lines if "error" in line.lower()]
    assert len(said) == 1, done.stderr[-3000:]
    assert "batch_metrics" in said[0] and "few_quotes (quotes < 2)" in said[0], said
    traced = [line for line in lines if line.lstrip().startswith(("at ", "Caused by")) or "Exception" in line]
    assert not traced and "Traceback" not in done.stderr, done.stderr[-3000:]  # no stack trace
    assert [a["order_id"] for a in rows(spark, lake, "alerts")] == ["O-1"], "the batch's other tables are in"

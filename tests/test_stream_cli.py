"""The `stream` command as a process: one writer per lake, the checkpoint guard, graceful stop,
and exactly-once through kill -9 at chosen instants (contract 5.6 and 5.7)."""
from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from market_spread.generate import Generator, write_backlog
from lakeutil import SYMBOLS, comparable_tables, metrics_totals, rows, stream

CLI = [sys.executable, "-m", "market_spread.cli"]


def _symbols_file(tmp_path: Path) -> Path:
    path = tmp_path / "symbols.txt"
    path.write_text("\n".join(SYMBOLS) + "\n")
    return path


def _start(landing: Path, lake: Path, symbols: Path, *extra: str) -> subprocess.Popen:
    # A session of its own, so that killing the group takes the Spark JVM down with the driver.
    return subprocess.Popen(
        CLI + ["stream", "--landing", str(landing), "--lake", str(lake), "--symbols", str(symbols), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _log_versions(folder: Path) -> int:
    return len(list(folder.glob("*.json"))) if folder.is_dir() else 0


def test_bad_arguments_exit_2_with_one_line(tmp_path):
    done = subprocess.run(CLI + ["stream", "--landing", str(tmp_path), "--lake", str(tmp_path / "l"), "--interval", "-1"],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "--interval" in done.stderr
    done = subprocess.run(CLI + ["stream", "--lake", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 2 and "--landing" in done.stderr
    done = subprocess.run(CLI + ["stream", "--landing", str(tmp_path), "--lake", str(tmp_path / "l"),
                                "--symbols", str(tmp_path / "nope.txt")], capture_output=True, text=True)
    assert done.returncode == 2 and "symbol file not found" in done.stderr


def test_one_writer_per_lake_graceful_stop_and_the_missing_checkpoint_guard(tmp_path):
    landing, lake, symbols = tmp_path / "landing", tmp_path / "lake", _symbols_file(tmp_path)
    write_backlog(landing, Generator(SYMBOLS, seed=2), 50, 50, 1, "a")
    first = _start(landing, lake, symbols, "--interval", "1")
    try:
        _wait_for(lambda: (lake / "batch_metrics" / "_delta_log" / f"{1:020d}.json").exists(), 300, "the first batch")
        started = time.monotonic()
        second = subprocess.run(CLI + ["stream", "--landing", str(landing), "--lake", str(lake), "--symbols", str(symbols),
                                       "--available-now"], capture_output=True, text=True, timeout=60)
        assert second.returncode == 3
        assert "another stream is already writing this lake" in second.stderr
        assert time.monotonic() - started < 20, "refused at once, before starting Spark"
    finally:
        first.send_signal(signal.SIGTERM)
        out, _ = first.communicate(timeout=180)
    assert first.returncode == 0, out
    assert "stopping after the batch in flight" in out and "batch 0:" in out

    shutil.rmtree(lake / "_checkpoints")
    versions = _log_versions(lake / "batch_metrics" / "_delta_log")
    refused = subprocess.run(CLI + ["stream", "--landing", str(landing), "--lake", str(lake), "--symbols", str(symbols),
                                    "--available-now"], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 4
    assert "checkpoint" in refused.stderr and "emit every alert again" in refused.stderr
    assert _log_versions(lake / "batch_metrics" / "_delta_log") == versions, "the refused run wrote nothing"


# The crash campaign (tests/reliability) aims at the same windows and more in every run; this older,
# fixed-instant version runs only in `make reliability` to keep `make test` within its budget.
@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("MARKET_SPREAD_RELIABILITY", "").lower() != "full",
                    reason="fixed-instant kills: the crash campaign covers them; runs in make reliability")
def test_kill_9_at_chosen_instants_loses_and_doubles_nothing(spark, tmp_path):
    """Land files while a continuous stream runs; SIGKILL driver and JVM together just after a
    commit of the quote history, of the state, of the alerts, and of the checkpoint (inside one
    micro-batch's writes or between them), restart, and compare every table with a clean run."""
    symbols = _symbols_file(tmp_path)
    source = tmp_path / "source"
    write_backlog(source, Generator(SYMBOLS, seed=11, wide_share=0.4), 3000, 3000, 12, "k")
    source_files = sorted((source / "quotes").glob("*.jsonl"))
    (source / "quotes" / "zz-bad.jsonl").write_text("not json\n")

    # The uninterrupted run over the same files, in-process.
    clean = tmp_path / "clean"
    shutil.copytree(source, clean / "landing")
    assert stream(spark, clean / "landing", clean / "lake") == 0

    landing, lake = tmp_path / "landing", tmp_path / "lake"
    (landing / "quotes").mkdir(parents=True)
    (landing / "orders").mkdir(parents=True)
    pending = [(source / "quotes" / "zz-bad.jsonl", None)] + [(q, source / "orders" / q.name) for q in source_files]
    rng = random.Random(4)

    def land_some(n: int) -> None:
        for _ in range(min(n, len(pending))):
            q, o = pending.pop(0)
            shutil.copy(q, landing / "quotes" / f".{q.name}.tmp")
            os.replace(landing / "quotes" / f".{q.name}.tmp", landing / "quotes" / q.name)
            if o is not None:
                shutil.copy(o, landing / "orders" / f".{o.name}.tmp")
                os.replace(landing / "orders" / f".{o.name}.tmp", landing / "orders" / o.name)

    targets = [lake / "quotes" / "_delta_log", lake / "symbol_state" / "_delta_log",
               lake / "alerts" / "_delta_log", lake / "_checkpoints" / "stream" / "commits"]
    kills = []
    for target in targets:
        land_some(rng.randint(1, 3))
        before = _log_versions(target) if target.name != "commits" else len(list(target.glob("[0-9]*")))
        proc = _start(landing, lake, symbols, "--interval", "0.5")
        try:
            count = (lambda: len(list(target.glob("[0-9]*")))) if target.name == "commits" else (lambda: _log_versions(target))
            _wait_for(lambda: count() > before or proc.poll() is not None, 300, f"a commit in {target}")
            assert proc.poll() is None, proc.stdout.read()
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        kills.append(target.parent.name)
    land_some(len(pending))
    final = subprocess.run(CLI + ["stream", "--landing", str(landing), "--lake", str(lake), "--symbols", str(symbols),
                                  "--available-now"], capture_output=True, text=True, timeout=600)
    assert final.returncode == 0, final.stdout + final.stderr

    got, want = comparable_tables(spark, lake), comparable_tables(spark, clean / "lake")
    for table in want:
        assert len(got[table]) == len(want[table]), f"{table}: {len(got[table])} rows, expected {len(want[table])}"
        assert got[table] == want[table], table
    totals = metrics_totals(spark, lake)
    assert totals["alerts"] == len(rows(spark, lake, "alerts"))
    assert totals["quotes"] == len(rows(spark, lake, "quotes"))
    assert totals["quarantined"] == len(rows(spark, lake, "quarantine")) == 1
    assert totals["orders"] == metrics_totals(spark, clean / "lake")["orders"]
    print(f"kill -9 campaign: {len(kills)} kills ({', '.join(kills)}), {totals['batches']} batches, "
          f"{totals['alerts']} alerts, 0 lost, 0 doubled")

"""The `stream` command as a process: one writer per lake, the checkpoint guard and graceful stop
(contract 5.7). Exactly-once through kill -9 is the crash campaign's (tests/reliability)."""
from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from market_spread.generate import Generator, write_backlog
from lakeutil import SYMBOLS

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

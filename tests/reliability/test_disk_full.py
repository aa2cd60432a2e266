"""Disk full in the middle of a batch: the lake sits on a 20 MB tmpfs and the feed holds more than
fits. The stream must stop with a non-zero code and one clear line naming the lack of space; once
the disk is grown, a restart must leave exactly the tables of an uninterrupted run."""

from __future__ import annotations

import secrets
import shutil
import subprocess

import pytest

from market_spread.feeds.generate import Generator, write_atomically, write_backlog
from tests.helpers.campaign import Job
from tests.helpers.lake import comparable_tables, metrics_totals, stream
from tests.helpers.symbols import SYMBOLS, symbols_file


def _mount(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["mount", *args], capture_output=True, text=True)


@pytest.mark.slow
def test_disk_full_mid_batch_fails_clearly_and_recovers_exactly(spark, tmp_path):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    lake.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    mounted = _mount("-t", "tmpfs", "-o", "size=20m", "tmpfs", str(lake))
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a 20 MB tmpfs for the lake (needs root): {mounted.stderr.strip()}")
    try:
        symbols = symbols_file(tmp_path, SYMBOLS)
        write_backlog(landing, Generator(SYMBOLS, seed=31, wide_share=0.4), 300, 300, 1, "a")
        # Then 2 x 14 MB of lines that go to quarantine with their raw text (random hex: the Parquet
        # files are about as large): the first fits, the second cannot.
        for i in range(2):
            write_atomically(landing / "quotes", f"z-big-{i}.jsonl", [secrets.token_hex(100_000) for _ in range(70)])
        args = [
            "stream",
            "--landing",
            str(landing),
            "--lake",
            str(lake),
            "--symbols",
            str(symbols),
            "--available-now",
            "--max-files-per-batch",
            "1",
        ]
        full = Job(args, tmp_path / "full.log")
        code = full.wait(900)
        log = full.log.read_text(errors="replace")
        assert code != 0, log[-3000:]
        assert "batch 0:" in log, "the disk filled up after batches had been committed"
        errors = [line for line in log.splitlines() if line.startswith("market-spread stream: error:")]
        assert len(errors) == 1, log[-3000:]
        assert "no space left on device" in errors[0], errors[0]
        print(f"\ndisk full: exit {code}: {errors[0]}")

        grown = _mount("-o", "remount,size=200m", str(lake))
        assert grown.returncode == 0, grown.stderr
        again = Job([a for a in args if a not in ("--max-files-per-batch", "1")], tmp_path / "again.log")
        assert again.wait(900) == 0, again.tail()

        clean = tmp_path / "clean"
        shutil.copytree(landing, clean / "landing")
        assert stream(spark, clean / "landing", clean / "lake") == 0
        got, want = comparable_tables(spark, lake), comparable_tables(spark, clean / "lake")
        for table in want:
            assert len(got[table]) == len(want[table]), f"{table}: {len(got[table])} rows, expected {len(want[table])}"
            assert got[table] == want[table], table
        totals = metrics_totals(spark, lake)
        assert totals["quarantined"] == len(got["quarantine"]) == 140
        assert (totals["quotes"], totals["orders"]) == (300, 300)
    finally:
        subprocess.run(["umount", "-l", str(lake)], capture_output=True)

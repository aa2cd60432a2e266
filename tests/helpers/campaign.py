"""Helpers of the reliability campaigns: pre-generated feeds landed a few files at a time, the
`stream` command as a process group whose memory is sampled, kills aimed at the instants a new file
appears in a Delta log or in the checkpoint, and exact accounting of what the lake holds."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import psutil

from market_spread.feeds.generate import Generator, write_atomically, write_backlog
from market_spread.runtime.storage import Location, S3Path, list_names, location, open_delta
from tests.helpers.cli import CLI
from tests.helpers.landing import land_file
from tests.helpers.records import bad_lines

FULL = os.environ.get("MARKET_SPREAD_RELIABILITY", "").lower() == "full"
TABLES_WITH_LOGS = ("quotes", "symbol_state", "alerts", "quarantine", "batch_metrics")
CHECKPOINT_WINDOWS = ("offsets", "commits")
# The windows of a batch a kill aims at: its offsets file, each table's commit, its commit mark.
WINDOWS = ("offsets", *TABLES_WITH_LOGS, "commits")
# make test's short campaigns share the windows out: each at least once across disk, S3 and Kafka
# (tests/unit/test_campaign_plans.py). Quarantine on local disk, where every file carries bad lines.
# `make reliability` hits every window on each storage, several times.
SHORT_PLANS = {
    "local": ("quotes", "quarantine"),
    "s3": ("symbol_state", "batch_metrics"),
    "kafka": ("offsets", "alerts", "commits"),
}


def full_plan(rng: random.Random, kills: int) -> list[str]:
    """`make reliability`'s plan: every window and a random instant, shuffled, round after round."""
    every = [*WINDOWS, "random"]
    plan: list[str] = []
    while len(plan) < kills:
        plan += rng.sample(every, len(every))
    return plan[:kills]


def window_folder(lake: Location, window: str) -> Location:
    """Where a new file marks the window: the checkpoint's offsets/ or commits/, or a table's log."""
    if window in CHECKPOINT_WINDOWS:
        return lake / "_checkpoints" / "stream" / window
    return lake / window / "_delta_log"


def make_source(
    source: Path,
    symbols: list[str],
    seed: int,
    quotes: int,
    orders: int,
    files: int,
    bad_per_file: int = 2,
    dirty_every: int = 1,
) -> list[tuple[str, Path]]:
    """Write the whole feed once (so an uninterrupted run can see the very same files); every
    `dirty_every`-th file pair also carries a few bad lines, so that micro-batches write the
    quarantine too. Returns the files in landing order: quotes of pair k one step ahead of the orders
    of pair k, so that every quote lands strictly earlier than the orders it affects (contract 5.2
    and 5.8), and the orders of pair k land after the quotes of pair k + 1: late orders, older than
    their symbols' state, checked against the quote history."""
    write_backlog(source, Generator(symbols, seed=seed, wide_share=0.4), quotes, orders, files, f"s{seed}")
    rng = random.Random(seed)
    for feed in ("quotes", "orders"):
        for k, path in enumerate(sorted((source / feed).glob("*.jsonl"))):
            if k % dirty_every:
                continue
            lines = path.read_text().splitlines()
            for bad in bad_lines(rng, bad_per_file, f"{feed}/{path.name}"):
                lines.insert(rng.randrange(len(lines) + 1), bad)
            write_atomically(path.parent, path.name, lines)
    q = sorted((source / "quotes").glob("*.jsonl"))
    o = sorted((source / "orders").glob("*.jsonl"))
    order: list[tuple[str, Path]] = []
    for k in range(len(q)):
        order.append(("quotes", q[k]))
        if k:
            order.append(("orders", o[k - 1]))
    order.append(("orders", o[-1]))
    return order


class Lander:
    """Lands pre-generated files into a landing folder atomically (copied aside, renamed in; on S3
    one PUT each)."""

    def __init__(self, files: list[tuple[str, Path]], landing: Location):
        self.pending = list(files)
        self.landing = landing
        self.lines = 0
        for feed in ("quotes", "orders"):
            (landing / feed).mkdir(parents=True, exist_ok=True)

    def land(self, n: int) -> int:
        done = 0
        while self.pending and done < n:
            feed, path = self.pending.pop(0)
            land_file(path, self.landing, feed)
            self.lines += sum(1 for line in path.read_text().splitlines() if line.strip())
            done += 1
        return done

    def land_all(self) -> None:
        self.land(len(self.pending))


class Job:
    """A `market-spread` command in a session (process group) of its own, its output in a file and
    the memory of its whole tree (driver + Spark JVM; proportional set size) sampled every 0.2 s."""

    def __init__(self, args: list[str], log: Path):
        self.log = log
        self.out = open(log, "ab")
        # Compaction every 3 commits (default 100): the campaign's streams run a few dozen batches,
        # and its kills must also land during and after compactions (lake.compaction).
        # The quick JIT (C1 only) also for continuous streams: these live a minute or so before their
        # kill, so the optimising compiler's work (cores of it in a JVM's first minute, on 2 cores)
        # never pays back (runtime/spark.py QUICK_JIT); compiled code changes no result.
        env = {
            **os.environ,
            "MARKET_SPREAD_COMPACT_EVERY": os.environ.get("MARKET_SPREAD_COMPACT_EVERY", "3"),
            "MARKET_SPREAD_JIT": os.environ.get("MARKET_SPREAD_JIT", "quick"),
        }
        self.proc = subprocess.Popen(
            CLI + args, stdout=self.out, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )
        self.peak_rss = 0
        self._done = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _tree_rss(self) -> int:
        total = 0
        try:
            root = psutil.Process(self.proc.pid)
            for p in [root, *root.children(recursive=True)]:
                try:
                    # PSS, not RSS: when the JVM forks a helper (chmod, readlink) the child shares
                    # the JVM's pages until it execs, and summing RSS counted them twice (4.2 GB
                    # measured for a 2 GB JVM).
                    total += p.memory_full_info().pss
                except psutil.Error:
                    pass
        except psutil.Error:
            pass
        return total

    def _sample(self) -> None:
        while not self._done.wait(0.2):
            self.peak_rss = max(self.peak_rss, self._tree_rss())

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole group at once, then wait until none of its processes is left."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self._finish()
        deadline = time.monotonic() + 30
        while group_members(self.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not group_members(self.proc.pid), f"processes left in the killed group: {group_members(self.proc.pid)}"

    def wait(self, timeout: float) -> int:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.log.name}: still running after {timeout}s\n{self.tail()}") from None
        self._finish()
        return code

    def _finish(self) -> None:
        self._done.set()
        self._sampler.join()
        self.out.close()

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_bytes()[-chars:].decode("utf-8", "replace")


def wait_for_lock(job: Job, lake: Location, timeout: float = 120) -> None:
    """Wait until the stream holds the lake's writer lock (on S3 its lease; taken before Spark starts)."""
    from market_spread.orchestration.probes import read_stream_lock

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and job.alive():
        if read_stream_lock(location(lake)).get("pid") == job.proc.pid:
            return
        time.sleep(0.05 if isinstance(lake, S3Path) else 0.005)
    raise AssertionError(f"the stream did not take the lake's lock:\n{job.tail()}")


def group_members(pgid: int) -> list[int]:
    out = []
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p.pid)
        except (ProcessLookupError, psutil.Error):
            pass
    return out


def _entries(folder: Location) -> set[str]:
    return set(list_names(folder) or ())


def kill_when_new_file(
    job: Job, folder: Location, committed_only: bool, timeout: float, poll: float | None = None, kill: bool = True
) -> str | None:
    """Poll `folder` every `poll` s; SIGKILL the job's group the moment a new entry appears in it
    (`committed_only`: a log version `N.json` or a checkpoint file `N`, i.e. just after a commit;
    otherwise any entry, typically a temporary file: in the middle of the commit). Returns the name
    seen, or None if the job ended by itself. By default every 5 ms locally; on S3 every 20 ms: a
    listing there is a request of about 10 ms, and back to back (67 a second) the poller and the S3
    server took 42 % of a core from the stream under test (28 % at 20 ms, measured under load)."""
    if poll is None:
        poll = 0.02 if isinstance(folder, S3Path) else 0.005
    deadline = time.monotonic() + timeout
    seen = _entries(folder)
    # A table's log: a batch's commit is the window, not the table's creation (version 0) when the
    # stream first starts, whose kill would leave a log folder with no commit, no table yet.
    while folder.name == "_delta_log" and not _committed(seen) and job.alive() and time.monotonic() < deadline:
        time.sleep(poll)
        seen = _entries(folder)
    while time.monotonic() < deadline:
        new = _entries(folder) - seen
        if committed_only:
            new = _committed(new)
        if new:
            if kill:
                os.killpg(job.proc.pid, signal.SIGKILL)
                job.kill()
            return sorted(new)[0]
        if not job.alive():
            return None
        time.sleep(poll)
    job.kill()
    raise AssertionError(f"no new file in {folder} within {timeout}s\n{job.tail()}")


def _committed(names: set[str]) -> set[str]:
    """The names of committed versions: a log's `N.json`, a checkpoint's `N`."""
    return {n for n in names if n.split(".")[0].isdigit() and (n.endswith(".json") or n.isdigit())}


def batch_ids(folder: Location) -> set[int]:
    return {int(n) for n in _entries(folder) if n.isdigit()}


def tagged_batches(table: Location) -> set[int]:
    """The micro-batch ids the commits of the stream record: their Delta transaction marks (txn)."""
    out = set()
    for path in (table / "_delta_log").glob("*.json"):
        for line in path.read_text().splitlines():
            if '"txn"' in line:
                out.add(int(json.loads(line)["txn"]["version"]))
    return out


def in_flight(lake: Location) -> tuple[int | None, list[str]]:
    """After a kill: the batch started (offsets/N) but not committed (no commits/N), if any, and
    the tables that had already committed their part of it. That batch is run again on restart."""
    checkpoint = lake / "_checkpoints" / "stream"
    offsets, commits = batch_ids(checkpoint / "offsets"), batch_ids(checkpoint / "commits")
    pending = sorted(offsets - commits)
    if not pending:
        return None, []
    batch = pending[-1]
    written = [t for t in TABLES_WITH_LOGS if batch in tagged_batches(lake / t)]
    return batch, written


def readable_with_delta_rs(lake: Location) -> dict[str, int]:
    """Row counts read without Spark (delta-rs): the tables stay readable after every kill."""
    return {
        t: open_delta(lake / t).to_pyarrow_table().num_rows
        for t in TABLES_WITH_LOGS
        if (lake / t / "_delta_log").is_dir()
    }


def diff_rows(got: list[dict], want: list[dict]) -> tuple[int, int]:
    """(rows lost, rows doubled or extra) between two lists of comparable rows, as multisets."""
    g = Counter(json.dumps(r, default=str, sort_keys=True) for r in got)
    w = Counter(json.dumps(r, default=str, sort_keys=True) for r in want)
    return sum((w - g).values()), sum((g - w).values())


KEYS = {
    "alerts": ("order_id", "order_seq", "order_time"),  # one alert per order
    "quotes": ("symbol", "quote_time", "seq"),  # one history row per quote
    "quarantine": ("stream", "file", "raw"),  # one row per bad source line
    "symbol_state": ("symbol",),  # one row per symbol
}


def duplicates_by_key(table: str, table_rows: list[dict]) -> int:
    keys = Counter(tuple(str(r[k]) for k in KEYS[table]) for r in table_rows)
    return sum(n - 1 for n in keys.values() if n > 1)

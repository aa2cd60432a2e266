"""`market-spread stream`: the continuous job over both feeds (contract sections 2 and 5)."""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO

from market_spread.lake import tables as lake_mod
from market_spread.runtime.processes import process_start_time, record_alive, this_host
from market_spread.runtime.stream_contract import EXIT_LAKE_BUSY, EXIT_REFUSED, LOCK_FILE
from market_spread.cli.options import add_lake, add_symbols, add_thresholds, load_symbols, whole_number

FEEDS = ("quotes", "orders")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--landing", help="landing folder with quotes/ and orders/ (with --source files)")
    add_lake(parser)
    add_symbols(parser)
    parser.add_argument("--checkpoint", help="streaming checkpoint folder (default: LAKE/_checkpoints/stream)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--available-now", action="store_true", help="process every file present, then exit 0")
    mode.add_argument("--interval", type=float, help="seconds between micro-batches when running continuously (default 5)")
    parser.add_argument(
        "--max-files-per-batch", type=int, metavar="N",
        help="take at most N new files per feed in one micro-batch (default: all): bounds the size and "
             "memory of batches when catching up on a backlog",
    )
    parser.add_argument(
        "--archive", metavar="DIR",
        help="move each landing file here once its micro-batch is committed (Spark's cleanSource=archive), "
             "so the landing folder, and its listing at every trigger, stays small (default: leave files in place)",
    )
    parser.add_argument("--master", help="Spark master URL (default local[*])")
    parser.add_argument(
        "--progress-every", type=_at_least_one, default=1, metavar="N",
        help="print one summary line per N batches (and at least every minute while batches run) instead of "
             "one per batch (default 1); per-batch figures are in the batch_metrics table",
    )
    add_thresholds(parser)
    from market_spread.stream.kafka_source import add_arguments as add_kafka_arguments

    add_kafka_arguments(parser)


_at_least_one = whole_number(1)


class ProgressSummary:
    """on_batch for a long-running stream: one line per `every` batches, or sooner when `max_seconds`
    have passed since the first batch not yet reported (also when no batch follows: a timer), so a
    supervisor's log stays bounded yet sees every batch within a minute (its stall check needs it).

    The line keeps the per-batch line's shape (`batch N: ... in S.SSs`, the newest batch's id and
    time) so the Airflow health check reads both.
    """

    def __init__(self, every: int, max_seconds: float = 60.0, out=None) -> None:
        self.every, self.max_seconds = every, max_seconds
        self.out = out or (lambda line: print(line, flush=True))
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._reset()

    def _reset(self) -> None:
        self.count, self.first, self.last, self.seconds = 0, None, None, 0.0
        self.totals = {"lines": 0, "quotes": 0, "orders": 0, "alerts": 0, "quarantined": 0}

    def __call__(self, result) -> None:
        with self._lock:
            self.count += 1
            self.first = result.batch_id if self.first is None else self.first
            self.last, self.seconds = result, float(getattr(result, "seconds", 0.0))
            self.totals["lines"] += int(getattr(result, "input_lines", 0))
            for key in ("quotes", "orders", "alerts", "quarantined"):
                self.totals[key] += int(getattr(result, key, 0))
            due = self.count >= self.every or self.max_seconds <= 0
            if not due and self._timer is None:
                self._timer = threading.Timer(self.max_seconds, self.flush)
                self._timer.daemon = True
                self._timer.start()
        if due:
            self.flush()

    def flush(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if not self.count:
                return
            t = self.totals
            line = (
                f"batch {self.last.batch_id}: {self.count} batches ({self.first}-{self.last.batch_id}): "
                f"{t['lines']} lines, {t['quotes']} quotes, {t['orders']} orders, {t['alerts']} alerts, "
                f"{t['quarantined']} quarantined; last in {self.seconds:.2f}s"
            )
            self._reset()
        self.out(line)


class LakeBusy(Exception):
    pass


@dataclass
class WriterLock:
    """One writer per lake: an exclusive flock on LAKE/_stream.lock.

    The kernel drops the lock when the holder dies, even by SIGKILL. The Spark JVM outlives its
    Python driver by a moment (it exits when its stdin closes), so the lock file also names the JVM's
    pid and a new writer waits for that JVM to be gone before it writes.

    Each process is recorded as host, pid and start time (psutil's create_time): after a reboot or a
    container restart a recorded pid may belong to an unrelated process, which must not block the
    lake. A record of another host is stale here: we hold the flock, so its driver is gone, and its
    JVM exits with its driver (on a host whose pids we cannot check anyway).
    """

    path: Path
    handle: IO[str] | None = None

    def acquire(self, wait_for_jvm_s: float = 60.0) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise LakeBusy(f"another stream is already writing this lake ({holder})") from None
        handle.seek(0)
        previous = _read_json(handle.read())
        jvm = previous.get("jvm_pid")

        def jvm_alive() -> bool:
            if not jvm or previous.get("host", this_host()) != this_host():
                return False
            return record_alive(previous, "jvm_pid", "jvm_started")

        deadline = time.monotonic() + wait_for_jvm_s
        while jvm_alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        if jvm_alive():
            handle.close()
            raise LakeBusy(f"the Spark JVM (pid {jvm}) of a previous stream on this lake is still running")
        self.handle = handle
        self.record()

    def record(self, **extra: object) -> None:
        assert self.handle is not None
        info = {"pid": os.getpid(), "pid_started": process_start_time(), "host": this_host(),
                "since": datetime.now(timezone.utc).isoformat(), **extra}
        if isinstance(extra.get("jvm_pid"), int):
            info["jvm_started"] = process_start_time(int(extra["jvm_pid"]))
        self.handle.seek(0)
        self.handle.truncate()
        self.handle.write(json.dumps(info))
        self.handle.flush()

    def release(self) -> None:
        if self.handle is not None:
            self.handle.seek(0)
            self.handle.truncate()
            self.handle.close()
            self.handle = None


def _read_json(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}




def checkpoint_has_progress(checkpoint: Path) -> bool:
    return any((checkpoint / "offsets").glob("[0-9]*")) if (checkpoint / "offsets").is_dir() else False


def lake_has_batches(lake: Path) -> bool:
    """True once any batch has been committed to the lake: a product table past version 0 (its
    CREATE). From the log listing, not from `00000000000000000001.json`, which Delta's log
    clean-up deletes once a checkpoint covers it."""
    from market_spread.lake.deltalog import latest_version

    return any((latest_version(lake / name) or 0) > 0 for name in lake_mod.TABLES)


def run(args: argparse.Namespace) -> int:
    from market_spread.cli.main import UsageError

    from market_spread.stream.kafka_source import checkpoint_source_error, settings_from_args

    kafka = settings_from_args(args)
    if kafka is None and not args.landing:
        raise UsageError("--landing is required (or --source kafka with --bootstrap-servers)")
    landing, lake = Path(args.landing or "."), Path(args.lake)
    if kafka is None and landing.exists() and not landing.is_dir():
        raise UsageError(f"--landing is not a folder: {landing}")
    if args.interval is not None and args.interval <= 0:
        raise UsageError("--interval must be > 0 seconds")
    if args.max_files_per_batch is not None and args.max_files_per_batch < 1:
        raise UsageError("--max-files-per-batch must be at least 1")
    symbols = load_symbols(args.symbols)
    checkpoint = Path(args.checkpoint) if args.checkpoint else lake / lake_mod.CHECKPOINT_SUBDIR
    lake.mkdir(parents=True, exist_ok=True)  # for the lock file; start_query creates the feed folders

    lock = WriterLock(lake / LOCK_FILE)
    try:
        lock.acquire()
    except LakeBusy as exc:
        print(f"market-spread stream: error: {exc}; lake {lake}", file=sys.stderr)
        return EXIT_LAKE_BUSY
    try:
        if lake_has_batches(lake) and not checkpoint_has_progress(checkpoint):
            print(
                f"market-spread stream: error: the lake {lake} already holds processed batches but the "
                f"checkpoint {checkpoint} is missing or empty; starting over would emit every alert again. "
                "Restore the checkpoint, or move the lake aside to start afresh.",
                file=sys.stderr,
            )
            return EXIT_REFUSED
        mismatch = checkpoint_source_error(checkpoint, args.source)
        if mismatch:
            print(f"market-spread stream: error: {mismatch}", file=sys.stderr)
            return EXIT_REFUSED
        if kafka is not None:
            from market_spread.stream.kafka_source import check_kafka

            problem = check_kafka(kafka)
            if problem:
                print(f"market-spread stream: error: {problem}", file=sys.stderr)
                return 1
        return _run_stream(args, landing, lake, checkpoint, symbols, lock, kafka)
    finally:
        lock.release()


def _run_stream(args, landing: Path, lake: Path, checkpoint: Path, symbols: list[str], lock: WriterLock,
                kafka=None) -> int:
    from market_spread.runtime.spark import build_session

    source = extra_conf = None
    if kafka is not None:
        from market_spread.stream.kafka_source import feed_source, session_conf

        source, extra_conf = feed_source(kafka), session_conf()
    spark = build_session("market-spread-stream", master=args.master, extra_conf=extra_conf)
    lock.record(jvm_pid=spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    summary = ProgressSummary(args.progress_every) if args.progress_every > 1 else None
    try:
        return run_query(
            spark, landing, lake, checkpoint, symbols, args.max_spread, args.max_spread_ratio,
            available_now=args.available_now, interval=args.interval or 5.0, handle_signals=True,
            max_files_per_batch=args.max_files_per_batch, on_batch=summary,
            archive=Path(args.archive) if args.archive else None, source=source,
        )
    finally:
        if summary is not None:
            summary.flush()  # the batches since the last line
        spark.stop()


def start_query(spark, landing: Path, lake: Path, checkpoint: Path, symbols: list[str], max_spread, max_spread_ratio,
                available_now: bool, interval: float, on_batch=None, max_files_per_batch: int | None = None,
                archive: Path | None = None, source=None):
    """Start the streaming query; returns (query, busy flag). No lock: callers hold the lake's lock.

    `source`, when given, is a callable spark -> streaming DataFrame of (stream, value, source_file)
    replacing the landing folder (kafka_source.feed_source).
    """
    from pyspark.sql import functions as F

    from market_spread.stream.batch import BatchProcessor

    for name in FEEDS if source is None else ():
        (landing / name).mkdir(parents=True, exist_ok=True)
    lake_mod.ensure_tables(spark, lake)

    def feed(name: str):
        reader = spark.readStream.format("text").option("pathGlobFilter", "*.jsonl")  # files land renamed in
        if max_files_per_batch:
            reader = reader.option("maxFilesPerTrigger", max_files_per_batch)
        if archive is not None:
            # Spark moves a file only after the batch that read it is committed: a replay still finds it.
            reader = reader.option("cleanSource", "archive").option("sourceArchiveDir", str(archive.absolute() / name))
        return (
            reader
            .load(str(landing / name))
            .select(F.lit(name).alias("stream"), F.col("value"), F.col("_metadata.file_path").alias("source_file"))
        )

    busy = threading.Event()

    def print_progress(result) -> None:
        print(result.progress_line(), flush=True)

    processor = BatchProcessor(str(lake), symbols, max_spread, max_spread_ratio, on_batch or print_progress)

    def guarded(batch_df, batch_id):
        busy.set()
        try:
            processor(batch_df, batch_id)
        finally:
            busy.clear()

    feeds = feed("quotes").unionByName(feed("orders")) if source is None else source(spark)
    writer = feeds.writeStream.foreachBatch(guarded)
    writer = writer.option("checkpointLocation", str(checkpoint))
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=f"{interval} seconds")
    return writer.start(), busy


def run_query(spark, landing: Path, lake: Path, checkpoint: Path, symbols: list[str], max_spread, max_spread_ratio,
              available_now: bool = True, interval: float = 5.0, handle_signals: bool = False, on_batch=None,
              max_files_per_batch: int | None = None, archive: Path | None = None, source=None) -> int:
    """Run the stream until it is done (available-now) or asked to stop; returns the exit code."""
    stop_requested = threading.Event()

    def request_stop(signum, _frame):
        if not stop_requested.is_set():
            print(f"market-spread stream: {signal.Signals(signum).name}: stopping after the batch in flight", flush=True)
        stop_requested.set()

    previous = {s: signal.signal(s, request_stop) for s in (signal.SIGINT, signal.SIGTERM)} if handle_signals else {}
    mode = "available-now" if available_now else f"every {interval}s"
    print(f"market-spread stream: {getattr(source, 'label', landing)} -> {lake} ({mode}, checkpoint {checkpoint})", flush=True)
    from pyspark.errors import StreamingQueryException

    query, busy = start_query(spark, landing, lake, checkpoint, symbols, max_spread, max_spread_ratio,
                              available_now, interval, on_batch, max_files_per_batch, archive, source=source)
    try:
        return _supervise(query, busy, stop_requested)
    except StreamingQueryException as exc:
        print(f"market-spread stream: error: {failure_line(exc)}", file=sys.stderr, flush=True)
        return 1
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _supervise(query, busy: threading.Event, stop_requested: threading.Event) -> int:
    while query.isActive:
        if stop_requested.is_set():
            # Stop between batches; were it to land inside one, the replay on restart is exact.
            deadline = time.monotonic() + 600
            while busy.is_set() and time.monotonic() < deadline:
                time.sleep(0.1)
            query.stop()
            break
        query.awaitTermination(0.5)
    error = query.exception()
    if error is not None:
        print(f"market-spread stream: error: {failure_line(error)}", file=sys.stderr, flush=True)
        return 1
    print("market-spread stream: stopped", flush=True)
    return 0


def failure_line(error: BaseException) -> str:
    """One line for a failed query: Spark's first line, or the cause itself when it is a full disk
    (buried under the stack traces otherwise)."""
    text = str(error).strip()
    first = text.splitlines()[0] if text else repr(error)
    if "No space left on device" in text:
        return ("no space left on device while writing the lake or its checkpoint; free some space and start "
                "the stream again: the interrupted batch is replayed, nothing is lost or doubled")
    return f"the query failed: {first}"

"""`market-spread stream`: the continuous job over both feeds (contract sections 2 and 5)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from market_spread.cli.options import load_symbols
from market_spread.lake import tables as lake_mod
from market_spread.runtime.stream_contract import EXIT_LAKE_BUSY, EXIT_REFUSED
from market_spread.lake.lock import LOCK_FILE, LakeBusy, WriterLock
from market_spread.stream.progress import ProgressSummary


def checkpoint_has_progress(checkpoint: Path) -> bool:
    from market_spread.stream.checkpoint_files import offset_files

    return bool(offset_files(checkpoint))


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
    if args.archive:
        from market_spread.stream.source_log import trim_interval

        try:
            trim_interval()
        except ValueError as exc:
            raise UsageError(str(exc)) from None
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
        mismatch = checkpoint_source_error(checkpoint, args.source)
        if mismatch:
            print(f"market-spread stream: error: {mismatch}", file=sys.stderr)
            return EXIT_REFUSED
        if kafka is None:
            from market_spread.stream.checkpoint_layout import CheckpointLayoutError, prepare

            try:  # before the check below: it also finishes a move a kill interrupted
                moved = prepare(checkpoint)
            except CheckpointLayoutError as exc:
                print(f"market-spread stream: error: {exc}", file=sys.stderr)
                return EXIT_REFUSED
            if moved:
                print(f"market-spread stream: {moved}", flush=True)
        if lake_has_batches(lake) and not checkpoint_has_progress(checkpoint):
            print(
                f"market-spread stream: error: the lake {lake} already holds processed batches but the "
                f"checkpoint {checkpoint} is missing or empty; starting over would emit every alert again. "
                "Restore the checkpoint, or move the lake aside to start afresh.",
                file=sys.stderr,
            )
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
    from market_spread.domain.rules import Thresholds
    from market_spread.runtime.spark import FULL_JIT_BACKLOG_BYTES, build_session
    from market_spread.stream.query import StreamSpec, landing_backlog_bytes, run_query

    source = extra_conf = None
    if kafka is not None:
        from market_spread.stream.kafka_source import feed_source, session_conf

        source, extra_conf = feed_source(kafka), session_conf()
    # A catch-up run over a big backlog is long-running too (FULL_JIT_BACKLOG_BYTES says why).
    long_running = not args.available_now or (
        kafka is None and landing_backlog_bytes(landing) >= FULL_JIT_BACKLOG_BYTES
    )
    spark = build_session("market-spread-stream", master=args.master, extra_conf=extra_conf, long_running=long_running)
    lock.record(jvm_pid=spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    summary = ProgressSummary(args.progress_every) if args.progress_every > 1 else None
    spec = StreamSpec(
        lake=lake, symbols=symbols, landing=landing, checkpoint=checkpoint, available_now=args.available_now, interval=args.interval or 5.0,
        max_files_per_batch=args.max_files_per_batch, archive=Path(args.archive) if args.archive else None,
        source=source, thresholds=Thresholds(args.max_spread, args.max_spread_ratio),
    )
    try:
        return run_query(spark, spec, on_batch=summary, handle_signals=True)
    finally:
        if summary is not None:
            summary.flush()  # the batches since the last line
        spark.stop()

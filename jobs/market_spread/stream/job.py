"""`market-spread stream`: the continuous job over both feeds (contract sections 2 and 5).

The command line builds the stream's StreamSpec (stream.spec) and calls run_stream(spec); its exit
codes are the stream contract's (runtime.stream_contract)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from market_spread.errors import UsageError
from market_spread.lake import tables as lake_mod
from market_spread.lake.deltalog import latest_version
from market_spread.lake.lock import LakeBusy, LeaseLock, WriterLock, writer_lock
from market_spread.observation.health_sampler import Observer, StreamPlace
from market_spread.observation.progress import ProgressSummary
from market_spread.runtime import settings, spark_jvm
from market_spread.runtime.checkpoint_files import offset_files
from market_spread.runtime.spark import FULL_JIT_BACKLOG_BYTES, build_session
from market_spread.runtime.storage import Location, S3Config, is_s3
from market_spread.runtime.stream_contract import EXIT_LAKE_BUSY, EXIT_REFUSED
from market_spread.sinks.alerts_topic import AlertsPublisher
from market_spread.sinks.topic_position import topic_exists
from market_spread.sources.kafka_source import check_kafka, checkpoint_source_error, session_conf
from market_spread.stream import catch_up
from market_spread.stream.checkpoint_layout import CheckpointLayoutError, prepare
from market_spread.stream.query import landing_backlog_bytes, run_query
from market_spread.stream.source_log import trim_interval
from market_spread.stream.spec import StreamSpec

PROG = "market-spread stream"


def checkpoint_has_progress(checkpoint: Location) -> bool:
    return bool(offset_files(checkpoint))


def lake_has_batches(lake: Location) -> bool:
    """True once any batch has been committed to the lake: a product table past version 0 (its
    CREATE). From each table's latest version (lake.deltalog), not from `00000000000000000001.json`,
    which Delta's log clean-up deletes once a checkpoint covers it."""
    return any((latest_version(lake / name) or 0) > 0 for name in lake_mod.TABLES)


def check_spec(spec: StreamSpec) -> None:
    """UsageError for options that cannot run, before anything is touched."""
    if spec.kafka is None and spec.landing is None:
        raise UsageError("--landing is required (or --source kafka with --bootstrap-servers)")
    landing = spec.landing  # set for a file stream (above)
    if spec.kafka is None and landing is not None and not is_s3(landing) and landing.exists() and not landing.is_dir():
        raise UsageError(f"--landing is not a folder: {spec.landing}")
    if spec.interval < 0:
        raise UsageError("--interval must be >= 0 seconds")
    if spec.max_files_per_batch is not None and spec.max_files_per_batch < 1:
        raise UsageError("--max-files-per-batch must be at least 1")
    if spec.archive and is_s3(spec.archive) != is_s3(spec.landing or ""):
        raise UsageError("--archive and --landing must both be local folders or both S3 prefixes")
    if spec.archive:
        try:
            trim_interval()
        except ValueError as exc:
            raise UsageError(str(exc)) from None


def run_stream(spec: StreamSpec) -> int:
    """Run the stream under the lake's writer lock; the exit code (0, 1, EXIT_LAKE_BUSY, EXIT_REFUSED).
    UsageError for options that cannot run."""
    check_spec(spec)
    lake = spec.lake
    checkpoint = spec.checkpoint_path
    lock = writer_lock(lake)  # start_query creates the feed folders
    try:
        lock.acquire()
    except LakeBusy as exc:
        print(f"{PROG}: error: {exc}; lake {lake}", file=sys.stderr)
        return EXIT_LAKE_BUSY
    try:
        refused = start_refusal(spec, checkpoint)
        if refused is not None:
            code, message = refused
            print(f"{PROG}: error: {message}", file=sys.stderr)
            return code
        return _run_stream(spec, checkpoint, lock)
    finally:
        lock.release()


def start_refusal(spec: StreamSpec, checkpoint: Location) -> tuple[int, str] | None:
    """(exit code, reason) when the stream must not start on this checkpoint and lake, else None.
    Prepares a file stream's checkpoint layout on the way (it may move the source log)."""
    mismatch = checkpoint_source_error(checkpoint, spec.source)
    if mismatch:
        return EXIT_REFUSED, mismatch
    if spec.kafka is None:
        try:  # before the check below: it also finishes a move a kill interrupted
            moved = prepare(checkpoint)
        except CheckpointLayoutError as exc:
            return EXIT_REFUSED, str(exc)
        if moved:
            print(f"{PROG}: {moved}", flush=True)
    # The checkpoint first: a restart with one (the usual start) opens no table's log here.
    if not checkpoint_has_progress(checkpoint) and lake_has_batches(spec.lake):
        return EXIT_REFUSED, (
            f"the lake {spec.lake} already holds processed batches but the "
            f"checkpoint {checkpoint} is missing or empty; starting over would emit every alert again. "
            "Restore the checkpoint, or move the lake aside to start afresh."
        )
    if spec.kafka is not None:
        problem = check_kafka(spec.kafka)
        if problem:
            return 1, problem
    return alerts_topic_refusal(spec)


# How long the start waits for the alerts topic's brokers before it goes on without them.
TOPIC_CHECK_SECONDS = 10.0


def alerts_topic_refusal(spec: StreamSpec) -> tuple[int, str] | None:
    """(2, reason) when the alerts topic does not exist: the stream never creates it (contract 4b).
    No broker answering is no reason to refuse: the tables go on, publishing waits for it."""
    target = spec.alerts_topic
    if target is None:
        return None
    exists = topic_exists(target.bootstrap_servers, target.topic, TOPIC_CHECK_SECONDS)
    if exists is False:
        return 2, (
            f"the alerts topic {target.topic} does not exist on {target.bootstrap_servers}; create it "
            "(the stream never does), or name another with --alerts-topic"
        )
    if exists is None:
        print(
            f"{PROG}: warning: no Kafka broker answered at {target.bootstrap_servers} within "
            f"{TOPIC_CHECK_SECONDS:.0f}s; the stream starts, and publishes its alerts to {target.topic} once one does",
            file=sys.stderr,
            flush=True,
        )
    return None


def _files_per_batch(spec: StreamSpec, landing: Location) -> int | None:
    """--max-files-per-batch, or for an --available-now run over a large backlog of file pairs that
    landed in turn, the pairs a batch that keep every answer (stream.catch_up)."""
    if spec.max_files_per_batch is not None or spec.kafka is not None or not spec.available_now:
        return spec.max_files_per_batch
    pairs = catch_up.files_per_batch(landing)
    if pairs is not None:
        print(f"{PROG}: a backlog of file pairs that landed in turn: {pairs} pair(s) a batch", flush=True)
    return pairs


def _run_stream(spec: StreamSpec, checkpoint: Location, lock: WriterLock | LeaseLock) -> int:
    extra_conf = None
    landing = spec.landing or Path(".")
    if spec.kafka is not None:
        try:
            extra_conf = session_conf()
        except UsageError as exc:  # the connector's JARs are missing: a set-up fault, exit 1 as before
            print(f"{PROG}: error: {exc}", file=sys.stderr)
            return 1
    # A catch-up run over a big backlog is long-running too (FULL_JIT_BACKLOG_BYTES says why).
    long_running = not spec.available_now or (
        spec.kafka is None and landing_backlog_bytes(landing) >= FULL_JIT_BACKLOG_BYTES
    )
    spark = build_session("market-spread-stream", master=spec.master, extra_conf=extra_conf, long_running=long_running)
    lock.record(jvm_pid=spark_jvm.driver_pid(spark))
    spark_jvm.bound_s3a_requests(spark, S3Config.from_env().s3a_try_seconds)  # before any S3A client
    summary = ProgressSummary(spec.progress_every) if spec.progress_every > 1 else None
    # Prometheus metrics and the health record the Stream page reads (observation.health_sampler).
    query = replace(
        spec,
        landing=landing,
        checkpoint=checkpoint,
        max_files_per_batch=_files_per_batch(spec, landing),
        before_commit=lock.check,
    )
    publisher = AlertsPublisher(spec.alerts_topic, spec.lake, spark) if spec.alerts_topic is not None else None
    observer = _observer(query, summary, publisher)  # its Stream page shows the publisher's lag
    try:
        return run_query(spark, query, on_batch=observer, handle_signals=True, publisher=publisher)
    finally:
        if summary is not None:
            summary.flush()  # the batches since the last line
        observer.close()
        spark.stop()


def _observer(
    spec: StreamSpec, inner: Callable[[Any], None] | None = None, publisher: AlertsPublisher | None = None
) -> Observer:
    """The stream's observer: its metrics endpoint where MARKET_SPREAD_METRICS_HOST/PORT say, and
    its health sampler for its lake, checkpoint and input."""
    kafka = spec.kafka
    place = StreamPlace(
        spec.lake,
        spec.checkpoint_path,
        spec.source,
        spec.input_label,
        landing=spec.landing if kafka is None else None,
        archive=spec.archive,
        bootstrap_servers=kafka.bootstrap_servers if kafka is not None else None,
        topics=(kafka.quotes_topic, kafka.orders_topic) if kafka is not None else (),
    )
    return Observer(
        place,
        inner,
        settings.value("MARKET_SPREAD_METRICS_HOST"),
        settings.value("MARKET_SPREAD_METRICS_PORT"),
        topic_status=publisher.status if publisher is not None else None,
    )

"""The streaming query: what it reads (a landing folder or a source such as Kafka), its trigger, the
foreachBatch processor, and how it is supervised and stopped between batches."""

from __future__ import annotations

import fnmatch
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, NamedTuple

from market_spread.errors import DISK_FULL, MarketSpreadError
from market_spread.lake import tables as lake_mod
from market_spread.runtime.storage import Location, S3Path, location
from market_spread.sinks.alerts_topic import AlertsPublisher
from market_spread.sources.kafka_source import read_feeds
from market_spread.stream.spec import StreamSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from market_spread.stream.batch import BatchProcessor
    from market_spread.stream.batch_run import BatchResult

FEEDS = ("quotes", "orders")
LANDED = "*.jsonl"  # the file source's glob: a file lands under another name and is renamed to this


def landing_backlog_bytes(landing: Location) -> int:
    """Bytes of the landing files the file source reads (LANDED in each feed's folder; Spark skips
    names starting with `.` or `_`). Files already processed count too unless they were archived:
    an estimate of a run's length (runtime.spark.FULL_JIT_BACKLOG_BYTES)."""
    if isinstance(landing, S3Path):
        return sum(
            info.size
            for feed in FEEDS
            for obj, info in (landing / feed).listing()
            if obj.parent == landing / feed and _read_by_source(obj.name)
        )
    total = 0
    for feed in FEEDS:
        try:
            with os.scandir(landing / feed) as entries:
                total += sum(e.stat().st_size for e in entries if _read_by_source(e.name) and e.is_file())
        except OSError:  # a missing folder: nothing to read there
            continue
    return total


def _read_by_source(name: str) -> bool:
    return fnmatch.fnmatchcase(name, LANDED) and not name.startswith((".", "_"))


class Started(NamedTuple):
    """A started query, the flag set while a batch runs, and the batch processor (its lake's tables)."""

    query: StreamingQuery
    busy: threading.Event
    processor: BatchProcessor


def start_query(
    spark: SparkSession, spec: StreamSpec, on_batch: Callable | None = None, publisher: AlertsPublisher | None = None
) -> Started:
    """Start the streaming query. No lock: callers hold the lake's lock.

    `on_batch` gets each batch's BatchResult (default: print its progress line); the alerts topic's
    `publisher`, when the stream has one, is told of each batch first."""
    archiving = _prepare(spark, spec)
    busy = threading.Event()
    if publisher is not None:
        publisher.start()  # after _prepare: the alerts table exists
        on_batch = publisher.before(on_batch or _print_progress)
    guarded, processor = _guarded_processor(spec, on_batch, busy, archiving)
    processor.resume(spark)  # a restart's staged state, committed even if no input comes
    feeds = _landing_feeds(spark, spec, archiving) if spec.kafka is None else read_feeds(spark, spec.kafka)
    writer = feeds.writeStream.foreachBatch(guarded)
    writer = writer.option("checkpointLocation", str(spec.checkpoint_path))
    writer = (
        writer.trigger(availableNow=True)
        if spec.available_now
        else writer.trigger(processingTime=f"{spec.interval} seconds")
    )
    from market_spread.runtime.spark import session_settings

    use_checkpoint_writer(spark, spec.checkpoint_path)
    with session_settings(spark, trigger_conf(spec)):  # read when the query starts
        return Started(writer.start(), busy, processor)


@contextmanager
def started(
    spark: SparkSession, spec: StreamSpec, on_batch: Callable | None = None, publisher: AlertsPublisher | None = None
) -> Iterator[Started]:
    """`start_query` for a caller that supervises the query itself (the bench, tests): when the block
    ends, the processor is settled as `run_query` settles it, so that nothing of the stream outlives
    it (its upkeep, its reader's threads; a Kafka consumer left open kept fetching from the broker).
    With `spec.alerts_topic`, the alerts topic's publisher (`publisher`, else one of its own) runs
    beside the query, and publishes what waits before the block ends (sinks.alerts_topic)."""
    if publisher is None and spec.alerts_topic is not None:
        publisher = AlertsPublisher(spec.alerts_topic, spec.lake, spark)
    try:
        run = start_query(spark, spec, on_batch, publisher)
        try:
            yield run
        finally:
            run.processor.settle()
    finally:
        if publisher is not None:
            publisher.finish()


# Spark's setting naming how the checkpoint's logs (offsets, commits, the file sources' logs) are written.
CHECKPOINT_WRITER = "spark.sql.streaming.checkpointFileManagerClass"
LOCAL_CHECKPOINT_WRITER = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"


def use_checkpoint_writer(spark: SparkSession, checkpoint: Location) -> None:
    """On a local disk, the checkpoint's log files are written through Hadoop's FileSystem instead of
    Spark's default FileContext: without Hadoop's native library the FileContext's rename starts a
    `readlink` process for each file, four files a batch (measured: docs/performance.md, row 'the
    checkpoint's files on a local disk written through Hadoop's FileSystem'). Both write a temporary file and rename it;
    the FileContext's rename alone refuses an existing target atomically, which matters only with
    two writers of one checkpoint, which the lake's lock rules out. Left to Spark elsewhere (S3).
    Set for the session, not around the start: the query's thread opens the sources' logs after it."""
    if isinstance(location(checkpoint), S3Path):
        spark.conf.unset(CHECKPOINT_WRITER)
    else:
        spark.conf.set(CHECKPOINT_WRITER, LOCAL_CHECKPOINT_WRITER)


# Spark's own setting (internal, 10 ms by default): how long the engine sleeps after finding no
# new input before it looks again.
POLLING_DELAY = "spark.sql.streaming.pollingDelay"


def trigger_conf(spec: StreamSpec) -> dict[str, str]:
    """With `interval` 0 (the default) a batch starts as soon as the one before has ended and input
    waits: a landed file waits for the batch in flight, not for a clock (a 5 s interval made it wait
    half of one on average before its batch even began). Idle, the engine looks for input every
    MARKET_SPREAD_POLL_SECONDS (0.25 s) instead of Spark's default (POLLING_DELAY), which listed both
    landing folders (or asked the broker) a hundred times a second: a longer look costs the idle
    stream less CPU and the latency nothing (measured: docs/performance.md, row 'the stream's
    trigger')."""
    from market_spread.runtime import settings

    if spec.available_now or spec.interval > 0:
        return {}
    return {POLLING_DELAY: f"{max(1, round(settings.value('MARKET_SPREAD_POLL_SECONDS') * 1000))}ms"}


def trigger_label(spec: StreamSpec) -> str:
    """How the stream triggers, for its first line."""
    from market_spread.runtime import settings

    if spec.available_now:
        return "available-now"
    if spec.interval > 0:
        return f"every {spec.interval:g}s"
    return f"continuous, looking for input every {settings.value('MARKET_SPREAD_POLL_SECONDS'):g}s when idle"


def _prepare(spark: SparkSession, spec: StreamSpec) -> bool:
    from market_spread.runtime.checkpoint_files import repair_torn_tail

    """The landing folders, the tables and the checkpoint's layout, ready before the query starts.
    Returns whether landing files are archived once read."""
    from market_spread.stream import checkpoint_layout

    landing, files = spec.landing, spec.kafka is None
    for name in FEEDS if files else ():
        assert landing is not None  # a file stream reads a landing folder (stream.job.check_spec)
        (landing / name).mkdir(parents=True, exist_ok=True)
    lake_mod.ensure_tables(spark, spec.lake)
    for dropped in repair_torn_tail(spec.checkpoint_path):
        print(f"market-spread stream: {dropped} was left empty or cut short (a power loss?): dropped", flush=True)
    if files:
        moved = checkpoint_layout.prepare(spec.checkpoint_path)
        if moved:
            print(f"market-spread stream: {moved}", flush=True)
    archiving = files and spec.archive is not None
    if archiving:
        trim_archived_entries(spec.checkpoint_path)
    return archiving


def _print_progress(result: BatchResult) -> None:
    print(result.progress_line(), flush=True)


def _guarded_processor(
    spec: StreamSpec, on_batch: Callable | None, busy: threading.Event, archiving: bool
) -> tuple[Callable[[DataFrame, int], None], BatchProcessor]:
    """The foreachBatch function: the batch processor, flagged busy while it runs (so a stop waits
    for it), trimming the source log every N batches when files are archived."""
    from market_spread.stream.batch import BatchProcessor
    from market_spread.stream.source_log import trim_interval

    processor = BatchProcessor(spec, on_batch or _print_progress, checkpoint=spec.checkpoint_path)
    trim_every = trim_interval() if archiving else 0

    def guarded(batch_df: DataFrame, batch_id: int) -> None:
        busy.set()
        try:
            processor(batch_df, batch_id)
            if trim_every and batch_id > 0 and batch_id % trim_every == 0:
                trim_archived_entries(spec.checkpoint_path)
        except MarketSpreadError as exc:  # said in one line here: Spark wraps it in pages of its own
            print(f"market-spread stream: error: batch {batch_id}: {exc}", file=sys.stderr, flush=True)
            processor.error_said.set()
            processor.exit_code = getattr(exc, "exit_code", 1)
            raise
        finally:
            busy.clear()

    return guarded, processor


def _landing_feeds(spark: SparkSession, spec: StreamSpec, archiving: bool) -> DataFrame:
    """Both feeds' landing folders as one stream of (stream, value, source_file)."""
    from market_spread.stream import checkpoint_layout

    # Orders first: Spark lists the sources in this order, and an order file must never enter a
    # batch ahead of a quote file that landed before it (stream.checkpoint_layout).
    first, second = checkpoint_layout.LISTING_ORDER
    return _feed(spark, spec, first, archiving).unionByName(_feed(spark, spec, second, archiving))


def _feed(spark: SparkSession, spec: StreamSpec, name: str, archiving: bool) -> DataFrame:
    """One feed's landing folder, read as text lines with the file each came from."""
    from pyspark.sql import functions as F

    reader = spark.readStream.format("text").option("pathGlobFilter", LANDED)
    if spec.max_files_per_batch:
        reader = reader.option("maxFilesPerTrigger", spec.max_files_per_batch)
    assert spec.landing is not None  # the landing feeds: a file stream (_landing_feeds)
    if archiving:
        assert spec.archive is not None  # archiving: an archive is given (_prepare)
        # Spark moves a file only after the batch that read it is committed: a replay still finds it.
        reader = reader.option("cleanSource", "archive").option("sourceArchiveDir", str(spec.archive.absolute() / name))
    return reader.load(str(spec.landing / name)).select(
        F.lit(name).alias("stream"), F.col("value"), F.col("_metadata.file_path").alias("source_file")
    )


def trim_archived_entries(checkpoint: Location) -> None:
    """Drop the file source log's entries of files already archived (stream.source_log), so that
    the log stays about as small as the landing folder; before the query and every N batches."""
    from market_spread.stream.source_log import trim_source_logs

    try:
        results = trim_source_logs(checkpoint)
    except OSError as exc:  # a log left as it was is only bigger: warn, never fail a batch for it
        print(f"market-spread stream: warning: could not trim the file source log: {exc}", file=sys.stderr, flush=True)
        return
    for r in results:
        print(
            f"market-spread stream: source log {r.folder.name}/{r.compact_file}: dropped {r.dropped:,} entries "
            f"of archived files, kept {r.kept:,}",
            flush=True,
        )


def run_query(
    spark: SparkSession,
    spec: StreamSpec,
    on_batch: Callable | None = None,
    handle_signals: bool = False,
    publisher: AlertsPublisher | None = None,
) -> int:
    """Run the stream until it is done (available-now) or asked to stop; returns the exit code.
    `publisher`: the alerts topic's, when the caller made it (else `started` makes it)."""
    stop_requested = threading.Event()

    def request_stop(signum, _frame):
        if not stop_requested.is_set():
            print(
                f"market-spread stream: {signal.Signals(signum).name}: stopping after the batch in flight", flush=True
            )
        stop_requested.set()

    previous = {s: signal.signal(s, request_stop) for s in (signal.SIGINT, signal.SIGTERM)} if handle_signals else {}
    mode = trigger_label(spec)
    print(
        f"market-spread stream: {spec.input_label} -> {spec.lake} ({mode}, checkpoint {spec.checkpoint_path})",
        flush=True,
    )
    from pyspark.errors import StreamingQueryException

    try:
        # Settled when the block ends: the upkeep the last batches started (a checkpoint, a compaction)
        # ends before the signal handlers are given back.
        with started(spark, spec, on_batch, publisher) as run:
            try:
                code = supervise(run.query, run.busy, stop_requested, run.processor.error_said)
            except StreamingQueryException as exc:
                if not run.processor.error_said.is_set():
                    print(f"market-spread stream: error: {failure_line(exc)}", file=sys.stderr, flush=True)
                code = 1
            return run.processor.exit_code if code == 1 else code
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def supervise(
    query, busy: threading.Event, stop_requested: threading.Event, error_said: threading.Event | None = None
) -> int:
    """Wait for the query to end, or stop it between batches once `stop_requested` is set; a failure
    is said in one line unless the batch that failed said it already (`error_said`)."""
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
        if error_said is None or not error_said.is_set():
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
        return DISK_FULL
    return f"the query failed: {first}"

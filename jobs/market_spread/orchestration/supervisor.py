"""The stream supervisor: runs `market-spread stream` as a child process until asked to stop, and
fails loudly when it dies, stalls or finds the lake held by another writer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from market_spread.errors import MarketSpreadError
from market_spread.orchestration.jobs import Job, Logger, child_env, cli_argv, show
from market_spread.orchestration.probes import StreamHealth, read_stream_lock
from market_spread.orchestration.settings import VAR_PREFIX, Settings
from market_spread.runtime.backlog import KafkaProbe, Waiting, kafka_waiting
from market_spread.runtime.stream_contract import CHECKPOINT_SUBDIR, EXIT_LAKE_BUSY

# The name this module's default logger has always had (it lived in tasks.py).
log = logging.getLogger("market_spread.orchestration.tasks")


class StreamFailed(MarketSpreadError):
    """The stream died, stalled or could not start: the task must fail visibly."""


@dataclass
class StreamOutcome:
    """How a supervised stream ended without failing, and how far it got."""

    reason: str
    batches: int
    last_batch_id: int | None


def source_args(settings: Settings, producer: bool = False) -> list[str]:
    """Where the stream reads (and the feed writes): the landing folder, or Kafka topics."""
    if settings.source != "kafka":
        return ["--landing", str(settings.landing)]
    if not settings.bootstrap_servers:
        raise ValueError(f"{VAR_PREFIX}source is kafka but {VAR_PREFIX}bootstrap_servers is not set")
    args = (
        ["--kafka", settings.bootstrap_servers]
        if producer
        else ["--source", "kafka", "--bootstrap-servers", settings.bootstrap_servers]
    )
    for flag, value in (("--quotes-topic", settings.quotes_topic), ("--orders-topic", settings.orders_topic)):
        if value:
            args += [flag, value]
    return args


def stream_argv(settings: Settings) -> list[str]:
    """The `market-spread stream` command line these settings describe."""
    args = [
        *source_args(settings),
        "--lake",
        str(settings.lake),
        "--interval",
        f"{settings.interval:g}",
        "--progress-every",
        str(settings.progress_every),
    ]
    for flag, value in (
        ("--symbols", settings.symbols),
        ("--master", settings.master),
        ("--max-spread", settings.max_spread),
        ("--max-spread-ratio", settings.max_spread_ratio),
        ("--alerts-topic", settings.alerts_topic),
    ):
        if value:
            args += [flag, value]
    if settings.alerts_topic and settings.source != "kafka" and settings.bootstrap_servers:
        args += ["--bootstrap-servers", settings.bootstrap_servers]  # the brokers it publishes to
    return cli_argv("stream", *args)


def supervise_stream(
    settings: Settings,
    should_stop: Callable[[], str | None],
    logger: Logger = log.info,
    stop_check_every: float = 10.0,
    health_check_every: float = 5.0,
    argv: list[str] | None = None,
) -> StreamOutcome:
    """Run `market-spread stream` until asked to stop, and watch it.

    Returns when the stream was stopped on request (`should_stop()` gave a reason: it gets SIGTERM
    and finishes its batch in flight) or stopped by a signal from outside (exit 0). Raises
    StreamFailed when it exits with an error, the lake is held by another writer, or the health
    check finds it stalled (the stalled process is stopped first, so a restart can take the lake).
    """
    reason = should_stop()
    if reason:
        return StreamOutcome(f"not started: {reason}", 0, None)
    settings.lake.mkdir(parents=True, exist_ok=True)
    probe = (
        KafkaProbe(settings.bootstrap_servers) if settings.source == "kafka" and settings.bootstrap_servers else None
    )
    health = StreamHealth(
        settings.landing,
        settings.stall_seconds,
        settings.startup_seconds,
        waiting=None if probe is None else _kafka_waiting(settings, probe),
    )
    argv = argv or stream_argv(settings)
    job = Job(argv, child_env(settings, "stream"))
    logger(f"started stream pid {job.pid}: {show(argv)}")
    next_stop_check = time.monotonic() + stop_check_every
    next_health_check = time.monotonic() + health_check_every
    try:
        while True:
            for line in job.next_lines(1.0):
                logger(line)
                health.observe_line(line)
            rc = job.poll()
            if rc is not None:
                return _exited(job, rc, settings, health, logger)
            now = time.monotonic()
            if now >= next_stop_check:
                next_stop_check = now + stop_check_every
                reason = should_stop()
                if reason:
                    logger(
                        f"stopping the stream: {reason}; waiting up to {settings.stop_timeout:.0f}s for the batch in flight"
                    )
                    rc = job.stop(settings.stop_timeout, logger)
                    return StreamOutcome(f"stopped: {reason} (exit {rc})", health.batches, health.last_batch_id)
            if now >= next_health_check:
                next_health_check = now + health_check_every
                _check_health(job, health, settings, logger)
    finally:
        if job.poll() is None:
            # A signal or an error ended the supervision: take the stream down with us.
            job.stop(min(settings.stop_timeout, 30.0), logger)
        if probe is not None:
            probe.close()


def _kafka_waiting(settings: Settings, probe: KafkaProbe) -> Callable[[], Waiting]:
    """The records of the stream's topics past its checkpoint's committed offsets (its stall check)."""
    checkpoint = settings.lake / CHECKPOINT_SUBDIR
    topics = (settings.quotes_topic or "quotes", settings.orders_topic or "orders")
    return lambda: kafka_waiting(probe, checkpoint, topics)


def _exited(job: Job, rc: int, settings: Settings, health: StreamHealth, logger: Logger) -> StreamOutcome:
    """The stream's last lines logged, then how it ended: stopped from outside (exit 0), or failed."""
    for line in job.finish_output():
        logger(line)
        health.observe_line(line)
    if rc == 0:
        return StreamOutcome("stopped by a signal from outside", health.batches, health.last_batch_id)
    if rc == EXIT_LAKE_BUSY:
        holder = read_stream_lock(settings.lake)
        raise StreamFailed(f"another writer holds the lake {settings.lake}: {holder or 'unknown'}")
    raise StreamFailed(
        f"the stream exited with code {rc} after {health.batches} batches"
        + (f" (last batch {health.last_batch_id})" if health.last_batch_id is not None else "")
    )


def _check_health(job: Job, health: StreamHealth, settings: Settings, logger: Logger) -> None:
    """Fail on a stalled stream, stopped first so that a restart can take the lake."""
    stalled = health.check()
    if stalled:
        logger(f"health check failed: {stalled}; stopping the stalled stream")
        job.stop(min(settings.stop_timeout, 60.0), logger)
        raise StreamFailed(f"stream stalled: {stalled}")

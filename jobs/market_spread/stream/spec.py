"""A stream's one spec (StreamSpec): built by the `stream` command (or a test, or a bench tool) and
read by the job, the query and every batch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from market_spread.domain.rules import DEFAULT_THRESHOLDS, Thresholds
from market_spread.lake import tables as lake_mod
from market_spread.runtime import settings
from market_spread.runtime.storage import Location, location
from market_spread.sinks.topic_settings import AlertsTopic
from market_spread.sources.kafka_source import KafkaSettings

if TYPE_CHECKING:
    pass


@dataclass(frozen=True)
class BatchKnobs:
    """The settings that shape a stream's batches, read from the environment once, when the stream's
    spec is built (runtime/settings.py documents each): not per batch, not at import."""

    # Batches of fewer lines take the driver under `--placement auto` (None: by the cluster's cores).
    driver_batch_lines: int | None
    state_mirror_rows: int  # the driver keeps symbol_state up to this many symbols
    state_trail_batches: int  # symbol_state committed once this many batches are staged (lake.state_writes)
    kafka_on_driver: bool  # a Kafka batch's records read by the driver's own consumer

    @staticmethod
    def from_settings() -> "BatchKnobs":
        return BatchKnobs(
            driver_batch_lines=settings.value("MARKET_SPREAD_DRIVER_BATCH_LINES"),
            state_mirror_rows=settings.value("MARKET_SPREAD_STATE_MIRROR_ROWS"),
            state_trail_batches=settings.value("MARKET_SPREAD_STATE_TRAIL_BATCHES"),
            kafka_on_driver=settings.value("MARKET_SPREAD_KAFKA_ON_DRIVER"),
        )


@dataclass(frozen=True)
class StreamSpec:
    """One stream, from the command's options to every batch: its input (a landing folder or Kafka
    topics), its lake and checkpoint, the symbol universe and reject thresholds, the trigger, the
    Spark master. Built once by the command; stream.job only fills in what it resolves (the
    checkpoint's default, the batch size of a catch-up run, the lock's guard) with `replace`."""

    lake: Location
    symbols: list[str]  # the universe (domain.symbols.load_symbols)
    landing: Location | None = None  # the landing folder (quotes/, orders/), unless `kafka` is given
    checkpoint: Location | None = None  # default: LAKE/_checkpoints/stream
    thresholds: Thresholds = DEFAULT_THRESHOLDS
    available_now: bool = False  # process what is there, then stop; else run continuously
    # Seconds between the starts of two batches; 0: a batch as soon as input waits (trigger_conf).
    interval: float = 0.0
    max_files_per_batch: int | None = None
    archive: Location | None = None  # move landing files here once their batch is committed
    kafka: KafkaSettings | None = None  # read these Kafka topics instead of the landing folder
    master: str | None = None  # Spark master URL (default: local)
    progress_every: int = 1  # one summary line per N batches
    # Where a batch's kernel runs: the driver process, Spark's tasks, or chosen per batch (stream.placement).
    placement: str = "auto"
    alerts_topic: AlertsTopic | None = None  # also publish every alert to this Kafka topic (sinks.alerts_topic)
    knobs: BatchKnobs = field(default_factory=BatchKnobs.from_settings)  # resolved once, here
    # Called right before each commit try: raises when this stream may no longer write the lake
    # (its lease on object storage lost: lake.lock); returns the lease's proof, which the commit
    # asks again once the try has ended (runtime.lease.prove).
    before_commit: Callable[[], object] | None = None

    @property
    def checkpoint_path(self) -> Location:
        return self.checkpoint if self.checkpoint is not None else location(self.lake) / lake_mod.CHECKPOINT_SUBDIR

    @property
    def source(self) -> str:
        return "files" if self.kafka is None else "kafka"

    @property
    def input_label(self) -> str:
        return str(self.landing) if self.kafka is None else self.kafka.label

    @cached_property
    def universe(self) -> frozenset[str]:
        return frozenset(self.symbols)

    def guard(self) -> object:
        """Raise when the stream may no longer commit (before_commit); else its proof, if any."""
        return self.before_commit() if self.before_commit is not None else None

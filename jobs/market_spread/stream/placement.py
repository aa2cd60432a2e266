"""Where a batch's kernel runs (`stream --placement`): in the driver process (stream.driver_batch),
inside Spark's tasks (stream.executors), or chosen per batch (`auto`: the driver, unless the batch
is large and the cluster's executors have more cores than the driver's machine). The results are
the same; only where the work is done differs.

A batch of a table with a user's CHECK constraints runs in the driver process whatever the placement:
its quotes are screened before any order is checked (stream.constrained). Where each batch ran is in
its metrics (`placement`)."""

from __future__ import annotations

from pyspark.sql import DataFrame

from market_spread.lake.compaction import Compactor
from market_spread.stream import driver_batch
from market_spread.stream.batch_run import BatchRun
from market_spread.stream.constrained import Rules
from market_spread.stream.executors import executors_steps


def run(
    batch: BatchRun, batch_df: DataFrame, compactor: Compactor | None, lines_before: int | None, rules: Rules
) -> None:
    """Run the batch on its placement and commit it; where it ran in `batch.result.placement`.
    `rules`: the checked tables' CHECK constraints (stream.constrained)."""
    result, placement = batch.result, batch.settings.placement
    if rules:
        result.placement = "driver: CHECK constraints"
        driver_batch.driver_steps(batch, batch_df, compactor, rules)
    elif placement == "executors" or (placement == "auto" and _large_on_a_cluster(batch, batch_df, lines_before)):
        result.placement = "executors" if placement == "executors" else "executors: large batch on a cluster"
        executors_steps(batch, batch_df, compactor)
    else:
        result.placement = "driver"
        driver_batch.driver_steps(batch, batch_df, compactor, rules)


def _large_on_a_cluster(batch: BatchRun, batch_df: DataFrame, lines_before: int | None) -> bool:
    """A batch too large for the driver, on a cluster whose executors outnumber the driver's cores."""
    if not driver_batch.executors_outnumber_driver(batch.spark):
        return False
    kafka = batch.reader is not None and batch.reader.kafka is not None
    return not driver_batch.likely_small(batch_df, batch.settings.knobs, lines_before, kafka)

"""Where a batch's kernel runs (`stream --placement`): in the driver process (stream.driver_batch),
inside Spark's tasks (stream.executors), or chosen per batch (`auto`: the driver, unless the batch
is large and the cluster's executors have more cores than the driver's machine). The results are
the same; only where the work is done differs.

What still takes Spark's SQL plan (stream.batch), whatever the placement: a batch of a table with a
user's CHECK constraints (Spark evaluates them: stream.constrained), and a driver batch the kernel
declines (a line that is not UTF-8, or more than kernel.steps.ROWS_MAX_LINES lines outside the
product's own layout). The reason is in the batch's metrics (`placement`)."""

from __future__ import annotations

from pyspark.sql import DataFrame

from market_spread.lake import delta_rs
from market_spread.lake.compaction import Compactor
from market_spread.stream import driver_batch
from market_spread.stream.batch_run import BatchRun
from market_spread.stream.executors import executors_steps


def placed(
    batch: BatchRun, batch_df: DataFrame, compactor: Compactor | None, lines_before: int | None, constrained: bool
) -> bool:
    """Run the batch on its placement; False, having committed nothing, where Spark's SQL plan takes
    it (its reason then in `batch.result.placement`). `constrained`: a checked table has CHECK
    constraints."""
    result, placement = batch.result, batch.settings.placement
    if constrained:
        result.placement = "spark plan: CHECK constraints"
        return False
    if not delta_rs.enabled() or not batch.state.ready():
        result.placement = "spark plan: driver commits off"
        return False
    kafka = batch.reader is not None and batch.reader.kafka is not None
    if placement == "executors" or (
        placement == "auto" and not driver_batch.likely_small(batch_df, batch.settings.knobs, lines_before, kafka)
    ):
        if placement == "auto" and not driver_batch.executors_outnumber_driver(batch.spark):
            result.placement = "spark plan: large batch"
            return False
        result.placement = "executors" if placement == "executors" else "executors: large batch on a cluster"
        executors_steps(batch, batch_df, compactor)
        return True
    result.placement = "driver"
    if driver_batch.driver_steps(batch, batch_df, compactor, any_size=placement == "driver"):
        return True
    result.placement = "spark plan: lines the driver's kernel declines"
    return False

"""Writing a micro-batch's tables: appends, one-row literal tables, concurrent writes, commit tags."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from market_spread.lake import tables as lake_mod
from market_spread.runtime import settings
from market_spread.runtime.lease import prove

if TYPE_CHECKING:
    from market_spread.lake.commits import BatchMark

# The session setting whose value Delta stores as each commit's userMetadata (lake.batch_tag).
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


def ms_since(start: float) -> int:
    """Milliseconds since a `time.perf_counter()` reading (the phases of batch_metrics)."""
    return int((time.perf_counter() - start) * 1000)


def literal_row(spark: SparkSession, table: str, values: dict[str, Any]) -> DataFrame:
    """A one-row DataFrame of `table`'s columns from their values by name, as literals. Unlike
    createDataFrame of Python rows, it needs no Python worker on the executors: they stay JVM-only."""
    columns = lake_mod.DECLARED[table].columns()
    return spark.range(1).select(*[F.lit(values[n]).cast(t).alias(n) for n, t in columns])


def append(
    df: DataFrame, path: str, mark: "BatchMark | None" = None, guard: Callable[[], object] | None = None
) -> None:
    """Append through Spark; with `mark`, the commit carries the batch's txn and tag, and Delta skips
    it when the table already holds that batch of the stream. `guard` (the lease's check) runs right
    before it and its proof is asked again after it (runtime.lease: LeaseLost if it outlived the lease)."""
    proof = prove(guard)
    writer = df.write.format("delta").mode("append")
    if mark is not None:
        from market_spread.lake.tables import batch_tag

        writer = writer.options(**mark.spark_options()).option("userMetadata", batch_tag(mark.batch_id))
    writer.save(path)
    proof.still_held()


# The phase (batch_metrics, bench) each concurrent task's time is recorded under; tables not named here are appends.
_PHASES = {"symbol_state": "merge", "state_mirror": "state_mirror"}


def run_all(writes: Mapping[str, Callable[[], object]], phases_ms: dict[str, int], pool: Executor) -> None:
    """Run the writes concurrently on `pool` (kept by the stream: starting threads for each batch
    cost the batch more than its smaller writes); re-raise the first failure after all have finished."""
    if not writes:
        return

    def timed(name: str) -> None:
        start = time.perf_counter()
        writes[name]()
        # Each write's own time (they overlap: "write" is the wall time of all of them).
        phases_ms[_PHASES.get(name, f"append_{name}")] = ms_since(start)

    futures = [pool.submit(timed, name) for name in writes]
    wait(futures)
    for future in futures:
        future.result()


def write_pool() -> ThreadPoolExecutor:
    """The threads a stream's batches run their table writes on (MARKET_SPREAD_WRITE_THREADS)."""
    workers = max(1, settings.value("MARKET_SPREAD_WRITE_THREADS"))
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="delta-write")

"""Writing a micro-batch's tables: concurrent writes, their phases, commit tags."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor, wait

from market_spread.runtime import settings

# The session setting whose value Delta stores as each commit's userMetadata (lake.batch_tag).
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


def ms_since(start: float) -> int:
    """Milliseconds since a `time.perf_counter()` reading (the phases of batch_metrics)."""
    return int((time.perf_counter() - start) * 1000)


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

"""Daily compaction and vacuum of the lake (`market-spread maintain`, vacuum retention 7 days by
default: Variable `market_spread_retain_hours`).

Two JVMs committing to one Delta table on a local file system can overwrite each other's commit,
so compaction runs in a short window: `hold_stream` asks the stream to stop after its batch in
flight, `maintain` compacts and vacuums under the lake's writer lock (retrying on Delta write
conflicts), and the teardown `release_stream` lets market_spread_stream restart it (within a
minute). Skipped while no table has `market_spread_maintenance_min_files` data files.
Schedule: `MARKET_SPREAD_MAINTENANCE_SCHEDULE` (default daily; docs/configuration.md lists every setting).
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import dag, task

from market_spread.orchestration import tasks as orchestration


@dag(
    dag_id="market_spread_maintenance",
    schedule=orchestration.schedule_from_env("maintenance"),
    start_date=orchestration.START_DATE,
    catchup=False,
    max_active_runs=1,
    default_args=orchestration.default_args(retries=2, retry_delay=timedelta(minutes=2)),
    tags=["market-spread", "maintenance"],
    doc_md=__doc__,
)
def market_spread_maintenance() -> None:
    @task(task_id="hold_stream")
    def hold_stream() -> str:
        return orchestration.hold_stream_task()

    # One slot shared with validate: the two lake jobs never write the lake at the same time.
    @task(task_id="maintain", pool=orchestration.LAKE_JOBS_POOL)
    def maintain() -> str:
        return orchestration.maintain_task()

    @task(task_id="release_stream")
    def release_stream() -> str:
        return orchestration.release_stream_task()

    hold = hold_stream()
    # as_teardown takes an XComArg as a setup (it is a DependencyMixin); Airflow's signature says BaseOperator.
    hold >> maintain() >> release_stream().as_teardown(setups=hold)  # type: ignore[arg-type]


market_spread_maintenance()

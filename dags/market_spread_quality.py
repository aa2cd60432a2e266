"""Runs the Great Expectations suites (`market-spread validate`) on the alerts added since the last
check and on the state table. Fails on a critical violation (no retry: the data will not change
by retrying); the task log names the Data Docs location. Skips when nothing was committed since
the last successful check. Schedule: `MARKET_SPREAD_QUALITY_SCHEDULE` (default every 5 minutes).
"""
from __future__ import annotations

from airflow.sdk import dag, task

from market_spread.orchestration import tasks as orchestration
from market_spread.orchestration.data_docs_link import DataDocsLink


@dag(
    dag_id="market_spread_quality",
    schedule=orchestration.schedule_from_env("quality"),
    start_date=orchestration.START_DATE,
    catchup=False,
    max_active_runs=1,
    default_args=orchestration.default_args(),
    tags=["market-spread", "quality"],
    doc_md=__doc__,
)
def market_spread_quality() -> None:
    # One slot shared with maintain: the two lake jobs never write the lake at the same time.
    @task(task_id="validate", pool=orchestration.LAKE_JOBS_POOL, multiple_outputs=False)
    def validate() -> dict:
        return orchestration.quality_task()

    # The "Data Docs" button: that run's validation page in the UI, failed runs included.
    validate().operator.operator_extra_links = (DataDocsLink(),)


market_spread_quality()

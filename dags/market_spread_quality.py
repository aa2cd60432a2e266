"""Runs the Great Expectations suites (`market-spread validate`) on the alerts added since the last
check and on the state table. Fails on a critical violation (no retry: the data will not change
by retrying); the "Data Docs" button opens the run's report. Skips when nothing was committed since
the last successful check.

Scheduled by data: a run starts when the stream commits new alerts (the `market_spread_alerts`
asset, announced by a watcher in the triggerer, at most once per `MARKET_SPREAD_ALERTS_THROTTLE_SECONDS`),
and on the cron `MARKET_SPREAD_QUALITY_SCHEDULE` (default hourly) as a safety net. A successful run
records a `market_spread_quality_results` event whose extra holds its figures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from airflow.sdk import AssetOrTimeSchedule, CronTriggerTimetable, dag, task

from market_spread.orchestration import tasks as orchestration
from market_spread.orchestration.assets import alerts_asset, quality_results_asset
from market_spread.orchestration.data_docs_link import DataDocsLink

if TYPE_CHECKING:
    from airflow.sdk.definitions.xcom_arg import PlainXComArg


@dag(
    dag_id="market_spread_quality",
    schedule=AssetOrTimeSchedule(
        timetable=CronTriggerTimetable(orchestration.schedule_from_env("quality"), timezone="UTC"),
        assets=[alerts_asset()],
    ),
    start_date=orchestration.START_DATE,
    catchup=False,
    max_active_runs=1,
    default_args=orchestration.default_args(),
    tags=["market-spread", "quality"],
    doc_md=__doc__,
)
def market_spread_quality() -> None:
    # One slot shared with maintain: the two lake jobs never write the lake at the same time.
    # Its outlet: the event (with the run's figures) is recorded when the task succeeds.
    @task(
        task_id="validate", pool=orchestration.LAKE_JOBS_POOL, multiple_outputs=False, outlets=[quality_results_asset()]
    )
    def validate() -> dict:
        return orchestration.quality_task()

    # The "Data Docs" button: that run's validation page in the UI, failed runs included.
    # A @task call gives a PlainXComArg (Airflow types it as XComArg, which has no .operator).
    cast("PlainXComArg", validate()).operator.operator_extra_links = (DataDocsLink(),)


market_spread_quality()

"""Lands a modest synthetic demo feed (`market-spread generate --rate ...`) so the embedded
default shows live data: every minute, `market_spread_feed_seconds` (50) seconds of quotes and
orders at `market_spread_feed_rate` (20) events/s. Turn it off with the Variable
`market_spread_feed_enabled` = false (runs are then skipped) or by pausing this DAG.
"""

from __future__ import annotations

from airflow.sdk import dag, task

from market_spread.orchestration import tasks as orchestration


@dag(
    dag_id="market_spread_feed",
    schedule="* * * * *",
    start_date=orchestration.START_DATE,
    catchup=False,
    max_active_runs=1,
    default_args=orchestration.default_args(),
    tags=["market-spread", "demo"],
    doc_md=__doc__,
)
def market_spread_feed() -> None:
    @task(task_id="land_feed")
    def land_feed() -> str:
        return orchestration.feed_task()

    land_feed()


market_spread_feed()

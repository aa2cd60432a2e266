"""Launches the continuous Spark job (`market-spread stream --interval ...`) and keeps it alive.

**One run lasts as long as the stream**: while the job is healthy, its run stays `running` for
hours or days, by design. The schedule ticks every minute and "Next Run" moves with it, but no new
run starts while one is active (`max_active_runs=1`): a new run starts only in the minute after the
stream ended (stopped, crashed or found stalled), and it resumes from the checkpoint. The stream's
health is on the **Stream** page (navigation bar).

One long-running task supervises one stream; `max_active_runs=1` plus the stream's own writer lock
keep it to exactly one live job per lake. When the job dies or its health check finds it stalled
(input waiting, no batch completed for `market_spread_stall_seconds`), the task fails (red) and the
next run, scheduled every minute, starts a fresh job from the checkpoint.
Stop it by pausing this DAG (or Variable `market_spread_stream_enabled` = false): the job gets
SIGTERM, finishes the batch in flight and the task ends green.
"""

from __future__ import annotations

from airflow.sdk import dag, task

from market_spread.orchestration import tasks as orchestration
from market_spread.orchestration.assets import alerts_asset


@dag(
    dag_id="market_spread_stream",
    schedule="* * * * *",  # a dead job is restarted by the next minute's run
    start_date=orchestration.START_DATE,
    catchup=False,
    max_active_runs=1,
    default_args=orchestration.default_args(),
    tags=["market-spread", "streaming"],
    doc_md=__doc__,
)
def market_spread_stream() -> None:
    # The alerts table is this task's output, so the UI's asset views show stream -> alerts ->
    # quality. The watcher announces new alerts while the job runs; Airflow records one more
    # alerts event when this task ends green (the stream stopped), none when it fails or skips.
    @task(task_id="supervise_stream", outlets=[alerts_asset()])
    def supervise_stream() -> str:
        return orchestration.stream_task("market_spread_stream")

    supervise_stream()


market_spread_stream()

"""The task bodies the DAGs call, and what the DAG files read at parse time (START_DATE, OWNER,
default_args, schedule_from_env, the lake_jobs pool). Standard library only at module level: the
DAG files import this module.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from market_spread.orchestration.jobs import Logger, child_env, cli_argv, run_job
from market_spread.orchestration.probes import data_docs_location, live_stream, small_file_counts, tables_changed_since
from market_spread.orchestration.quality_summary import PAGE_XCOM_KEY, summarize
from market_spread.orchestration.settings import VAR_PREFIX, airflow_variable, parse_bool, resolve_settings
from market_spread.orchestration.supervisor import StreamFailed, source_args, supervise_stream
from market_spread.runtime.settings import ENV_PREFIX
from market_spread.runtime.settings import value as setting_value

# The Airflow pool (1 slot) that serialises the lake's other writers: validate appends
# quality_results, maintain rewrites files; two JVMs committing to one Delta table on a local file
# system can overwrite each other's commit. A pool slot, not a lock awaited inside a worker slot.
LAKE_JOBS_POOL = "lake_jobs"
LAKE_JOBS_POOL_DESCRIPTION = "market-spread: validate and maintain write the lake one at a time"
HOLD_VARIABLE = "market_spread_stream_hold"
START_DATE = datetime(2026, 1, 1, tzinfo=UTC)
OWNER = "data-platform"


# --------------------------------------------------------------------------------------------
# Coordination between the stream and maintenance (Airflow Variable as the switch)


def active_hold(lookup: Callable[[str], str | None] | None = None, now: float | None = None) -> str | None:
    """The reason the stream is held (maintenance window), or None. Expired holds are ignored, so a
    maintenance run that died before releasing cannot keep the stream down for good."""
    raw = (lookup or airflow_variable)(HOLD_VARIABLE)
    if not raw:
        return None
    try:
        hold = json.loads(raw)
        until = float(hold.get("until", 0))
        reason = str(hold.get("reason", "held"))
    except (ValueError, AttributeError, TypeError):
        return f"{HOLD_VARIABLE} is set"
    return reason if until > (time.time() if now is None else now) else None


# --------------------------------------------------------------------------------------------
# Task bodies: what each DAG's task runs (they import airflow.sdk, so only inside a task)


def _task_logger() -> Logger:
    task_log = logging.getLogger("airflow.task")
    return task_log.info


def _dag_paused(dag_id: str) -> bool:
    from airflow.sdk import get_current_context

    ti = get_current_context()["ti"]
    return bool(ti.get_dag(dag_id).is_paused)


def stream_task(dag_id: str = "market_spread_stream") -> str:
    """Task body of market_spread_stream: supervise one stream until stopped; fail when it dies."""
    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

    logger = _task_logger()
    settings = resolve_settings()

    def should_stop() -> str | None:
        try:
            if _dag_paused(dag_id):
                return f"the DAG {dag_id} is paused"
            # Two lookups every check, not the whole configuration.
            enabled = airflow_variable(f"{VAR_PREFIX}stream_enabled")
            if not (parse_bool(enabled) if enabled else setting_value(f"{ENV_PREFIX}STREAM_ENABLED")):
                return f"{VAR_PREFIX}stream_enabled is false"
            return active_hold()
        except Exception as exc:  # noqa: BLE001 - a hiccup of the API must not take the stream down
            logger(f"stop check failed, carrying on: {exc}")
            return None

    logger(
        f"lake {settings.lake}, "
        + (f"kafka {settings.bootstrap_servers}, " if settings.source == "kafka" else f"landing {settings.landing}, ")
        + f"interval {settings.interval:g}s, "
        f"stall after {settings.stall_seconds:g}s ({settings.startup_seconds:g}s before the first batch)"
    )
    try:
        outcome = supervise_stream(settings, should_stop, logger)
    except StreamFailed as exc:
        # No retry inside this run: the next scheduled run (every minute) starts a fresh stream,
        # and this run stays red in the grid as the record of the incident.
        raise AirflowFailException(str(exc)) from None
    summary = f"{outcome.reason}; {outcome.batches} batches" + (
        f", last batch {outcome.last_batch_id}" if outcome.last_batch_id is not None else ""
    )
    logger(summary)
    if outcome.reason.startswith("not started"):
        raise AirflowSkipException(summary)
    return summary


def feed_task() -> str:
    """Task body of market_spread_feed: land synthetic files at a modest rate for a while."""
    from airflow.sdk.exceptions import AirflowSkipException

    logger = _task_logger()
    settings = resolve_settings()
    if not settings.feed_enabled:
        raise AirflowSkipException(f"Variable {VAR_PREFIX}feed_enabled is false")
    args = [
        *source_args(settings, producer=True),
        "--rate",
        f"{settings.feed_rate:g}",
        "--duration",
        f"{settings.feed_seconds:g}",
        "--tick",
        f"{settings.feed_tick:g}",
        "--seed",
        str(int(time.time()) % 1_000_000),  # new orders every run, same symbol universe
    ]
    if settings.symbols:
        args += ["--symbols", settings.symbols]
    rc = run_job(
        cli_argv("generate", *args), logger, timeout=settings.feed_seconds + 120, env=child_env(settings, "generate")
    )
    if rc != 0:
        raise RuntimeError(f"generate exited with code {rc}")
    return f"landed {settings.feed_seconds:g}s of feed at {settings.feed_rate:g} events/s"


def quality_task() -> dict[str, Any]:
    """Task body of market_spread_quality: validate new alerts; fail on critical violations.
    Returns quality_summary.summarize's figures and the run's Data Docs page."""
    from airflow.sdk import get_current_context
    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

    logger = _task_logger()
    settings = resolve_settings()
    if not (settings.lake / "alerts" / "_delta_log").is_dir():
        raise AirflowSkipException(f"no alerts table in {settings.lake} yet")
    previous = get_current_context().get("prev_start_date_success")
    # A lazy proxy: compare through its value, never with `is None`.
    since = datetime.fromtimestamp(previous.timestamp(), tz=UTC) if previous else None
    if not tables_changed_since(settings.lake, ("alerts", "symbol_state", "batch_metrics"), since):
        raise AirflowSkipException(
            f"no new commits to alerts, symbol_state or batch_metrics since the last check ({since})"
        )
    args = ["--lake", str(settings.lake), "--docs", str(settings.docs)]
    for flag, value in (
        ("--symbols", settings.symbols),
        ("--max-spread", settings.max_spread),  # judge alerts by the thresholds the stream used
        ("--max-spread-ratio", settings.max_spread_ratio),
    ):
        if value:
            args += [flag, value]
    lines: list[str] = []  # the summary below reads the run id validate prints

    def on_line(line: str) -> None:
        lines.append(line)
        logger(line)

    rc = run_job(
        cli_argv("validate", *args),
        on_line,
        timeout=3600,
        env=child_env(settings, "validate"),
    )
    summary = summarize(settings.lake, settings.docs, lines)
    if summary["data_docs_page"]:  # before failing too: the "Data Docs" link reads it at the end
        get_current_context()["ti"].xcom_push(PAGE_XCOM_KEY, summary["data_docs_page"])
    docs = data_docs_location(settings.docs)
    logger(f"Data Docs: {docs}")
    if rc == 1:
        raise AirflowFailException(f"critical expectations failed on {settings.lake}; see the Data Docs at {docs}")
    if rc != 0:
        raise RuntimeError(f"validate exited with code {rc}; Data Docs at {docs}")
    _results_event_extra(summary)
    return summary


def _results_event_extra(summary: dict[str, Any]) -> None:
    """Attach the run's figures to the task's quality_results asset event (the DAG declares the
    outlet; Airflow records the event only when the task succeeds)."""
    from airflow.sdk import get_current_context

    from market_spread.orchestration.assets import QUALITY_RESULTS

    context = get_current_context()
    for outlet in getattr(context["task"], "outlets", None) or ():
        if getattr(outlet, "name", None) == QUALITY_RESULTS:
            context["outlet_events"][outlet].extra = json.loads(json.dumps(summary, default=str))


def hold_stream_task() -> str:
    """Task of market_spread_maintenance: ask the stream to stop for the compaction window."""
    from airflow.sdk import Variable
    from airflow.sdk.exceptions import AirflowSkipException

    logger = _task_logger()
    settings = resolve_settings()
    counts = small_file_counts(settings.lake)
    busy = {t: n for t, n in counts.items() if n >= settings.maintenance_min_files}
    if not busy:
        raise AirflowSkipException(
            f"nothing to maintain: no table has {settings.maintenance_min_files}+ data files ({counts or 'no tables'})"
        )
    logger(f"tables to maintain: {busy}")
    if not settings.maintenance_window:
        logger("maintenance window disabled: maintain runs beside the stream and skips compaction while it runs")
        return "no window"
    until = time.time() + settings.stop_timeout + 4 * 3600  # outlives any sane maintenance, not forever
    Variable.set(
        HOLD_VARIABLE, json.dumps({"reason": "maintenance window (market_spread_maintenance)", "until": until})
    )
    try:
        deadline = time.monotonic() + settings.stop_timeout + 60
        while (holder := live_stream(settings.lake)) and time.monotonic() < deadline:
            logger(f"waiting for the stream (pid {holder.get('pid')}) to finish its batch and stop")
            time.sleep(5)
    except BaseException:
        # The teardown only runs after a successful setup: do not leave the stream held.
        Variable.delete(HOLD_VARIABLE)
        raise
    if holder:
        logger("the stream is still running: maintain will skip compaction and only vacuum")
        return "stream still running"
    logger("the lake is free: compaction can run")
    return "held"


def maintain_task() -> str:
    """Task of market_spread_maintenance: `market-spread maintain` (in the lake_jobs pool)."""
    logger = _task_logger()
    settings = resolve_settings()
    args = [
        "--lake",
        str(settings.lake),
        "--retain-hours",
        str(settings.retain_hours),
        "--quote-retention-days",
        str(settings.quote_retention_days),
    ]
    if settings.master:
        args += ["--master", settings.master]
    rc = run_job(cli_argv("maintain", *args), logger, timeout=4 * 3600, env=child_env(settings, "maintain"))
    if rc != 0:
        raise RuntimeError(f"maintain exited with code {rc}")
    return "maintained"


def release_stream_task() -> str:
    """Teardown of market_spread_maintenance: lift the hold; the stream DAG restarts the job."""
    from airflow.sdk import Variable

    logger = _task_logger()
    if airflow_variable(HOLD_VARIABLE) is None:
        return "no hold to release"
    Variable.delete(HOLD_VARIABLE)
    logger("hold released: market_spread_stream starts the stream again within a minute")
    return "released"


def default_args(**overrides: Any) -> dict[str, Any]:
    """The DAGs' default_args (owner, one retry after 30 s), with `overrides` on top."""
    from datetime import timedelta

    args: dict[str, Any] = {"owner": OWNER, "retries": 1, "retry_delay": timedelta(seconds=30)}
    args.update(overrides)
    return args


def schedule_from_env(name: str) -> str:
    """A DAG's schedule (cron or preset) from MARKET_SPREAD_<NAME>_SCHEDULE, else the registry's
    default: read at parse time, so it comes from the environment (no Variable lookups while parsing)."""
    return setting_value(f"{ENV_PREFIX}{name.upper()}_SCHEDULE")

"""`market-spread validate`: Great Expectations suites on the lake, Data Docs, and a quality_results table.

Alerts are validated by batch: those of every finished batch no passing run has validated yet (the
batch ids each passing run validated are kept in `quality_results`), see quality.slices. A batch still
in flight is held back; one that can no longer finish fails the run. `--full` validates every alert. The state table is always validated whole.
A run passes only when every critical expectation of both suites holds; the command's entry point
is quality.command.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from market_spread.domain.rules import DEFAULT_THRESHOLDS, Thresholds
from market_spread.errors import UsageError
from market_spread.lake import tables as lake_mod
from market_spread.quality.defaults import DEFAULT_DOCS
from market_spread.quality.gx_run import SuiteRun, run_suites
from market_spread.quality.outcomes import ExpectationOutcome, SuiteOutcome, Summary
from market_spread.quality.results_table import (
    append_results,
    ensure_results_table,
    format_ranges,
    high_water_mark,
    validated_batches,
)
from market_spread.quality.slices import DEFAULT_ORPHAN_GRACE_S, _slice_alerts, _small
from market_spread.quality.suites import LoadedSuite, load_suites
from market_spread.quality.versions import _read, version_to_read
from market_spread.runtime.storage import Location, in_place, local_copy, location

PARAMS_VIEW = "quality_params"
METRICS_VIEW = "quality_batch_metrics"


def check_lake(lake: Location) -> None:
    """UsageError unless `lake` holds the tables validate reads (before any Spark starts)."""
    if not lake.is_dir():
        raise UsageError(f"lake not found: {lake}")
    for table in ("alerts", "symbol_state", "batch_metrics"):
        if not lake_mod.is_delta_table(lake_mod.table_path(lake, table)):
            raise UsageError(f"no Delta table {table} in {lake}: run `market-spread stream` first")


@dataclass(frozen=True)
class ValidateOptions:
    """How to validate: the command's flags, with the command's defaults."""

    docs: Location = field(default_factory=lambda: Path(DEFAULT_DOCS))  # Data Docs site and GX store (or an S3 prefix)
    full: bool = False  # every alert, not only those appended since the last passing run
    thresholds: Thresholds = DEFAULT_THRESHOLDS  # the stream's: the suites re-check its verdicts
    expectations_dir: Path | None = None  # suite files; None: the packaged suites
    orphan_grace_s: float = DEFAULT_ORPHAN_GRACE_S  # how long a batch may lack its metrics row


@dataclass(frozen=True)
class _Run:
    """One validate run's name and time, and what it validates: the alerts' slice, the state table."""

    run_id: str
    validated_at: dt.datetime
    alerts: Any  # quality.slices' slice of the alerts table
    state_version: int
    state_df: DataFrame
    state_rows: int


def validate_lake(
    spark: SparkSession,
    lake: str | Location,
    symbols: Sequence[str],
    options: ValidateOptions = ValidateOptions(),
    suites: dict[str, LoadedSuite] | None = None,
) -> Summary:
    """Validate the lake, write Data Docs and quality_results; the caller decides what to do on failure.
    `suites` are suite files loaded already (else read from options.expectations_dir).

    Raises quality_suites.SuiteFileError for a malformed suite file and market_spread.errors.UsageError
    for a lake without the product's tables.
    """
    lake = location(lake)
    check_lake(lake)
    if SparkSession.builder.getOrCreate() is not spark:
        # GX runs its SQL in the session getOrCreate() returns; the batches' temp views and ours
        # would be invisible there and the SQL checks would fail for the wrong reason.
        raise ValueError("validate_lake needs the default SparkSession (SparkSession.builder.getOrCreate())")
    parameters: dict[str, Any] = {"symbols": list(symbols)}
    if suites is None:
        suites = load_suites(options.expectations_dir, parameters)
    results_path = ensure_results_table(spark, lake)
    mark_before = high_water_mark(lake)
    run = _read_lake(spark, lake, options.full, mark_before, options.orphan_grace_s)
    outcomes, index = _run_suites(spark, lake, run, options, suites, parameters)
    suite_outcomes = _suite_outcomes(run, outcomes)
    run_passed = all(s.passed for s in suite_outcomes)
    # Recording is the last step: the batches count as validated only once this append of a
    # passing run commits, so a run that fails or dies before here is simply re-done next time.
    _record(spark, results_path, run, suite_outcomes, run_passed, options.thresholds)
    return Summary(
        run_id=run.run_id,
        lake=str(lake),
        validated_at=run.validated_at,
        max_spread=options.thresholds.max_spread,
        max_spread_ratio=options.thresholds.max_spread_ratio,
        suites=suite_outcomes,
        docs_index=index,
        mark_before=mark_before,
        # What high_water_mark() now reads, without reading it back.
        mark_after=max(mark_before or 0, run.alerts.to_version) if run_passed else mark_before,
    )


def _read_lake(spark: SparkSession, lake: Location, full: bool, mark: int | None, orphan_grace_s: float) -> _Run:
    """Name the run, and slice what it validates: the alerts of batches not validated yet (`full`:
    all), the state whole. `mark` is the newest alerts version a passing run read (shown only)."""
    validated_at = dt.datetime.now(dt.UTC).replace(microsecond=0)
    run_id = f"{validated_at:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
    alerts = _slice_alerts(
        spark, str(lake), None if full else validated_batches(lake), orphan_grace_s, from_version=None if full else mark
    )
    state_path = lake_mod.table_path(lake, "symbol_state")
    state_version = version_to_read(spark, state_path)
    state_df = _read(spark, state_path, state_version)
    return _Run(run_id, validated_at, alerts, state_version, state_df, state_df.count())


def _run_suites(
    spark: SparkSession,
    lake: Location,
    run: _Run,
    options: ValidateOptions,
    suites: dict[str, LoadedSuite],
    parameters: dict[str, Any],
) -> tuple[dict[str, list], str]:
    """Run both suites on their batches (cached while they run), with the views their SQL checks read."""
    alerts, thresholds = run.alerts, options.thresholds
    batches = {
        "alerts": _small(alerts.df, alerts.rows).cache(),
        "symbol_state": _small(run.state_df, run.state_rows).cache(),
    }
    # The SQL checks read the thresholds and the batches' metrics from these views (GX substitutes
    # suite parameters only into whole kwargs, not into the text of a query).
    spark.sql(
        f"SELECT CAST('{thresholds.max_spread}' AS DECIMAL(18,8)) AS max_spread, "
        f"CAST('{thresholds.max_spread_ratio}' AS DECIMAL(18,8)) AS max_spread_ratio"
    ).createOrReplaceTempView(PARAMS_VIEW)
    alerts.metrics.createOrReplaceTempView(METRICS_VIEW)
    shown = {"max_spread": str(thresholds.max_spread), "max_spread_ratio": str(thresholds.max_spread_ratio)}
    info = {
        "alerts": {
            "lake_table": lake_mod.table_path(lake, "alerts"),
            "after_version": "start" if alerts.from_version is None else alerts.from_version,
            "to_version": alerts.to_version,
            "rows": alerts.rows,
            "batches": format_ranges(alerts.batches) or "none",
            **shown,
        },
        "symbol_state": {
            "lake_table": lake_mod.table_path(lake, "symbol_state"),
            "version": run.state_version,
            "rows": run.state_rows,
            **shown,
        },
    }
    try:
        target = location(options.docs)
        with local_copy(target) as docs:  # GX writes local files: on S3, a copy uploaded after
            outcomes, index = run_suites(
                docs, suites, batches, SuiteRun(run.run_id, run.validated_at, parameters, info)
            )
        return outcomes, in_place(index, docs, target)
    finally:
        for view in (PARAMS_VIEW, METRICS_VIEW):
            spark.catalog.dropTempView(view)
        for df in batches.values():
            df.unpersist()


def _suite_outcomes(run: _Run, outcomes: dict[str, list[ExpectationOutcome]]) -> list[SuiteOutcome]:
    alerts = run.alerts
    alert_outcomes = list(outcomes["alerts"])
    if alerts.orphans:
        # Named on its own, whatever the suite files say: a batch that can no longer finish.
        alert_outcomes.append(
            ExpectationOutcome(
                "alerts_have_a_batch_metrics_row",
                True,
                False,
                len(alerts.orphans),
                f"orphan alerts: batch(es) {alerts.orphans[:20]} have alerts but no batch_metrics row",
            )
        )
    return [
        SuiteOutcome(
            "alerts", "alerts", alerts.from_version, alerts.to_version, alerts.rows, alert_outcomes, alerts.notes
        ),
        SuiteOutcome("symbol_state", "symbol_state", None, run.state_version, run.state_rows, outcomes["symbol_state"]),
    ]


def _record(
    spark: SparkSession,
    results_path: str,
    run: _Run,
    suite_outcomes: list[SuiteOutcome],
    run_passed: bool,
    thresholds: Thresholds,
) -> None:
    """Append one quality_results row per expectation of the run; the alerts rows name the batches
    validated (what the next runs skip once this run passed)."""
    batches = run.alerts.batches
    records = [
        dict(
            run_id=run.run_id,
            suite=s.suite,
            expectation=o.name,
            critical=o.critical,
            success=o.success,
            unexpected_count=o.unexpected_count,
            from_version=s.from_version,
            to_version=s.to_version,
            validated_at=run.validated_at,
            rows_validated=s.rows,
            run_passed=run_passed,
            observed=o.observed or None,
            max_spread=thresholds.max_spread,
            max_spread_ratio=thresholds.max_spread_ratio,
            to_batch=max(batches, default=None) if s.suite == "alerts" else None,
            batches=format_ranges(batches) if s.suite == "alerts" else None,
        )
        for s in suite_outcomes
        for o in s.outcomes
    ]
    append_results(spark, results_path, records)

"""`market-spread validate`: Great Expectations suites on the lake, Data Docs, and a quality_results table.

Alerts are validated incrementally: the rows appended to the alerts table after the last Delta version
a passing run validated (the high-water mark, kept in `quality_results`) up to the current version,
found by Delta time travel (`versionAsOf`) without needing the change data feed. `--full` validates
every alert. The state table is always validated whole. The run exits 0 only when every critical
expectation of both suites holds.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from market_spread.lake import tables as lake_mod
from market_spread.cli.options import add_lake, add_symbols, add_thresholds, load_symbols
from market_spread.domain.rules import DEFAULT_MAX_SPREAD, DEFAULT_MAX_SPREAD_RATIO

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from market_spread.quality.suites import LoadedSuite

RESULTS_TABLE = "quality_results"
RESULTS_SCHEMA = (
    "run_id STRING, suite STRING, expectation STRING, critical BOOLEAN, success BOOLEAN, "
    "unexpected_count BIGINT, from_version BIGINT, to_version BIGINT, validated_at TIMESTAMP, "
    "rows_validated BIGINT, run_passed BOOLEAN, observed STRING, "
    "max_spread DECIMAL(18,8), max_spread_ratio DECIMAL(18,8)"
)
DEFAULT_DOCS = Path("data") / "quality"
DATASOURCE = "market_spread_lake"
DOCS_SITE = "market_spread"
KEEP_DOCS_RUNS = 20  # validation results kept per suite in the GX store (and so in Data Docs)
PARAMS_VIEW = "quality_params"
METRICS_VIEW = "quality_batch_metrics"
SMALL_ROWS = 1_000_000
# How long alerts of a batch without a batch_metrics row may wait for that row: long enough for a
# batch in flight (a few seconds to minutes), short enough that a batch that never finishes is
# reported as orphaned within one quality schedule or two instead of holding the mark back forever.
DEFAULT_ORPHAN_GRACE_S = 600.0  # below this a slice is validated on one partition: task overhead dominates


# ---------------------------------------------------------------------------------------------
# Results


@dataclass
class ExpectationOutcome:
    name: str
    critical: bool
    success: bool
    unexpected_count: int | None
    observed: str  # a short human detail: sample unexpected values, observed value or the error


@dataclass
class SuiteOutcome:
    suite: str
    table: str
    from_version: int | None  # alerts: rows appended after this version; None = from the start
    to_version: int | None  # the table version validated (inclusive)
    rows: int
    outcomes: list[ExpectationOutcome] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(o.success for o in self.outcomes if o.critical)

    @property
    def failed(self) -> list[ExpectationOutcome]:
        return [o for o in self.outcomes if not o.success]


@dataclass
class Summary:
    """What one validate run found; `passed` is the exit status an orchestrator should act on."""

    run_id: str
    lake: str
    validated_at: dt.datetime
    max_spread: Decimal
    max_spread_ratio: Decimal
    suites: list[SuiteOutcome]
    docs_index: str
    mark_before: int | None
    mark_after: int | None

    @property
    def passed(self) -> bool:
        return all(s.passed for s in self.suites)

    @property
    def failed_critical(self) -> list[str]:
        return [o.name for s in self.suites for o in s.outcomes if o.critical and not o.success]

    def text(self) -> str:
        lines = [
            f"validate run {self.run_id} on {self.lake} "
            f"(max_spread={self.max_spread}, max_spread_ratio={self.max_spread_ratio})"
        ]
        for s in self.suites:
            ok = sum(1 for o in s.outcomes if o.success)
            if s.suite == "alerts":
                start = "the start" if s.from_version is None else f"version {s.from_version}"
                scope = f"{s.rows} alert(s) appended after {start} up to version {s.to_version}"
            else:
                scope = f"{s.rows} row(s) at version {s.to_version}"
            status = "PASSED" if s.passed else "FAILED"
            lines.append(
                f"suite {s.suite}: {status}, {ok}/{len(s.outcomes)} expectations passed, "
                f"{len(s.failed)} failed ({scope})"
            )
            for note in s.notes:
                lines.append(f"  note: {note}")
            for o in s.failed:
                level = "CRITICAL" if o.critical else "warning"
                count = "" if o.unexpected_count is None else f", {o.unexpected_count} unexpected"
                detail = f": {o.observed}" if o.observed else ""
                lines.append(f"  {level} {o.name}{count}{detail}")
        mark = "none" if self.mark_after is None else f"version {self.mark_after}"
        lines.append(f"alerts high-water mark: {mark}")
        lines.append(f"quality_results: {lake_mod.table_path(self.lake, RESULTS_TABLE)}")
        lines.append(f"Data Docs: {self.docs_index}")
        if self.passed:
            lines.append("result: PASSED (every critical expectation holds)")
        else:
            lines.append(f"result: FAILED ({len(self.failed_critical)} critical expectation(s) failed)")
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The lake side: versions, slices, the high-water mark


def _read(spark: SparkSession, path: str, version: int | None = None) -> DataFrame:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return reader.load(path)


def latest_version(path: str | Path) -> int:
    """The table's newest committed version, from the commit files' names (no Spark job needed).

    Commits appear atomically as `_delta_log/<20 digits>.json`; in-flight ones are hidden temp files.
    """
    versions = [int(p.name[:20]) for p in (Path(path) / "_delta_log").glob("*.json")
                if len(p.name) == 25 and p.name[:20].isdigit()]
    if not versions:
        raise FileNotFoundError(f"no Delta commits under {path}")
    return max(versions)


def ensure_results_table(spark: SparkSession, lake: str | Path) -> str:
    path = lake_mod.table_path(lake, RESULTS_TABLE)
    if not lake_mod.is_delta_table(path):
        # Same properties as the product's tables, so delta-rs readers can open it too.
        props = ", ".join(f"'{k}' = '{v}'" for k, v in lake_mod.TABLE_PROPERTIES.items())
        spark.sql(
            f"CREATE TABLE IF NOT EXISTS delta.`{path}` ({RESULTS_SCHEMA}) USING DELTA TBLPROPERTIES ({props})"
        )
    return path


def high_water_mark(lake: str | Path) -> int | None:
    """The last alerts version validated by a run that recorded its results and passed.

    Read with delta-rs: a few columns of a small table, without the Spark jobs of a Delta snapshot.
    """
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    path = lake_mod.table_path(lake, RESULTS_TABLE)
    if not lake_mod.is_delta_table(path):
        return None
    passed = (pc.field("suite") == "alerts") & pc.field("run_passed") & pc.field("to_version").is_valid()
    table = DeltaTable(path).to_pyarrow_dataset().to_table(columns=["to_version"], filter=passed)
    value = pc.max(table["to_version"]).as_py() if table.num_rows else None
    return None if value is None else int(value)


@dataclass
class _AlertSlice:
    df: DataFrame
    from_version: int | None
    to_version: int
    rows: int
    notes: list[str]
    metrics: DataFrame  # batch_metrics rows of the validated batches
    orphans: list[int] = field(default_factory=list)  # validated batches with no batch_metrics row


def _max_batch(df: DataFrame) -> int | None:
    value = df.agg({"batch_id": "max"}).collect()[0][0]
    return None if value is None else int(value)


def _profile(df: DataFrame) -> tuple[int, list[int]]:
    """Row count and distinct non-null batch ids in one pass."""
    from pyspark.sql import functions as F

    row = df.agg(F.count(F.lit(1)), F.collect_set("batch_id")).collect()[0]
    return int(row[0]), sorted(int(b) for b in row[1])


def commit_time(table: str | Path, version: int) -> float | None:
    """When `version` of the table was committed (epoch seconds): its commitInfo timestamp, else the
    commit file's modification time; None when the file is gone (cleaned up after a checkpoint)."""
    import json

    path = Path(table) / "_delta_log" / f"{version:020d}.json"
    try:
        with open(path, encoding="utf-8") as log:
            for line in log:
                info = json.loads(line).get("commitInfo") if line.strip() else None
                if isinstance(info, dict) and isinstance(info.get("timestamp"), (int, float)):
                    return info["timestamp"] / 1000.0
        return path.stat().st_mtime
    except (OSError, ValueError):
        return None


def _slice_alerts(spark: SparkSession, lake: str, from_version: int | None,
                  orphan_grace_s: float = DEFAULT_ORPHAN_GRACE_S, now: float | None = None) -> _AlertSlice:
    """The alerts appended after `from_version`, with the batch_metrics rows they must add up to.

    Alerts of the newest batch are held back while its batch_metrics row can still come (the batch
    is in flight): no later batch has a metrics row and their commit is younger than
    `orphan_grace_s`. Past that they are validated, and reported as orphans.
    """
    import time as time_mod
    from pyspark.sql import functions as F

    alerts_path = lake_mod.table_path(lake, "alerts")
    notes: list[str] = []
    to_version = latest_version(alerts_path)
    if from_version is not None and from_version > to_version:
        notes.append(f"mark {from_version} is beyond the table's version {to_version}: validating everything")
        from_version = None
    # Read batch_metrics after pinning the alerts version: the stream writes a batch's metrics
    # after its alerts, so every batch visible in these alerts has had its chance to be counted.
    metrics_path = lake_mod.table_path(lake, "batch_metrics")
    metrics_all = _read(spark, metrics_path, latest_version(metrics_path)).select("batch_id", "alerts")

    while True:
        new = _read(spark, alerts_path, to_version)
        base_batch = None
        if from_version is not None:
            try:
                old = _read(spark, alerts_path, from_version)
                base_batch = _max_batch(old)
                # Multiset difference: exact even after compaction rewrote the files. Counting here
                # reads the old version's files, so a vacuumed version fails inside this try.
                new = new.exceptAll(old)
                rows, batch_ids = _profile(new)
            except Exception as exc:  # e.g. the old version's files were vacuumed
                notes.append(
                    f"version {from_version} of alerts is no longer readable "
                    f"({str(exc).strip().splitlines()[0][:120]}); validating every alert instead"
                )
                from_version, base_batch = None, None
                new = _read(spark, alerts_path, to_version)
                rows, batch_ids = _profile(new)
        else:
            rows, batch_ids = _profile(new)
        top_batch = batch_ids[-1] if batch_ids else None
        in_flight = False
        if top_batch is not None:
            newest_metrics, has_top = metrics_all.agg(
                F.max("batch_id"), F.max(F.when(F.col("batch_id") == top_batch, 1))
            ).collect()[0]
            # Missing only for the newest batch is a batch in progress; a gap before the newest
            # metrics is a real loss and is left to the count check.
            in_flight = has_top is None and (newest_metrics is None or top_batch > newest_metrics)
        lowest = from_version if from_version is not None else 0
        if in_flight:
            committed = commit_time(alerts_path, to_version)
            age = (time_mod.time() if now is None else now) - committed if committed is not None else None
            if age is None or age >= orphan_grace_s:
                # The batch cannot be in flight any more: validate its rows (the count check and the
                # orphan check fail on them) rather than hold the mark back for good.
                in_flight = False
                notes.append(
                    f"alerts of batch {top_batch} have had no batch_metrics row for "
                    + ("longer than the log keeps" if age is None else f"{age:.0f}s")
                    + f" (grace {orphan_grace_s:g}s): validated as orphans"
                )
        if in_flight and to_version > lowest:
            # The newest batch's metrics are not committed yet (the stream is mid-batch): leave its
            # alerts to the next run rather than report a mismatch that is about to resolve itself.
            notes.append(
                f"alerts of batch {top_batch} have no batch_metrics row yet (batch in progress): "
                f"held back from version {to_version}"
            )
            to_version -= 1
            continue
        break

    cond = F.col("batch_id").isin(batch_ids) if batch_ids else F.lit(False)
    if top_batch is not None:
        # Batches between the last validated one and the newest that wrote no alert rows must
        # have counted none: this is how lost alerts show up.
        low = F.lit(True) if base_batch is None else F.col("batch_id") > base_batch
        cond = cond | (low & (F.col("batch_id") <= top_batch))
    metrics = metrics_all.where(cond)
    orphans: list[int] = []
    if batch_ids:
        counted = {int(r[0]) for r in metrics_all.where(F.col("batch_id").isin(batch_ids)).select("batch_id").distinct().collect()}
        orphans = [b for b in batch_ids if b not in counted]
    return _AlertSlice(new, from_version, to_version, rows, notes, metrics, orphans)


def _next_mark(before: int | None, to_version: int, passed: bool) -> int | None:
    """What high_water_mark() reads once this run is recorded, without reading it back."""
    if not passed:
        return before
    return to_version if before is None else max(before, to_version)


def _small(df: DataFrame, rows: int) -> DataFrame:
    return df.coalesce(1) if rows <= SMALL_ROWS else df


# ---------------------------------------------------------------------------------------------
# The GX side


def _gx_context(docs: Path):
    """A file context under the docs folder: suites, results and the HTML site all live there."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    docs.mkdir(parents=True, exist_ok=True)
    context = gx.get_context(mode="file", project_root_dir=str(docs))
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    context.config.analytics_enabled = False
    site = {
        "class_name": "SiteBuilder",
        "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(docs.resolve())},
        "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        "show_how_to_buttons": False,
    }
    sites = context.list_data_docs_sites()
    for name in list(sites):
        if name != DOCS_SITE:
            context.delete_data_docs_site(name)  # the default site would duplicate ours under gx/
    if DOCS_SITE in sites:
        context.update_data_docs_site(DOCS_SITE, site)  # the docs folder may have moved
    else:
        context.add_data_docs_site(DOCS_SITE, site)
    context.variables.save()
    return context


def _failed_samples(batch_definition: Any, df: DataFrame, suite: Any, result: Any,
                    parameters: dict[str, Any]) -> dict[str, list]:
    """A few unexpected values of each failed row-level expectation, validated again unstored."""
    failed = {r.expectation_config.id for r in result.results
              if not r.success and (r.result or {}).get("unexpected_count")}
    if not failed:
        return {}
    batch = batch_definition.get_batch(batch_parameters={"dataframe": df})
    samples: dict[str, list] = {}
    for expectation in suite.expectations:
        if expectation.id in failed:
            again = batch.validate(
                expectation, result_format={"result_format": "BASIC", "partial_unexpected_count": 5},
                expectation_parameters=parameters,
            )
            samples[expectation.id] = list((again.result or {}).get("partial_unexpected_list") or [])
    return samples


def _fmt_sample(value: Any) -> str:
    if isinstance(value, Decimal):
        return format(value.normalize(), "f")  # 0E-8 -> 0, 189.05000000 -> 189.05
    return str(value)


def _error(info: Any) -> str | None:
    """The first error message in a result's exception_info: either {raised_exception, message, ...}
    for the expectation itself, or {metric id: ExceptionInfo} when a metric it needs failed."""
    if not info:
        return None
    if isinstance(info, dict) and "raised_exception" in info:
        return str(info.get("exception_message") or "error") if info.get("raised_exception") else None
    if isinstance(info, dict):
        for item in info.values():
            try:
                message = item["exception_message"]
            except (TypeError, KeyError):
                continue
            if message:
                return str(message)
        return "a metric could not be computed"
    return None


def _observed(result: Any, sample: list | None = None) -> tuple[int | None, str]:
    error = _error(result.exception_info)
    if error:
        lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
        return None, f"error: {' '.join(lines)[:300]}"
    res = result.result or {}
    if "unexpected_count" in res:
        sample = sample or res.get("partial_unexpected_list") or []
        text = f"e.g. {[_fmt_sample(v) for v in sample[:5]]}" if sample else ""
        return int(res["unexpected_count"] or 0), text
    observed = res.get("observed_value")
    if result.expectation_config.type == "unexpected_rows_expectation" and observed is not None:
        return int(observed), f"{observed} row(s) returned by the check's query"
    return None, "" if observed is None else f"observed {observed}"


def _run_suites(
    spark: SparkSession,
    docs: Path,
    suites: dict[str, LoadedSuite],
    batches: dict[str, DataFrame],
    parameters: dict[str, Any],
    run_id: str,
    validated_at: dt.datetime,
    run_info: dict[str, dict[str, Any]],
) -> tuple[dict[str, list[ExpectationOutcome]], str]:
    import great_expectations as gx
    from great_expectations.core.run_identifier import RunIdentifier

    context = _gx_context(docs)
    datasource = context.data_sources.add_or_update_spark(name=DATASOURCE, persist=False)
    outcomes: dict[str, list[ExpectationOutcome]] = {}
    results: dict[str, Any] = {}
    for name, loaded in suites.items():
        suite = context.suites.add_or_update(loaded.suite)
        by_id = {e.id: info for e, info in zip(suite.expectations, loaded.infos)}
        asset = datasource.add_dataframe_asset(name=name)
        batch_definition = asset.add_batch_definition_whole_dataframe("validated")
        definition = context.validation_definitions.add_or_update(
            gx.ValidationDefinition(name=name, data=batch_definition, suite=suite)
        )
        # No sample values in the stored run: fetching them costs one Spark job per expectation
        # even when nothing is unexpected. Failed expectations get their samples just below.
        result = definition.run(
            batch_parameters={"dataframe": batches[name]},
            expectation_parameters=parameters,
            result_format={"result_format": "BASIC", "partial_unexpected_count": 0},
            run_id=RunIdentifier(run_name=run_id, run_time=validated_at),
        )
        samples = _failed_samples(batch_definition, batches[name], suite, result, parameters)
        found = []
        for r in result.results:
            info = by_id.get(r.expectation_config.id)
            if info is None:  # never expected: every result comes from a loaded expectation
                raise RuntimeError(f"result for an unknown expectation: {r.expectation_config.type}")
            count, text = _observed(r, samples.get(r.expectation_config.id))
            found.append(ExpectationOutcome(info.name, info.critical, bool(r.success), count, text))
        order = {info.name: i for i, info in enumerate(loaded.infos)}
        found.sort(key=lambda o: order[o.name])
        if len(found) != len(loaded.infos):
            raise RuntimeError(f"suite {name}: {len(found)} results for {len(loaded.infos)} expectations")
        outcomes[name] = found
        results[name] = result

    store = context.validation_results_store
    # Data Docs show a result's batch markers under "Show more info": put the Delta version range
    # and the thresholds there, so the HTML report says what exactly was validated.
    for key in store.list_keys():
        if key.run_id.run_name == run_id and key.expectation_suite_identifier.name in results:
            stored = results[key.expectation_suite_identifier.name]
            markers = dict(stored.meta.get("batch_markers") or {})
            markers.update({k: str(v) for k, v in run_info[key.expectation_suite_identifier.name].items()})
            stored.meta["batch_markers"] = markers
            store.set(key, stored)
    keys = store.list_keys()
    # Keep the last runs only, so the site and its rebuild stay small; quality_results keeps history.
    for suite_name in suites:
        mine = sorted(
            (k for k in keys if k.expectation_suite_identifier.name == suite_name),
            key=lambda k: k.run_id.run_time,
            reverse=True,
        )
        for old in mine[KEEP_DOCS_RUNS:]:
            store.remove_key(old)
    new_results = [k for k in store.list_keys() if k.run_id.run_name == run_id]
    from great_expectations.data_context.types.resource_identifiers import ExpectationSuiteIdentifier

    resources: list[Any] = [ExpectationSuiteIdentifier(name=n) for n in suites] + new_results
    urls = context.build_data_docs(site_names=[DOCS_SITE], resource_identifiers=resources)
    index = str(docs.resolve() / "index.html")
    url = urls.get(DOCS_SITE, "")
    if url.startswith("file://"):
        index = url[len("file://"):]
    return outcomes, index


# ---------------------------------------------------------------------------------------------
# The run


def _check_lake(lake: Path) -> None:
    from market_spread.cli.main import UsageError

    if not lake.is_dir():
        raise UsageError(f"lake not found: {lake}")
    for table in ("alerts", "symbol_state", "batch_metrics"):
        if not lake_mod.is_delta_table(lake_mod.table_path(lake, table)):
            raise UsageError(f"no Delta table {table} in {lake}: run `market-spread stream` first")


def validate_lake(
    spark: SparkSession,
    lake: str | Path,
    symbols: Sequence[str],
    docs: str | Path = DEFAULT_DOCS,
    full: bool = False,
    max_spread: Decimal = DEFAULT_MAX_SPREAD,
    max_spread_ratio: Decimal = DEFAULT_MAX_SPREAD_RATIO,
    expectations_dir: str | Path | None = None,
    suites: dict[str, LoadedSuite] | None = None,
    orphan_grace_s: float = DEFAULT_ORPHAN_GRACE_S,
) -> Summary:
    """Validate the lake, write Data Docs and quality_results; the caller decides what to do on failure.

    Raises quality_suites.SuiteFileError for a malformed suite file and market_spread.cli.main.UsageError
    for a lake without the product's tables.
    """
    from pyspark.sql import Row, SparkSession

    from market_spread.quality.suites import load_suites

    lake = Path(lake)
    docs = Path(docs)
    _check_lake(lake)
    if SparkSession.builder.getOrCreate() is not spark:
        # GX runs its SQL in the session getOrCreate() returns; the batches' temp views and ours
        # would be invisible there and the SQL checks would fail for the wrong reason.
        raise ValueError("validate_lake needs the default SparkSession (SparkSession.builder.getOrCreate())")
    parameters: dict[str, Any] = {"symbols": list(symbols)}
    if suites is None:
        suites = load_suites(expectations_dir, parameters)

    validated_at = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    run_id = f"{validated_at:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
    results_path = ensure_results_table(spark, lake)
    mark_before = high_water_mark(lake)

    alerts = _slice_alerts(spark, str(lake), None if full else mark_before, orphan_grace_s)
    state_path = lake_mod.table_path(lake, "symbol_state")
    state_version = latest_version(state_path)
    state_df = _read(spark, state_path, state_version)
    state_rows = state_df.count()

    batches = {
        "alerts": _small(alerts.df, alerts.rows).cache(),
        "symbol_state": _small(state_df, state_rows).cache(),
    }
    # The SQL checks read the thresholds and the batches' metrics from these views (GX substitutes
    # suite parameters only into whole kwargs, not into the text of a query).
    spark.sql(
        f"SELECT CAST('{max_spread}' AS DECIMAL(18,8)) AS max_spread, "
        f"CAST('{max_spread_ratio}' AS DECIMAL(18,8)) AS max_spread_ratio"
    ).createOrReplaceTempView(PARAMS_VIEW)
    alerts.metrics.createOrReplaceTempView(METRICS_VIEW)
    thresholds = {"max_spread": str(max_spread), "max_spread_ratio": str(max_spread_ratio)}
    run_info = {
        "alerts": {"lake_table": lake_mod.table_path(lake, "alerts"), "after_version": "start" if alerts.from_version is None
                   else alerts.from_version, "to_version": alerts.to_version, "rows": alerts.rows, **thresholds},
        "symbol_state": {"lake_table": lake_mod.table_path(lake, "symbol_state"), "version": state_version,
                         "rows": state_rows, **thresholds},
    }
    try:
        outcomes, index = _run_suites(
            spark, docs, suites, batches, parameters, run_id, validated_at, run_info
        )
    finally:
        for view in (PARAMS_VIEW, METRICS_VIEW):
            spark.catalog.dropTempView(view)
        for df in batches.values():
            df.unpersist()

    alert_outcomes = list(outcomes["alerts"])
    if alerts.orphans:
        # Named on its own, whatever the suite files say: a batch that can no longer finish.
        alert_outcomes.append(ExpectationOutcome(
            "alerts_have_a_batch_metrics_row", True, False, len(alerts.orphans),
            f"orphan alerts: batch(es) {alerts.orphans[:20]} have alerts but no batch_metrics row",
        ))
    suite_outcomes = [
        SuiteOutcome("alerts", "alerts", alerts.from_version, alerts.to_version, alerts.rows,
                     alert_outcomes, alerts.notes),
        SuiteOutcome("symbol_state", "symbol_state", None, state_version, state_rows, outcomes["symbol_state"]),
    ]
    run_passed = all(s.passed for s in suite_outcomes)
    records = [
        Row(
            run_id=run_id, suite=s.suite, expectation=o.name, critical=o.critical, success=o.success,
            unexpected_count=o.unexpected_count, from_version=s.from_version, to_version=s.to_version,
            validated_at=validated_at, rows_validated=s.rows, run_passed=run_passed,
            observed=o.observed or None, max_spread=max_spread, max_spread_ratio=max_spread_ratio,
        )
        for s in suite_outcomes
        for o in s.outcomes
    ]
    # Recording is the last step: the mark (max to_version of passed runs) moves only once this
    # append commits, so a run that dies before here is simply re-done next time.
    spark.createDataFrame(records, RESULTS_SCHEMA).write.format("delta").mode("append").save(results_path)
    return Summary(
        run_id=run_id,
        lake=str(lake),
        validated_at=validated_at,
        max_spread=max_spread,
        max_spread_ratio=max_spread_ratio,
        suites=suite_outcomes,
        docs_index=index,
        mark_before=mark_before,
        # What high_water_mark() now reads, without reading it back.
        mark_after=_next_mark(mark_before, alerts.to_version, run_passed),
    )


def configure(parser: argparse.ArgumentParser) -> None:
    add_lake(parser)
    add_symbols(parser)
    parser.add_argument(
        "--docs", default=str(DEFAULT_DOCS), help="folder for the Data Docs site and GX files (default: data/quality)"
    )
    parser.add_argument(
        "--full", action="store_true", help="validate every alert, not only those since the last passing run"
    )
    parser.add_argument(
        "--orphan-grace-seconds", type=_grace, default=DEFAULT_ORPHAN_GRACE_S, metavar="S",
        help="alerts of a batch with no batch_metrics row wait this long for it (a batch in flight), then are "
             f"validated and reported as orphans, failing the run (default {DEFAULT_ORPHAN_GRACE_S:g})",
    )
    parser.add_argument(
        "--expectations", default=None, help="folder of alerts.json and symbol_state.json (default: expectations/)"
    )
    add_thresholds(parser)


def _grace(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be >= 0 seconds: {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    from market_spread.cli.main import UsageError
    from market_spread.quality.suites import SuiteFileError, load_suites

    lake = Path(args.lake)
    _check_lake(lake)  # before starting Spark: a wrong path answers at once
    symbols = load_symbols(args.symbols)
    try:
        suites = load_suites(args.expectations, ["symbols"])
    except SuiteFileError as exc:
        raise UsageError(str(exc)) from None

    from pyspark.sql import SparkSession

    from market_spread.runtime.spark import build_session

    # In-process callers (tests, an Airflow task) already have a session: use the default one, the
    # session GX itself picks up with getOrCreate(), without build_session resetting its settings.
    owned = SparkSession.getActiveSession() is None
    spark = build_session("market-spread-validate") if owned else SparkSession.builder.getOrCreate()
    try:
        summary = validate_lake(
            spark, lake, symbols, docs=args.docs, full=args.full, max_spread=args.max_spread,
            max_spread_ratio=args.max_spread_ratio, suites=suites, orphan_grace_s=args.orphan_grace_seconds,
        )
    finally:
        if owned:
            spark.stop()
    print(summary.text(), flush=True)
    return 0 if summary.passed else 1

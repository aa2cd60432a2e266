"""The Great Expectations side of a run: the file context under the docs folder, the suites run on
the batches, sample unexpected values, and the Data Docs site."""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from market_spread.quality.outcomes import ExpectationOutcome

if TYPE_CHECKING:
    from great_expectations.data_context.store.store import DataDocsSiteConfigTypedDict
    from pyspark.sql import DataFrame

    from market_spread.quality.suites import LoadedSuite

DATASOURCE = "market_spread_lake"
DOCS_SITE = "market_spread"
KEEP_DOCS_RUNS = 20  # validation results kept per suite in the GX store (and so in Data Docs)


def _gx_context(docs: Path):
    """A file context under the docs folder: suites, results and the HTML site all live there."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    docs.mkdir(parents=True, exist_ok=True)
    context = gx.get_context(mode="file", project_root_dir=str(docs))
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    context.config.analytics_enabled = False
    # GX's typed dict for a site lists only some of its keys (not show_how_to_buttons).
    site = cast(
        "DataDocsSiteConfigTypedDict",
        {
            "class_name": "SiteBuilder",
            "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(docs.resolve())},
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            "show_how_to_buttons": False,
        },
    )
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


def _failed_samples(
    batch_definition: Any, df: DataFrame, suite: Any, result: Any, parameters: dict[str, Any]
) -> dict[str, list]:
    """A few unexpected values of each failed row-level expectation, validated again unstored."""
    failed = {
        r.expectation_config.id for r in result.results if not r.success and (r.result or {}).get("unexpected_count")
    }
    if not failed:
        return {}
    batch = batch_definition.get_batch(batch_parameters={"dataframe": df})
    samples: dict[str, list] = {}
    for expectation in suite.expectations:
        if expectation.id in failed:
            again = batch.validate(
                expectation,
                result_format={"result_format": "BASIC", "partial_unexpected_count": 5},
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


@dataclass(frozen=True)
class SuiteRun:
    """One validate run as GX sees it: its name and time, the suites' parameters, and per suite what
    was validated (shown in Data Docs)."""

    run_id: str
    validated_at: dt.datetime
    parameters: dict[str, Any]
    info: dict[str, dict[str, Any]]


def run_suites(
    docs: Path,
    suites: dict[str, LoadedSuite],
    batches: dict[str, DataFrame],
    run: SuiteRun,
) -> tuple[dict[str, list[ExpectationOutcome]], str]:
    """Run each suite on its batch, write the results and the Data Docs site under `docs`.
    Returns the outcomes per suite and the path of the site's index."""
    context = _gx_context(docs)
    datasource = context.data_sources.add_or_update_spark(name=DATASOURCE, persist=False)
    outcomes: dict[str, list[ExpectationOutcome]] = {}
    results: dict[str, Any] = {}
    for name, loaded in suites.items():
        outcomes[name], results[name] = _run_suite(context, datasource, name, loaded, batches[name], run)
    store = context.validation_results_store
    _mark_batches(store, results, run)
    _keep_last_runs(store, suites)
    return outcomes, _build_docs(context, docs, suites, run)


def _run_suite(
    context: Any, datasource: Any, name: str, loaded: LoadedSuite, batch: DataFrame, run: SuiteRun
) -> tuple[list[ExpectationOutcome], Any]:
    """One suite run on its batch and stored; its outcomes in the file's order, and GX's result."""
    import great_expectations as gx
    from great_expectations.core.run_identifier import RunIdentifier

    suite = context.suites.add_or_update(loaded.suite)
    asset = datasource.add_dataframe_asset(name=name)
    batch_definition = asset.add_batch_definition_whole_dataframe("validated")
    definition = context.validation_definitions.add_or_update(
        gx.ValidationDefinition(name=name, data=batch_definition, suite=suite)
    )
    # No sample values in the stored run: fetching them costs one Spark job per expectation
    # even when nothing is unexpected. Failed expectations get their samples just below.
    result = definition.run(
        batch_parameters={"dataframe": batch},
        expectation_parameters=run.parameters,
        result_format={"result_format": "BASIC", "partial_unexpected_count": 0},
        run_id=RunIdentifier(run_name=run.run_id, run_time=run.validated_at),
    )
    samples = _failed_samples(batch_definition, batch, suite, result, run.parameters)
    return _outcomes(name, loaded, suite, result, samples), result


def _outcomes(
    name: str, loaded: LoadedSuite, suite: Any, result: Any, samples: dict[str, list]
) -> list[ExpectationOutcome]:
    """One outcome per loaded expectation, in the suite file's order."""
    by_id = {e.id: info for e, info in zip(suite.expectations, loaded.infos)}
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
    return found


def _mark_batches(store: Any, results: dict[str, Any], run: SuiteRun) -> None:
    """Data Docs show a result's batch markers under "Show more info": put the Delta version range
    and the thresholds there, so the HTML report says what exactly was validated."""
    for key in store.list_keys():
        if key.run_id.run_name == run.run_id and key.expectation_suite_identifier.name in results:
            stored = results[key.expectation_suite_identifier.name]
            markers = dict(stored.meta.get("batch_markers") or {})
            markers.update({k: str(v) for k, v in run.info[key.expectation_suite_identifier.name].items()})
            stored.meta["batch_markers"] = markers
            store.set(key, stored)


def _keep_last_runs(store: Any, suites: dict[str, LoadedSuite]) -> None:
    """Keep the last runs only, so the site and its rebuild stay small; quality_results keeps history."""
    keys = store.list_keys()
    for suite_name in suites:
        mine = sorted(
            (k for k in keys if k.expectation_suite_identifier.name == suite_name),
            key=lambda k: k.run_id.run_time,
            reverse=True,
        )
        for old in mine[KEEP_DOCS_RUNS:]:
            store.remove_key(old)


def _build_docs(context: Any, docs: Path, suites: dict[str, LoadedSuite], run: SuiteRun) -> str:
    """Rebuild the Data Docs pages of the suites and of this run; returns the path of the site's index."""
    from great_expectations.data_context.types.resource_identifiers import ExpectationSuiteIdentifier

    store = context.validation_results_store
    new_results = [k for k in store.list_keys() if k.run_id.run_name == run.run_id]
    resources: list[Any] = [ExpectationSuiteIdentifier(name=n) for n in suites] + new_results
    urls = context.build_data_docs(site_names=[DOCS_SITE], resource_identifiers=resources)
    index = str(docs.resolve() / "index.html")
    url = urls.get(DOCS_SITE, "")
    if url.startswith("file://"):
        index = url[len("file://") :]
    return index

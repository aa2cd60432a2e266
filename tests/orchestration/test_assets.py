"""The assets the DAG files declare (orchestration/assets.py) and the figures the validate task puts
in its quality_results event. In process, no live Airflow: the Task SDK's own outlet-event
accessors, as the task runner serializes them for the API server."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from market_spread.orchestration import assets, tasks


def test_the_assets_name_the_lake_tables_the_environment_names(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MARKET_SPREAD_HOME", str(tmp_path))
    monkeypatch.setenv("MARKET_SPREAD_LAKE", "data/lake")  # relative: in the project home
    monkeypatch.setenv("MARKET_SPREAD_ALERTS_THROTTLE_SECONDS", "30")
    alerts = assets.alerts_asset()
    assert alerts.name == "market_spread_alerts"
    assert alerts.uri == (tmp_path / "data" / "lake" / "alerts").as_uri()
    (watcher,) = alerts.watchers
    assert watcher.trigger.table == str(tmp_path / "data" / "lake" / "alerts")
    assert watcher.trigger.throttle_seconds == 30.0 and watcher.trigger.quality_dag_id == assets.QUALITY_DAG_ID
    results = assets.quality_results_asset()
    assert (results.name, results.uri) == (
        "market_spread_quality_results",
        (tmp_path / "data" / "lake" / "quality_results").as_uri(),
    )


def test_validate_puts_its_figures_in_the_quality_results_event(tmp_path: Path, monkeypatch) -> None:
    from airflow.sdk.execution_time.context import OutletEventAccessors
    from airflow.sdk.execution_time.task_runner import _serialize_outlet_events

    monkeypatch.setenv("MARKET_SPREAD_LAKE", str(tmp_path / "lake"))
    outlet = assets.quality_results_asset()
    events = OutletEventAccessors()
    context = {"task": SimpleNamespace(outlets=[outlet]), "outlet_events": events}
    monkeypatch.setattr("airflow.sdk.get_current_context", lambda: context)
    summary = {
        "run_id": "r1",
        "passed": True,
        "suites": {"alerts": {"expectations_passed": 12, "expectations_failed": 0, "rows": 40}},
        "expectations_passed": 12,
        "expectations_failed": 0,
        "batches_checked": "0-41",
        "data_docs_page": "validations/alerts/r1.html",
    }
    tasks._results_event_extra(summary)
    assert list(_serialize_outlet_events(events)) == [
        {"dest_asset_key": {"name": outlet.name, "uri": outlet.uri}, "extra": summary}
    ]
